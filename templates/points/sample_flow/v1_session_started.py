trace_flow(uid=str(prompt.get('uid', 'unknown')), traj_uid=str(i),
           from_module='AgentLoopWorkerTQ', to_module='AgentLoopWorkerTQ',
           stage='AGENT_LOOP',
           detail=f'session_started_session_id={i}_rollout_n={n}',
           global_step=int(prompt.get('global_steps', -1)))
# v1 numbers trajectories by session id (TQ key {uid}_{session_id}_{index});
# a traj_uid already in the prompt wins, and no keyword is passed twice
_session_prompt = {"traj_uid": str(i), **prompt}
