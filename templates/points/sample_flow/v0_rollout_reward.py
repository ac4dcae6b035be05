if 'reward_score' in result:  # no score, nothing to report (and no KeyError)
    trace_flow(uid=kwargs.get('uid', 'unknown'), traj_uid=kwargs.get('traj_uid', 'N/A'),
               from_module='RewardLoopWorker', to_module='AgentLoopWorker',
               stage='ROLLOUT_REWARD',
               detail=f"reward_score_computed_score={result['reward_score']}")
