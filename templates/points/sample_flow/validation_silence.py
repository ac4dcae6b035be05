# A validation sample never reaches training: silence every trace_flow of this task.
if trajectory.get("validate", False):
    suppress_sample_trace()
