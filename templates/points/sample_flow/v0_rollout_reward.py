# a reward result without a score is traced as score None, never a KeyError
trace_flow(uid=kwargs.get('uid', 'unknown'), traj_uid=kwargs.get('traj_uid', 'N/A'),
           from_module='RewardLoopWorker', to_module='AgentLoopWorker',
           stage='ROLLOUT_REWARD',
           detail=f"reward_score_computed_score={result.get('reward_score')}")
