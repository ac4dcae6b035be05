"""The pipeline events the sample-flow CSV can hold (v0 and v1 stage/detail strings), by code.

The events, their stages and details are the runtime's format (``trace_instrument.formats``,
in the pipeline order ``Event`` follows). The codes are the ``code`` column of the events
table (``sql/events.sql`` maps stage and detail to them with ``event_of``); their order is
the pipeline order used to sort a sample's rows, except that the generate / tool loop events
share one rank and are ordered by time.
"""

from __future__ import annotations

import re
from enum import IntEnum

from trace_instrument.formats import EVENTS


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


# stage:detail, the event's name (the runtime's format defines stage and detail)
EVENT_NAMES: dict[int, str] = {
    Event[name]: f"{stage}:{detail}" if detail else stage for name, (stage, detail, _) in EVENTS.items()
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


def event_of(stage: str, detail: str) -> str:
    """SQL: the code of the event the row's ``stage`` and ``detail`` columns name (NULL: none), each
    event told as the format says (the detail as written, its start, or the stage alone)."""
    cases = []
    for name, (stage_name, _, written) in EVENTS.items():
        condition = f"{stage} = {_quoted(stage_name)}"
        if written.endswith("*") and written != "*":
            condition += f" AND {detail} LIKE {_quoted(written[:-1] + '%')}"
        elif written != "*":
            condition += f" AND {detail} = {_quoted(written)}"
        cases.append(f"WHEN {condition} THEN {int(Event[name])}")
    return "CASE " + " ".join(cases) + " END"


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


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
