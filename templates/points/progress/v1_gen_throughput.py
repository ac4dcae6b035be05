# In separate_async the gen window only waits on the replay buffer: no throughput there.
if not _pp:
    # a KVBatchMeta holds no tensors: sum the response_len tags instead
    _gen_tokens = sum(
        int(_tag.get("response_len", 0) or 0)
        for _tag in batch.tags
        if isinstance(_tag, dict) and not _tag.get("is_padding", False)
    )
    log_gen_throughput_tokens(_gen_tokens, timing_raw.get("gen"))
