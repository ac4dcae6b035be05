"""The pipeline events the sample-flow CSV can hold (v0 and v1 stage/detail strings), by code.

The codes are the ``code`` column of the events table (``sql/events.sql`` maps stage and
detail to them); their order is the pipeline order used to sort a sample's rows, except
that the generate / tool loop events share one rank and are ordered by time.
"""

from __future__ import annotations

import re
from enum import IntEnum


class Event(IntEnum):
    """A pipeline event of the sample-flow CSV, by its code (the pipeline order)."""

    UID_GENERATED = 1
    TRAJ_UID_GENERATED = 2
    DISPATCHED_TO_MANAGER = 3
    DISPATCHED_TO_WORKER = 4
    AGENT_TASK_STARTED = 5
    SESSION_STARTED = 6
    GENERATE_REQUEST_SENT = 7
    GENERATE_RESPONSE_RECEIVED = 8
    TOOL_EXECUTED = 9
    AGENT_RUN_COMPLETED = 10
    ROLLOUT_REWARD = 11
    TRAIN_SAMPLE = 12
    TRAIN_REWARD = 13
    TRAIN_LOGPROB = 14
    TRAIN_REF_LOGPROB = 15
    TRAIN_ADVANTAGE = 16
    TRAIN_UPDATE = 17
    FILTER_TRAJECTORIES = 18
    SYNC_PARAMS = 19


# stage:detail as the CSV spells it (the seed's strings); sql/events.sql maps them to the events
EVENT_NAMES: dict[int, str] = {
    Event.UID_GENERATED: "DATA_PREPROCESS:uid_generated",
    Event.TRAJ_UID_GENERATED: "DATA_PREPROCESS:traj_uid_generated_by_repeat",
    Event.DISPATCHED_TO_MANAGER: "DATA_DISPATCH:dispatched_to_agent_loop_manager",
    Event.DISPATCHED_TO_WORKER: "DATA_DISPATCH:dispatched_to_agent_loop_worker",
    Event.AGENT_TASK_STARTED: "AGENT_LOOP:agent_task_started",
    Event.SESSION_STARTED: "AGENT_LOOP:session_started",
    Event.GENERATE_REQUEST_SENT: "LLM_GENERATE:sending_generate_request",
    Event.GENERATE_RESPONSE_RECEIVED: "LLM_GENERATE:received_generate_response",
    Event.TOOL_EXECUTED: "AGENT_TOOL:tool_executed",
    Event.AGENT_RUN_COMPLETED: "AGENT_LOOP:agent_run_completed",
    Event.ROLLOUT_REWARD: "ROLLOUT_REWARD:reward_score_computed",
    Event.TRAIN_SAMPLE: "TRAIN_SAMPLE:sampled_from_replay_buffer",
    Event.TRAIN_REWARD: "TRAIN_REWARD:reward_extracted",
    Event.TRAIN_LOGPROB: "TRAIN_LOGPROB:old_log_prob_computed",
    Event.TRAIN_REF_LOGPROB: "TRAIN_REF_LOGPROB:ref_log_prob_computed",
    Event.TRAIN_ADVANTAGE: "TRAIN_ADVANTAGE:advantage_computed",
    Event.TRAIN_UPDATE: "TRAIN_UPDATE:actor_parameters_updated",
    Event.FILTER_TRAJECTORIES: "FILTER_TRAJECTORIES",
    Event.SYNC_PARAMS: "SYNC_PARAMS:weights_synced",
}
# Sort key of a row within its sample: pipeline rank first (the generate/tool loop shares the
# request's rank, a horizon FILTER_TRAJECTORIES row sorts before training), then time, then the
# code. Fits a BIGINT. The code breaks ties (a response and a tool row in the same millisecond keep
# their pipeline order).
_SHARED_RANKS = {
    Event.GENERATE_RESPONSE_RECEIVED: Event.GENERATE_REQUEST_SENT,
    Event.TOOL_EXECUTED: Event.GENERATE_REQUEST_SENT,
    Event.FILTER_TRAJECTORIES: Event.ROLLOUT_REWARD,
}
# The timestamps the order key keeps in order: milliseconds since 1970, below 10^14 (the year 5138);
# the pipeline rank is worth 10^14 ms in it. A row with any other timestamp is refused at load.
TIMESTAMP_LIMIT = 10**14
ORDER_KEY_SQL = (
    "(((CASE code "
    + " ".join(f"WHEN {int(e)} THEN {int(rank)}" for e, rank in _SHARED_RANKS.items())
    + " ELSE code END) * 100000000000000 + ts) * 32 + code)"
)
_EVENT_MACRO = re.compile(r"\{\{\s*event\(([\w\s,]*)\)\s*\}\}")


def event_codes_in(sql: str) -> str:
    """SQL with each ``{{event(NAME, ...)}}`` replaced by the codes of those events (``5, 6``); an
    unknown name raises KeyError, so a misspelt event never becomes a silent NULL."""
    return _EVENT_MACRO.sub(lambda m: ", ".join(str(int(Event[n.strip()])) for n in m.group(1).split(",")), sql)


# The training stages a step's rows mark the end of, named by the suffix of verl's `timing_s/*` key
# for that stage (`sample` is v1's replay-buffer fetch; the weight sync is `update_weights`).
STAGE_KEYS: dict[int, str] = {
    Event.TRAIN_SAMPLE: "sample",
    Event.TRAIN_REWARD: "reward",
    Event.TRAIN_LOGPROB: "old_log_prob",
    Event.TRAIN_REF_LOGPROB: "ref",
    Event.TRAIN_ADVANTAGE: "adv",
    Event.TRAIN_UPDATE: "update_actor",
    Event.SYNC_PARAMS: "update_weights",
}

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
    if code is None or code <= Event.DISPATCHED_TO_WORKER:
        return "before rollout"
    if code <= Event.TOOL_EXECUTED:
        return "in rollout"
    if code <= Event.ROLLOUT_REWARD:
        return "awaiting training"
    return "in training"
