# attach this round's tool output to the turn that asked for it
_trace_rec = getattr(agent_data, 'trace_last_record', None)
if _trace_rec is not None:
    try:
        _trace_rec.patch_observation(
            agent_data.messages, _trace_pre_msg_len, len(agent_data.messages), tokenizer=self.tokenizer
        )
    except Exception:
        pass
