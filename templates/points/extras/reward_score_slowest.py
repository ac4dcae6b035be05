# metric loggers reject None, so the key is left out then
if reward_scores[slowest] is not None:
    timing["agent_loop/slowest/reward_score"] = reward_scores[slowest]
