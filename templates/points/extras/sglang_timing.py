# sglang reports per-request timing in meta_info when metrics are enabled;
# pass the numeric ones on so trajectory turns get their sglang_* times
for _k in (
    "e2e_latency",
    "queue_time",
    "prefill_finished_ts",
    "request_received_ts",
    "prefill_launch_latency",
):
    _v = meta_info.get(_k)
    if isinstance(_v, (int, float)):
        extra_fields[_k] = _v
