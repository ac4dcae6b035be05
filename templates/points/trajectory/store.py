# With tracing on, finished trajectories go to $VERL_TRACE_DIR/trajectory as JSONL.
# The store also points /tmp/verl_trace_trajectory_path.txt at that folder, safely.
self._trajectory_store = None
self._trajectory_instance_id = os.getpid()
_trace_dir = get_trace_dir()
if _trace_dir:
    _dump_dir = os.path.join(_trace_dir, "trajectory")
    self._trajectory_store = TrajectoryStore(_dump_dir, self._trajectory_instance_id)
    logger.info(f"TrajectoryStore initialized: dir={_dump_dir}, instance={self._trajectory_instance_id}")
