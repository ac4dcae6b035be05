trace_flow(uid=getattr(agent_data, 'trace_uid', 'unknown'),
           traj_uid=getattr(agent_data, 'trace_traj_uid', 'N/A'),
           from_module='Tool', to_module='ToolAgentLoop',
           stage='AGENT_TOOL', detail=f'tool_executed_name={tool_call.name}')
