# With tracing on, finished trajectories go to $VERL_TRACE_DIR/trajectory as JSONL.
self._trajectory_store = None
self._trajectory_instance_id = os.getpid()
_trace_dir = get_trace_dir()
if _trace_dir:
    _dump_dir = os.path.join(_trace_dir, "trajectory")
    self._trajectory_store = TrajectoryStore(_dump_dir, self._trajectory_instance_id)
    logger.info(f"TrajectoryStore initialized: dir={_dump_dir}, instance={self._trajectory_instance_id}")
    # discovery file for log collectors
    try:
        with open("/tmp/verl_trace_trajectory_path.txt", "w") as _f:
            _f.write(_dump_dir)
    except OSError:
        pass
