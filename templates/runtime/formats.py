"""The trace files' format, defined once: what the runtime writes and trace-instrument reads back.

The sample-flow CSV (its columns, the ``content`` field, the pipeline events the instrumented
code names by stage and detail) and the keys of a trajectory line. The runtime writes by these
names; trace-instrument's reader, its self-check and its tests load this very file by path (the
tool never imports verl). So it holds literals only and imports nothing.
"""

# -- the sample-flow CSV: {trace_dir}/sample/{hostname}-pid{pid}.csv, no header -----------------

SAMPLE_COLUMNS = ("job_id", "cat", "sample_id", "sample_status", "timestamp", "content")
# `content`: key=value pairs joined by "|" in this order; global_step and detail only when given
# (the detail last: it may itself hold a "|")
CONTENT_KEYS = ("from", "to", "stage", "global_step", "detail")
# `sample_status`: COMPLETE on a row of these stages (a sample's last), RUNNING on any other
STATUS_COMPLETE = "COMPLETE"
STATUS_RUNNING = "RUNNING"
COMPLETE_STAGES = ("TRAIN_UPDATE", "FILTER_TRAJECTORIES")

# The pipeline events, in pipeline order: name -> (stage, detail, detail as written). An event is
# called `stage:detail` (the stage alone when the detail is ""). The third part is how a row's
# detail is told: the text as written, a text ending in "*" the start of it (a session, a tool
# name or a score follows), "*" alone any detail (the stage is enough).
EVENTS = {
    "UID_GENERATED": ("DATA_PREPROCESS", "uid_generated", "uid_generated"),
    "TRAJ_UID_GENERATED": ("DATA_PREPROCESS", "traj_uid_generated_by_repeat", "traj_uid_generated_by_repeat"),
    "DISPATCHED_TO_MANAGER": (
        "DATA_DISPATCH",
        "dispatched_to_agent_loop_manager",
        "dispatched_to_agent_loop_manager",
    ),
    "DISPATCHED_TO_WORKER": ("DATA_DISPATCH", "dispatched_to_agent_loop_worker", "dispatched_to_agent_loop_worker"),
    "AGENT_TASK_STARTED": ("AGENT_LOOP", "agent_task_started", "agent_task_started"),
    "SESSION_STARTED": ("AGENT_LOOP", "session_started", "session_started*"),
    "GENERATE_REQUEST_SENT": ("LLM_GENERATE", "sending_generate_request", "sending_generate_request"),
    "GENERATE_RESPONSE_RECEIVED": ("LLM_GENERATE", "received_generate_response", "received_generate_response"),
    "TOOL_EXECUTED": ("AGENT_TOOL", "tool_executed", "tool_executed_name=*"),
    "AGENT_RUN_COMPLETED": ("AGENT_LOOP", "agent_run_completed", "agent_run_completed"),
    "ROLLOUT_REWARD": ("ROLLOUT_REWARD", "reward_score_computed", "reward_score_computed*"),
    "TRAIN_SAMPLE": ("TRAIN_SAMPLE", "sampled_from_replay_buffer", "*"),
    "TRAIN_REWARD": ("TRAIN_REWARD", "reward_extracted", "*"),
    "TRAIN_LOGPROB": ("TRAIN_LOGPROB", "old_log_prob_computed", "*"),
    "TRAIN_REF_LOGPROB": ("TRAIN_REF_LOGPROB", "ref_log_prob_computed", "*"),
    "TRAIN_ADVANTAGE": ("TRAIN_ADVANTAGE", "advantage_computed", "*"),
    "TRAIN_UPDATE": ("TRAIN_UPDATE", "actor_parameters_updated", "*"),
    "FILTER_TRAJECTORIES": ("FILTER_TRAJECTORIES", "", "*"),
    "SYNC_PARAMS": ("SYNC_PARAMS", "weights_synced", "*"),
}

# -- a trajectory line: {trace_dir}/trajectory/trajectory_{rank}_{time}.jsonl -------------------

# Its keys (the seed's trace_data_formats.md): two index columns, then everything else as a JSON
# string; the keys of that JSON object; and the keys of each of its turns.
TRAJECTORY_LINE_KEYS = ("prompt_uid", "sample_index", "raw_message")
RAW_MESSAGE_KEYS = (
    "request_id",
    "n_samples",
    "global_step",
    "created_at_ts",
    "completed_at_ts",
    "total_time_ms",
    "turns",
    "initial_prompt_text",
    "agent_metrics",
    # additions to the seed's format
    "agent_stop_reason",
    "response_length",
    "max_response_length",
    "min_global_steps",
    "max_global_steps",
)
TURN_KEYS = (
    "turn_index",
    "prompt_token_count",
    "completion_text",
    "completion_token_count",
    "finish_reason",
    "observation_text",
    "start_ts",
    "end_ts",
    "observation_start_ts",
    "observation_end_ts",
    "turn_total_time_ms",
    "completion_time_ms",
    "observation_time_ms",
    "sglang_time_ms",
    "sglang_queue_time_ms",
    "sglang_ttft_ms",
    "sglang_prefill_ms",
    "sglang_decode_time_ms",
    "template_overhead_tokens",
    "template_overhead_text",
)
# Why an agent loop ended, as trace_agent_stop records it in `agent_stop_reason`
AGENT_STOP_REASONS = (
    "response_length",  # the response reached rollout.response_length after a model turn
    "tool_response_length",  # the tool responses would not fit in rollout.response_length
    "max_assistant_turns",  # multi_turn.max_assistant_turns model turns were made
    "max_user_turns",  # multi_turn.max_user_turns tool turns were made
    "no_tool_call",  # the model answered without calling a tool
)

# -- the status file: {trace_dir}/status/{hostname}-pid{pid}.json -------------------------------

STATUS_FACILITIES = ("sample_flow", "progress", "trajectory")  # the keys of `lost` and `written`
# Why a record did not reach its file: the keys of `lost[facility]`
LOST_QUEUE_FULL = "queue full"  # the bounded queue had no room
LOST_WRITE_ERROR = "write error"  # the file could not be opened or written
LOST_FORMAT_ERROR = "format error"  # an id or message the caller passed cannot be turned into text
LOST_UNSERIALIZABLE = "unserializable"  # a trajectory that is not JSON-able
LOST_WRITER_CLOSED = "writer closed"  # written to a closed TrajectoryStore
LOST_REENTRANT = "re-entrant call"  # made while its own thread was inside the runtime
LOST_LOCK_TIMEOUT = "lock timeout"
LOST_NO_WRITER = "no writer thread"
LOST_NOT_REGULAR = "not a regular file"  # the path is a FIFO, socket or device: refused, it could block
LOST_FOLDER_REMOVED = "folder removed"  # written into a file whose folder was removed meanwhile
LOST_AT_EXIT = "not flushed at exit"  # in the final status file only
# every reason above, in the order the documentation lists them (literals: this file holds no names)
LOSS_REASONS = (
    "queue full",
    "write error",
    "format error",
    "unserializable",
    "writer closed",
    "re-entrant call",
    "lock timeout",
    "no writer thread",
    "not a regular file",
    "folder removed",
    "not flushed at exit",
)
