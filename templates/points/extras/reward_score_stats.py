# samples whose reward was not computed in the agent loop carry None
valid_reward_scores = np.array([s for s in reward_scores if s is not None], dtype=float)
if valid_reward_scores.size > 0:
    timing["agent_loop/reward_score/min"] = valid_reward_scores.min()
    timing["agent_loop/reward_score/max"] = valid_reward_scores.max()
    timing["agent_loop/reward_score/mean"] = valid_reward_scores.mean()
