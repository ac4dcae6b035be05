

def _trace_ids_from_batch(batch) -> tuple[list[str], list[str]]:
    """The (uids, traj_uids) of a TransferQueue batch, for tracing only.

    A key ``{uid}_{session_id}_{index}`` (both trailing parts numeric) gives
    its uid and, as traj_uid, its session id; any other key is kept whole as
    the uid, with traj_uid ``N/A``. Padding entries (tag ``is_padding``) are
    left out.
    """
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
