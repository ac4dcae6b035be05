trace_flow(uid=kwargs.get('uid', 'unknown'), traj_uid=kwargs.get('traj_uid', 'N/A'),
           from_module='RolloutReplica', to_module='SingleTurnAgentLoop',
           stage='LLM_GENERATE', detail='received_generate_response')
