trace_flow(uid=getattr(agent_data, 'trace_uid', 'unknown'),
           traj_uid=getattr(agent_data, 'trace_traj_uid', 'N/A'),
           from_module='ToolAgentLoop', to_module='RolloutReplica',
           stage='LLM_GENERATE', detail='sending_generate_request')
