trace_flow(uid=kwargs.get('uid', 'unknown'), traj_uid=kwargs.get('traj_uid', 'N/A'),
           from_module='SingleTurnAgentLoop', to_module='RolloutReplica',
           stage='LLM_GENERATE', detail='sending_generate_request')
