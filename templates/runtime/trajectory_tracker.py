"""Collects the TurnRecords of in-flight rollouts and assembles Trajectories.

Lifecycle per rollout: ``register_trajectory`` -> ``append_turn_record`` (once
per model call) -> ``build_trajectory`` -> ``unregister_trajectory``.
"""

# Containment is this package's job: no failure of the tracing's own reaches the training
# loop, and nothing else (a signal handler's exception) is kept from it (see safety.py).

from __future__ import annotations

import itertools
import logging
import threading

from . import formats, settings
from .safety import never_raise, raised_by_signal_handler, warn_once
from .trajectory_types import Trajectory, TurnRecord, _safe_len

logger = logging.getLogger(__name__)

# Why an agent loop ended, as the templates record it where verl's loops decide to stop
AGENT_STOP_REASONS = frozenset(formats.AGENT_STOP_REASONS)


def _element_count(value) -> int | None:
    size = getattr(value, "size", None)  # numpy
    if isinstance(size, int):
        return size
    numel = getattr(value, "numel", None)  # torch
    return numel() if callable(numel) else None


def _to_text(value) -> str | None:
    """``value`` as text; a one-element array or tensor yields its element."""
    if value is None or isinstance(value, str):
        return value
    try:
        item = getattr(value, "item", None)
        if callable(item) and _element_count(value) == 1:
            return str(item())
        return str(value)
    except Exception as exc:
        if raised_by_signal_handler(exc):
            raise
        return None


def _lookup(item, container_name, key):
    """``item.<container_name>.get(key)``, or None when any part is missing."""
    try:
        container = getattr(item, container_name, None)
        return container.get(key) if container is not None else None
    except Exception as exc:
        if raised_by_signal_handler(exc):
            raise
        return None


def _key_part(value) -> str:
    """``value`` as f-strings format it; an object that cannot be formatted gets a name of its own."""
    try:
        return format(value)
    except Exception as exc:
        if raised_by_signal_handler(exc):
            raise
        return f"<{type(value).__name__} {id(value):#x}>"


def _int_list(ids) -> list[int] | None:
    if ids is None:
        return None
    tolist = getattr(ids, "tolist", None)  # numpy/torch: plain ints, JSON-safe
    return list(tolist()) if callable(tolist) else list(ids)


def _decode_or_none(tokenizer, ids) -> str | None:
    if tokenizer is None or ids is None:
        return None
    try:
        return tokenizer.decode(ids, skip_special_tokens=False)
    except Exception as exc:
        if raised_by_signal_handler(exc):
            raise
        return None


class TrajectoryTracker:
    """Thread-safe map from trajectory key to the TurnRecords collected so far."""

    def __init__(self):
        self._records: dict[str, list[TurnRecord]] = {}
        self._stop_reasons: dict[str, str] = {}
        self._lock = threading.Lock()

    # -- helpers kept public for callers that build keys themselves -----------

    @staticmethod
    def make_traj_key(uid, sample_idx) -> str:
        return f"prompt-{_key_part(uid)}/sample-{_key_part(sample_idx)}"

    @staticmethod
    def extract_str(value) -> str | None:
        return _to_text(value)

    @staticmethod
    def parse_sample_index(traj_uid) -> int | None:
        """``int(traj_uid)`` when it is an integer string (an over-sample index), else None."""
        text = _to_text(traj_uid)
        if text is None:
            return None
        try:
            return int(text)
        except ValueError as exc:
            if raised_by_signal_handler(exc):
                raise
            return None

    @staticmethod
    def extract_n_samples(config) -> int | None:
        """``rollout.over_sampling.n``, else ``rollout.n``, of ``config.actor_rollout_ref``."""
        try:
            rollout = config.actor_rollout_ref.rollout
            over_sampling = rollout.get("over_sampling", None) or {}
            n = over_sampling.get("n", None)
            if n is None:
                n = rollout.get("n", None)
            return int(n) if n is not None else None
        except Exception as exc:
            if raised_by_signal_handler(exc):
                raise
            return None

    @staticmethod
    def extract_response_length(config) -> int | None:
        """``rollout.response_length`` of ``config.actor_rollout_ref``: the response budget."""
        try:
            length = config.actor_rollout_ref.rollout.get("response_length", None)
            return int(length) if length is not None else None
        except Exception as exc:
            if raised_by_signal_handler(exc):
                raise
            return None

    # -- lifecycle --------------------------------------------------------------

    def register_trajectory(self, item) -> tuple[str, str]:
        """Start collecting for ``item``; returns ``(traj_key, traj_uid)``.

        The key combines uid and traj_uid because a traj_uid alone is only an
        over-sample index and repeats across prompts.
        """
        try:
            return self._register(item)
        except Exception as exc:
            if raised_by_signal_handler(exc):
                raise
            warn_once("register_trajectory", "tracing: register_trajectory failed", exc_info=True)
            fallback_uid = str(id(item))
            return self.make_traj_key("", fallback_uid), fallback_uid

    def _register(self, item) -> tuple[str, str]:
        uid = _to_text(_lookup(item, "non_tensor_batch", "uid")) or ""
        traj_uid = _to_text(_lookup(item, "non_tensor_batch", "traj_uid"))
        if not traj_uid:
            traj_uid = str(id(item))
            logger.warning(
                "register_trajectory: item uid=%r has no traj_uid (global_step=%r); using id(item)=%s",
                uid,
                _lookup(item, "meta_info", "global_step"),
                traj_uid,
            )
        traj_key = self.make_traj_key(uid, traj_uid)
        with self._lock:
            stale = self._records.get(traj_key)
            self._records[traj_key] = []
            self._stop_reasons.pop(traj_key, None)
        if stale is not None:
            logger.warning(
                "register_trajectory: %s was already registered; discarding its %d turn record(s)",
                traj_key,
                len(stale),
            )
        return traj_key, traj_uid

    @never_raise(fallback=list)
    def get_turn_records(self, traj_key) -> list[TurnRecord]:
        """A snapshot of the records appended under ``traj_key`` (empty if unknown)."""
        with self._lock:
            return list(self._records.get(traj_key, ()))

    @never_raise()
    def append_turn_record(self, traj_key, record):
        """Add ``record``; it is dropped when the key is None or not registered."""
        if traj_key is None:
            logger.warning("append_turn_record: no traj_key given; turn record dropped")
            return
        with self._lock:
            records = self._records.get(traj_key)
            if records is not None:
                records.append(record)

    @never_raise()
    def set_stop_reason(self, traj_key, reason):
        """Record why the agent loop of ``traj_key`` ended; ignored when the key is not registered.

        The first reason stays: a loop ends at its first termination, and a reason an agent loop of
        a fork records right before its own way out comes before the catch-all of its caller."""
        with self._lock:
            if traj_key in self._records:
                self._stop_reasons.setdefault(traj_key, str(reason))

    @never_raise()
    def get_stop_reason(self, traj_key) -> str | None:
        with self._lock:
            return self._stop_reasons.get(traj_key)

    @never_raise()
    def unregister_trajectory(self, traj_key):
        with self._lock:
            self._records.pop(traj_key, None)
            self._stop_reasons.pop(traj_key, None)

    # -- assembly ---------------------------------------------------------------

    def build_trajectory(
        self,
        item,
        traj_key,
        traj_uid,
        created_at,
        tokenizer,
        instance_id,
        config,
        agent_metrics=None,
        agent_output=None,
    ) -> Trajectory:
        """Assemble the Trajectory of ``traj_key`` from its records and ``item``'s metadata.

        ``agent_output`` is the agent loop's output: its ``response_ids`` give verl's
        response length. Never raises: a failing tokenizer leaves the decoded-text
        fields None, and any other failure yields a trajectory with what could be
        collected.
        """
        completed_at = settings.clock()
        try:
            trajectory = self._build(
                item, traj_key, traj_uid, created_at, completed_at, tokenizer, instance_id, config, agent_metrics
            )
            trajectory.agent_stop_reason = self.get_stop_reason(traj_key)
            trajectory.response_length = _response_length(agent_output)
            trajectory.max_response_length = self.extract_response_length(config)
            trajectory.min_global_steps = _weight_version(agent_output, "min_global_steps")
            trajectory.max_global_steps = _weight_version(agent_output, "max_global_steps")
            return trajectory
        except Exception as exc:
            if raised_by_signal_handler(exc):
                raise
            warn_once("build_trajectory", "tracing: build_trajectory failed", exc_info=True)
            return Trajectory(
                request_id=_to_text(traj_uid) or "",
                replica_id=instance_id,
                completed_at_ts=completed_at,
                agent_metrics=agent_metrics,
            )

    def _build(
        self, item, traj_key, traj_uid, created_at, completed_at, tokenizer, instance_id, config, agent_metrics
    ) -> Trajectory:
        records = self.get_turn_records(traj_key)
        for index, record in enumerate(records):
            record.turn.turn_index = index
        for previous, current in itertools.pairwise(records):
            _fill_template_overhead(previous, current, tokenizer)
        initial_ids = _initial_prompt_ids(records)
        return Trajectory(
            request_id=_to_text(traj_uid) or "",
            prompt_uid=_to_text(_lookup(item, "non_tensor_batch", "uid")),
            sample_index=self.parse_sample_index(_lookup(item, "non_tensor_batch", "traj_uid")),
            n_samples=self.extract_n_samples(config),
            replica_id=instance_id,
            global_step=_lookup(item, "meta_info", "global_step"),
            created_at_ts=created_at,
            completed_at_ts=completed_at,
            total_time_ms=_elapsed_ms(created_at, completed_at),
            turns=[record.turn for record in records],
            initial_prompt_text=_decode_or_none(tokenizer, initial_ids),
            initial_prompt_token_ids=initial_ids,
            agent_metrics=agent_metrics,
        )


@never_raise()
def _response_length(agent_output) -> int | None:
    """``len(agent_output.response_ids)``, as verl's postprocess counts it; None without an output."""
    response_ids = getattr(agent_output, "response_ids", None)
    return None if response_ids is None else len(response_ids)


@never_raise()
def _weight_version(agent_output, key) -> int | None:
    """``agent_output.extra_fields[key]`` as an int (numpy ints too); None when missing or not a number."""
    fields = getattr(agent_output, "extra_fields", None)
    value = fields.get(key) if isinstance(fields, dict) else None
    if value is None or isinstance(value, bool):
        return None
    try:
        number = int(value)
    except (TypeError, ValueError) as exc:
        if raised_by_signal_handler(exc):
            raise
        return None
    return number if number == value else None


@never_raise()
def trace_agent_stop(agent_loop, agent_data, reason):
    """Record why ``agent_loop`` stops the rollout of ``agent_data`` (tracing on, training rollouts only).

    The rollout's key is the one the trajectory recording put on ``agent_data``;
    without it (tracing off, validation) nothing is recorded.
    """
    traj_key = getattr(agent_data, "trace_traj_key", None)
    tracker = getattr(agent_loop, "_traj_tracker", None)
    if traj_key and tracker is not None:
        tracker.set_stop_reason(traj_key, reason)


@never_raise()
def _initial_prompt_ids(records) -> list[int] | None:
    return _int_list(records[0]._prompt_ids) if records else None


def _elapsed_ms(start, end) -> float:
    try:
        return (end - start) * 1000
    except TypeError as exc:
        if raised_by_signal_handler(exc):
            raise
        return 0.0


@never_raise()
def _fill_template_overhead(previous: TurnRecord, current: TurnRecord, tokenizer):
    """Count (and decode) the chat-template tokens added between two consecutive turns.

    The current prompt is the previous prompt + its completion + its observation
    + the template glue; whatever is left after subtracting the first three is
    overhead, found in the current prompt right after previous prompt + completion.
    """
    prev, cur = previous.turn, current.turn
    if cur.prompt_token_count is None or prev.prompt_token_count is None or prev.completion_token_count is None:
        return
    overhead = (
        cur.prompt_token_count
        - prev.prompt_token_count
        - prev.completion_token_count
        - _safe_len(prev.observation_token_ids)
    )
    cur.template_overhead_tokens = overhead
    if overhead > 0:
        offset = prev.prompt_token_count + prev.completion_token_count
        cur.template_overhead_text = _decode_or_none(tokenizer, current._prompt_ids[offset : offset + overhead])
