# a reward result without a score has no score to report (and no KeyError to raise)
if 'reward_score' in result:
    trace_flow(uid=kwargs.get('uid', 'unknown'), traj_uid=kwargs.get('traj_uid', 'N/A'),
               from_module='RewardLoopWorker', to_module='AgentLoopWorker',
               stage='ROLLOUT_REWARD',
               detail=f"reward_score_computed_score={result['reward_score']}")
