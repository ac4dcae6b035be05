# Turn records of each run() are collected here under the trajectory's key.
self._traj_tracker = TrajectoryTracker()
