# validation batches are not traced; values may come wrapped in NonTensorData
_val = prompts.get("validate", False)
_val = bool(getattr(_val, "data", _val))
for _worker_idx, _chunk in enumerate(chunkes):
    _uids = _chunk.get("uid", None)
    if _uids is not None and not _val:
        _gs = _chunk.get("global_steps", -1)
        _gs = getattr(_gs, "data", _gs)
        # every position both the chunk and its uids have: an index never misses
        trace_flow(uid=[str(getattr(_uids[i], "data", _uids[i]))
                        for i in range(min(len(_chunk), len(_uids)))],
                   traj_uid='N/A',
                   from_module='AgentLoopManagerTQ', to_module=f'AgentLoopWorkerTQ_{_worker_idx}',
                   stage='DATA_DISPATCH', detail='dispatched_to_agent_loop_worker',
                   global_step=int(_gs) if isinstance(_gs, (int, np.integer)) else -1)
