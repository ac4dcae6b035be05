if not validate:
    trace_flow(uid=kwargs.get('uid', 'unknown'), traj_uid=kwargs.get('traj_uid', 'N/A'),
               from_module='AgentLoopWorker',
               to_module=f"AgentLoop({kwargs.get('agent_name', 'single_turn')})",
               stage='AGENT_LOOP', detail='agent_task_started',
               global_step=batch.meta_info.get('global_steps', -1))
