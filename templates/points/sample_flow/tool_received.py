trace_flow(uid=getattr(agent_data, 'trace_uid', 'unknown'),
           traj_uid=getattr(agent_data, 'trace_traj_uid', 'N/A'),
           from_module='RolloutReplica', to_module='ToolAgentLoop',
           stage='LLM_GENERATE', detail='received_generate_response')
