# validation batches never reach training; only training samples are traced;
# a batch without uid (another caller's) is traced as 'unknown', never a KeyError
if not prompts.meta_info.get("validate", False):
    for _worker_idx, _chunk in enumerate(chunkes):
        _traj_uids = _chunk.non_tensor_batch.get("traj_uid", np.array(["N/A"] * len(_chunk)))
        trace_flow(uid=_chunk.non_tensor_batch["uid"] if "uid" in _chunk.non_tensor_batch else "unknown",
                   traj_uid=_traj_uids,
                   from_module='AgentLoopManager', to_module=f'AgentLoopWorker_{_worker_idx}',
                   stage='DATA_DISPATCH', detail='dispatched_to_agent_loop_worker',
                   global_step=prompts.meta_info.get("global_steps", -1))
