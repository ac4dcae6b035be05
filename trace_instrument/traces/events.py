"""The pipeline events the sample-flow CSV can hold (v0 and v1 stage/detail strings), by code.

The codes are the ``code`` column of the events table (``sql/events.sql`` maps stage and
detail to them); their order is the pipeline order used to sort a sample's rows, except
that the generate / tool loop events share one rank and are ordered by time.
"""

from __future__ import annotations

EVENT_NAMES: dict[int, str] = {
    1: "DATA_PREPROCESS:uid_generated",
    2: "DATA_PREPROCESS:traj_uid_generated_by_repeat",
    3: "DATA_DISPATCH:dispatched_to_agent_loop_manager",
    4: "DATA_DISPATCH:dispatched_to_agent_loop_worker",
    5: "AGENT_LOOP:agent_task_started",
    6: "AGENT_LOOP:session_started",
    7: "LLM_GENERATE:sending_generate_request",
    8: "LLM_GENERATE:received_generate_response",
    9: "AGENT_TOOL:tool_executed",
    10: "AGENT_LOOP:agent_run_completed",
    11: "ROLLOUT_REWARD:reward_score_computed",
    12: "TRAIN_SAMPLE:sampled_from_replay_buffer",
    13: "TRAIN_REWARD:reward_extracted",
    14: "TRAIN_LOGPROB:old_log_prob_computed",
    15: "TRAIN_REF_LOGPROB:ref_log_prob_computed",
    16: "TRAIN_ADVANTAGE:advantage_computed",
    17: "TRAIN_UPDATE:actor_parameters_updated",
    18: "FILTER_TRAJECTORIES",
    19: "SYNC_PARAMS:weights_synced",
}
LOOP_CODES = (7, 8, 9)
SYNC_CODE = 19
# Sort key of a row within its sample: pipeline rank first (the generate/tool loop shares rank 7,
# a horizon FILTER_TRAJECTORIES row sorts before training), then time, then the code. Fits a BIGINT.
# The code breaks ties (a response and a tool row in the same millisecond keep their pipeline order).
ORDER_KEY_SQL = (
    "(((CASE code WHEN 8 THEN 7 WHEN 9 THEN 7 WHEN 18 THEN 11 ELSE code END) * 100000000000000 + ts) * 32 + code)"
)

MILESTONES = ("generated", "dispatched", "agent loop started", "agent loop completed", "reward", "trained")


def event_name(code: int | None) -> str:
    """Readable name of an event code."""
    if code is None:
        return "?"
    return EVENT_NAMES.get(int(code), f"event {code}")


def short_name(code: int | None) -> str:
    """The detail part of an event name (``agent_task_started``), or the stage when there is none."""
    name = event_name(code)
    return name.split(":", 1)[-1]


def in_flight_state(code: int | None) -> str:
    """Where a never-trained sample stopped."""
    if code is None or code <= 4:
        return "before rollout"
    if code <= 9:
        return "in rollout"
    if code <= 11:
        return "awaiting training"
    return "in training"
