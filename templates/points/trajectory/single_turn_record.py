if _rec is not None:
    try:
        try:
            _completion_text = self.tokenizer.decode(output.token_ids, skip_special_tokens=False)
        except Exception:
            _completion_text = ""
        # sglang timing fields come through extra_fields when the server forwards them
        _rec.fill_sglang_response(
            text=_completion_text,
            response_ids=list(output.token_ids),
            finish_reason=str(output.stop_reason) if output.stop_reason else "",
            meta=dict(output.extra_fields or {}),
        )
        # extra_fields has no completion_tokens: count the ids instead
        if _rec.turn.completion_token_count is None:
            _rec.turn.completion_token_count = len(output.token_ids)
    finally:
        _rec.stamp_end()
        self._traj_tracker.append_turn_record(_traj_key, _rec)
