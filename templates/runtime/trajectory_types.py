"""Trajectory data model: ``Turn``, ``Trajectory`` and the ``TurnRecord`` builder.

A turn is one model call (the action) plus whatever the environment answered
(the observation, e.g. tool output). Timing of one turn::

    turn_total_time_ms = completion_time_ms + observation_time_ms
    completion_time_ms   client-side generate call (start_ts -> end_ts), which
                         contains the server-side sglang_time_ms
                         = queue + ttft (prefill) + decode
    observation_time_ms  tool/environment time (observation_start_ts -> _end_ts)

Field order is the JSON key order of the trajectory dumps; do not reorder.
"""

# Containment is this package's job: no failure of the tracing's own reaches the training
# loop, and nothing else (a signal handler's exception) is kept from it (see safety.py).

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from . import settings
from .safety import never_raise, raised_by_signal_handler

_SCALAR_TYPES = (str, int, float, bool, type(None))


def _plain(value):
    """Copy of JSON-like containers (dataclasses become dicts); other objects are shared."""
    if isinstance(value, _SCALAR_TYPES):
        return value
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [item if isinstance(item, _SCALAR_TYPES) else _plain(item) for item in value]
    if isinstance(value, tuple):
        return tuple(_plain(item) for item in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return value


def _json_default(obj):
    """json.dumps fallback: make metrics objects (pydantic, numpy, sets...) serializable."""
    for convert in (_model_dump, _dataclass_dict, _tolist, _set_list):
        try:
            converted = convert(obj)
        except Exception as exc:
            if raised_by_signal_handler(exc):
                raise
            continue
        if converted is not None:
            return converted
    try:
        return str(obj)
    except Exception as exc:
        if raised_by_signal_handler(exc):
            raise
        return f"<unserializable {type(obj).__name__}>"


def _model_dump(obj):
    dump = getattr(obj, "model_dump", None)
    return dump() if callable(dump) else None


def _dataclass_dict(obj):
    return _plain(obj) if dataclasses.is_dataclass(obj) and not isinstance(obj, type) else None


def _tolist(obj):
    tolist = getattr(obj, "tolist", None)  # numpy arrays/scalars, torch tensors
    return tolist() if callable(tolist) else None


def _set_list(obj):
    return list(obj) if isinstance(obj, (set, frozenset)) else None


def _dumps_compact(data):
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=_json_default)


class _JsonRecord:
    """dict/JSON round-tripping shared by the dataclasses below."""

    def to_dict(self) -> dict:
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}

    def to_json(self) -> str:
        return _dumps_compact(self.to_dict())

    @classmethod
    def from_dict(cls, data: dict):
        """Build from a dict, ignoring keys this version does not know."""
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in known})

    @classmethod
    def from_json(cls, text: str):
        return cls.from_dict(json.loads(text))


@dataclass
class Turn(_JsonRecord):
    """One model call plus the observation that followed it."""

    turn_index: int  # 0-based position within the trajectory

    # Input sent to the inference server.
    prompt_token_count: int | None = None
    prompt_text: str | None = None  # large; not collected, dropped from dumps

    # Model output.
    completion_text: str = ""
    completion_token_ids: list[int] = field(default_factory=list)  # output tokens only
    completion_token_count: int | None = None
    finish_reason: str = ""  # "stop", "length", "tool_call" or an error string

    # Tool/environment feedback; None when the turn called no tool.
    observation_text: str | None = None
    observation_token_ids: list[int] | None = None

    # Client-side timestamps (seconds since the epoch).
    start_ts: float = 0.0  # before the generate request
    end_ts: float = 0.0  # after its response
    observation_start_ts: float | None = None
    observation_end_ts: float | None = None

    # Durations in milliseconds.
    turn_total_time_ms: float | None = None
    completion_time_ms: float = 0.0
    observation_time_ms: float | None = None

    # Server-side metrics; None unless sglang reports them (--enable-metrics).
    sglang_rid: str = ""
    sglang_time_ms: float | None = None  # server end-to-end latency
    sglang_queue_time_ms: float | None = None
    sglang_ttft_ms: float | None = None  # request received -> prefill finished
    sglang_prefill_ms: float | None = None  # GPU prefill launch latency
    sglang_decode_time_ms: float | None = None  # total - queue - ttft

    # Chat-template tokens inserted between turns (turns >= 1 only).
    template_overhead_tokens: int | None = None
    template_overhead_text: str | None = None


@dataclass
class Trajectory(_JsonRecord):
    """All turns of one rollout request. Over-samples of one prompt share ``prompt_uid``."""

    request_id: str  # the traj_uid

    prompt_uid: str | None = None
    sample_index: int | None = None  # 0..n_samples-1 when traj_uid is an index
    n_samples: int | None = None

    replica_id: int = -1  # dropped from dumps: no per-request replica in verl
    global_step: int | None = None  # weights version the rollout started with

    created_at_ts: float = 0.0
    completed_at_ts: float = 0.0
    total_time_ms: float = 0.0

    turns: list[Turn] = field(default_factory=list)
    initial_prompt_text: str | None = None
    initial_prompt_token_ids: list[int] | None = None  # large; dropped from dumps

    agent_metrics: dict | None = None  # passed through from the agent loop

    # Additions to the seed's format (readers of the seed's fields are unaffected).
    # Why the agent loop ended, where verl's loop decides it (see AGENT_STOP_REASONS); None
    # when the loop has no such decision (the single-turn loop ends after its one call).
    agent_stop_reason: str | None = None
    # verl's response_length: len(AgentLoopOutput.response_ids), the response tokens the
    # trainer sees (tool observations included, cut at the budget), and that budget
    # (rollout.response_length, the padded width verl's clip_ratio compares with).
    response_length: int | None = None
    max_response_length: int | None = None
    # The weight versions the rollout was generated with (AgentLoopOutput.extra_fields'
    # min_global_steps / max_global_steps, as verl's servers report them; None when not reported):
    # a rollout with max > min spanned a weight update.
    min_global_steps: int | None = None
    max_global_steps: int | None = None

    @classmethod
    def from_dict(cls, data: dict) -> Trajectory:
        data = dict(data)  # never mutate the caller's dict
        turns = [turn if isinstance(turn, Turn) else Turn.from_dict(turn) for turn in data.pop("turns", None) or []]
        trajectory = super().from_dict(data)
        trajectory.turns = turns
        return trajectory


def _safe_len(value):
    try:
        return len(value) if value is not None else 0
    except Exception as exc:  # unsized, or a __len__ that raises
        if raised_by_signal_handler(exc):
            raise
        return 0


def _ms(seconds: Any) -> float | None:
    """Seconds to milliseconds; None for missing or non-numeric input."""
    if seconds is None:
        return None
    if isinstance(seconds, (int, float)) and not isinstance(seconds, bool):
        return seconds * 1000
    try:
        return float(seconds) * 1000
    except (TypeError, ValueError) as exc:
        if raised_by_signal_handler(exc):
            raise
        return None


def _ms_between(start: Any, end: Any) -> float | None:
    if start is None or end is None:
        return None
    try:
        return (end - start) * 1000
    except TypeError as exc:
        if raised_by_signal_handler(exc):
            raise
        return None


def _message_field(message, key):
    getter = getattr(message, "get", None)
    if callable(getter):
        return getter(key)
    return getattr(message, key, None)


def _observation_text(message) -> str:
    content = _message_field(message, "content") or ""
    if isinstance(content, list):
        return "\n".join(str(part.get("text") or "") if isinstance(part, dict) else str(part) for part in content)
    return str(content)


class TurnRecord:
    """Mutable builder around one ``Turn``, filled in while the call is in flight.

    Created right before the generate request; the agent loop then fills in the
    response, stamps the end and, for tool turns, patches in the observation.
    None of the methods raise.
    """

    __slots__ = ("_prompt_ids", "turn")

    def __init__(self, prompt_ids, rid=""):
        self._prompt_ids = prompt_ids
        self.turn = Turn(
            turn_index=-1,
            start_ts=settings.clock(),
            sglang_rid=rid,
            prompt_token_count=_safe_len(prompt_ids),
        )

    @never_raise()
    def stamp_end(self):
        """Record the end of the generate call and its client-side duration."""
        turn = self.turn
        turn.end_ts = settings.clock()
        turn.completion_time_ms = (turn.end_ts - turn.start_ts) * 1000

    @never_raise()
    def mark_skipped(self, finish_reason="length"):
        """Close a turn that never reached the server (e.g. no token budget left)."""
        self.turn.finish_reason = finish_reason
        self.stamp_end()

    @never_raise()
    def fill_sglang_response(self, text, response_ids, finish_reason, meta):
        """Copy the completion and derive server timings from sglang's ``meta_info``.

        The queue/prefill fields exist only when sglang runs with metrics
        enabled; missing inputs leave the derived timings None.
        """
        meta = meta if meta is not None else {}
        turn = self.turn
        turn.completion_text = text
        turn.completion_token_ids = response_ids
        turn.finish_reason = finish_reason
        turn.completion_token_count = meta.get("completion_tokens")
        turn.sglang_time_ms = _ms(meta.get("e2e_latency"))
        turn.sglang_ttft_ms = _ms_between(meta.get("request_received_ts"), meta.get("prefill_finished_ts"))
        turn.sglang_queue_time_ms = _ms(meta.get("queue_time"))
        turn.sglang_prefill_ms = _ms(meta.get("prefill_launch_latency"))
        if turn.sglang_time_ms is not None:
            waiting = (turn.sglang_queue_time_ms or 0) + (turn.sglang_ttft_ms or 0)
            turn.sglang_decode_time_ms = max(0, turn.sglang_time_ms - waiting)

    @never_raise()
    def patch_observation(self, messages, pre_msg_length, msg_len, tokenizer=None):
        """Attach the tool/function messages appended since ``pre_msg_length``.

        Their contents are joined with newlines; timing runs from the end of
        the generate call to now.
        """
        if pre_msg_length >= msg_len:
            return
        parts = [
            _observation_text(message)
            for message in messages[pre_msg_length:]
            if _message_field(message, "role") in ("tool", "function")
        ]
        if not parts:
            return
        turn = self.turn
        turn.observation_text = "\n".join(parts)
        if tokenizer is not None:
            turn.observation_token_ids = _encode_or_none(tokenizer, turn.observation_text)
        now = settings.clock()
        turn.observation_start_ts = turn.end_ts or None
        turn.observation_end_ts = now
        turn.observation_time_ms = _ms_between(turn.observation_start_ts, now)
        turn.turn_total_time_ms = turn.completion_time_ms + (turn.observation_time_ms or 0)


def _encode_or_none(tokenizer, text):
    if not text:
        return None
    try:
        return tokenizer.encode(text, add_special_tokens=False)
    except Exception as exc:
        if raised_by_signal_handler(exc):
            raise
        return None
