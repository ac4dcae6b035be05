# Trajectory recording for training samples (tracing on): register before run(),
# build and dump after postprocessing, always release the tracker entry.
_traj_key = None
_traj_uid = None
_traj_created_at = None
_trace_item = None
if self._trajectory_store is not None and not trajectory.get("validate", False):
    _trace_item = SimpleNamespace(
        non_tensor_batch=kwargs, meta_info={"global_step": trajectory["step"] if "step" in trajectory else None}
    )
    _traj_key, _traj_uid = agent_loop._traj_tracker.register_trajectory(_trace_item)
    _traj_created_at = time.time()
    kwargs["trace_traj_key"] = _traj_key

try:
    __anchor_0__
    # run() alone reads trace_traj_key; keep it out of the reward request
    kwargs.pop("trace_traj_key", None)
    result = __anchor_1_value__
except Exception:
    if _traj_key is not None:
        agent_loop._traj_tracker.unregister_trajectory(_traj_key)
    raise
# One progress line per finished training rollout: the progress panel counts the
# lines that hold both 'is completed, score=' and 'status=Finished'. The score is
# read from the output _compute_score filled in, whatever postprocess returned
# (an empty list of outputs, which v1's postprocess accepts, has no score).
if not trajectory.get("validate", False):
    _score_src = output[-1] if isinstance(output, list) and output else output
    log_rollout_completed(kwargs.get('uid', 'unknown'),
                          kwargs.get('traj_uid', 'N/A'),
                          getattr(_score_src, 'reward_score', None))
if _traj_key is not None:
    try:
        # pydantic metrics are turned into a plain dict so the JSON dump cannot fail
        _agent_metrics = getattr(output, "metrics", None)
        if hasattr(_agent_metrics, "model_dump"):
            _agent_metrics = _agent_metrics.model_dump()
        elif not isinstance(_agent_metrics, (dict, type(None))):
            try:
                _agent_metrics = dict(_agent_metrics)
            except Exception:
                _agent_metrics = str(_agent_metrics)
        _traj = agent_loop._traj_tracker.build_trajectory(
            _trace_item, _traj_key, _traj_uid, _traj_created_at,
            tokenizer=self.tokenizer,
            instance_id=self._trajectory_instance_id,
            config=self.config,
            agent_metrics=_agent_metrics,
            agent_output=output,
        )
        self._trajectory_store.write(_traj)
    except Exception as _e:
        logger.warning(f"TrajectoryStore dump failed: {_e}")
    finally:
        agent_loop._traj_tracker.unregister_trajectory(_traj_key)
return result
