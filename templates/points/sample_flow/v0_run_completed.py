trace_flow(uid=kwargs.get('uid', 'unknown'), traj_uid=kwargs.get('traj_uid', 'N/A'),
           from_module=f'AgentLoop({agent_name})', to_module='AgentLoopWorker',
           stage='AGENT_LOOP', detail='agent_run_completed',
           global_step=trajectory.get('step', -1))
