if not validate:
    trace_flow(uid=str(prompt.get('uid', 'unknown')), traj_uid='N/A',
               from_module='AgentLoopWorkerTQ',
               to_module=f"AgentLoop({prompt.get('agent_name', 'single_turn')})",
               stage='AGENT_LOOP', detail='agent_task_started',
               global_step=int(prompt.get('global_steps', -1)))
