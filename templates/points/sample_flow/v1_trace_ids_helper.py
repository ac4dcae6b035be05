

def _trace_ids_from_batch(batch) -> tuple[list[str], list[str]]:
    """Trace-only helper: parse (uid, traj_uid) pairs from TransferQueue
    trajectory keys ``{uid}_{session_id}_{index}`` via rsplit with isdigit
    validation; padding samples (``is_padding`` tag) are skipped."""
    # the docstring above is the seed patch's own text: the fidelity check compares it
    _uids, _traj_uids = [], []
    for _k, _tag in zip(batch.keys, batch.tags):
        if not isinstance(_tag, dict) or _tag.get("is_padding", False):
            continue
        _parts = str(_k).rsplit("_", 2)
        if len(_parts) == 3 and _parts[1].isdigit() and _parts[2].isdigit():
            _uids.append(_parts[0])
            _traj_uids.append(_parts[1])
        else:
            _uids.append(str(_k))
            _traj_uids.append("N/A")
    return _uids, _traj_uids
