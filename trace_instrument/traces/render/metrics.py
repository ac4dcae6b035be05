"""The JSON output: one object whose metric keys follow verl's naming (``stop_reason/length/frac``)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from statistics import mean
from typing import Any

from trace_instrument.traces.events import short_name
from trace_instrument.traces.model import (
    Analysis,
    Distribution,
    ResponseLength,
    StalenessRow,
    StepRollouts,
    StepWindow,
    StopReason,
)

SCHEMA_VERSION = 1


def _dist(prefix: str, dist: Distribution) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, value in (("mean", dist.mean), ("min", dist.min), ("max", dist.max)):
        if value is not None:
            out[f"{prefix}/{key}"] = value
    out.update({f"{prefix}/{k}": v for k, v in dist.quantiles.items()})
    return out


def _seconds(values: Sequence[int | None]) -> float | None:
    present = [v for v in values if v is not None]
    return mean(present) / 1000 if present else None


def metrics(analysis: Analysis) -> dict[str, float]:
    """Flat run-level metrics, verl-style keys."""
    out: dict[str, float] = {}
    r = analysis.rollouts
    if r is not None:
        out.update(_stop_reason_keys(r.stop_reasons))
        out.update(_dist("num_turns", r.turns))
        out.update(_dist("completion_tokens", r.completion_tokens))
        out.update(_response_length_keys(r.response_length))
        for tool in r.tools:
            base = f"tool_time_ms/{tool.tool}"
            out.update(
                {
                    f"{base}/count": tool.count,
                    f"{base}/p50": tool.p50,
                    f"{base}/p90": tool.p90,
                    f"{base}/p99": tool.p99,
                    f"{base}/max": tool.max,
                }
            )
        if r.sglang.collected:
            for name, dist in r.sglang.fields.items():
                out.update(_dist(f"sglang_ms/{name}", dist))
    for lat in analysis.latencies:
        base = f"latency_ms/{short_name_of(lat.from_event)}->{short_name_of(lat.to_event)}"
        out.update(
            {
                f"{base}/count": lat.count,
                f"{base}/p50": lat.p50,
                f"{base}/p90": lat.p90,
                f"{base}/p99": lat.p99,
                f"{base}/max": lat.max,
            }
        )
    steps = analysis.steps
    for key, values in (
        ("timing_s/gen", [s.rollout_ms for s in steps]),
        ("timing_s/train", [s.train_ms for s in steps]),
        ("timing_s/overlap", [s.overlap_ms for s in steps]),
        ("timing_s/trainer_idle", [s.trainer_idle_ms for s in steps]),
    ):
        value = _seconds(values)
        if value is not None:
            out[key] = value
    if analysis.staleness:
        total = sum(row.count for row in analysis.staleness)
        out["staleness/mean"] = sum(row.staleness * row.count for row in analysis.staleness) / total
        out["staleness/max"] = max(row.staleness for row in analysis.staleness)
    rates = [s.tokens_per_s for s in analysis.step_throughput if s.tokens_per_s is not None]
    if rates:
        out["throughput/gen_tokens_per_s/mean"] = mean(rates)
    for row in analysis.funnel:
        key = row.milestone.replace(" ", "_")
        out[f"funnel/{key}/prompts"] = row.prompts
        out[f"funnel/{key}/trajectories"] = row.trajectories
    out["in_flight/count"] = sum(g.count for g in analysis.in_flight)
    return out


def short_name_of(event: str) -> str:
    return event.split(":", 1)[-1]


@dataclass(frozen=True)
class StepStaleness:
    """The staleness of the trajectories one step trained."""

    trained: int
    min: int
    mean: float
    max: int
    counts: dict[int, int]  # staleness -> trajectories


def step_staleness(rows: Sequence[StalenessRow]) -> StepStaleness | None:
    """One train step's StalenessRows summed up; None when it trained none with a known generation step."""
    n = sum(r.count for r in rows)
    if not n:
        return None
    return StepStaleness(
        trained=n,
        min=min(r.staleness for r in rows),
        mean=sum(r.staleness * r.count for r in rows) / n,
        max=max(r.staleness for r in rows),
        counts={r.staleness: r.count for r in sorted(rows, key=lambda r: r.staleness)},
    )


def staleness_by_step(analysis: Analysis) -> dict[int, StepStaleness]:
    """Each train step's staleness (steps that trained none with a known generation step are absent)."""
    rows: dict[int, list[StalenessRow]] = {}
    for row in analysis.staleness:
        rows.setdefault(row.train_step, []).append(row)
    return {step: lag for step, group in rows.items() if (lag := step_staleness(group)) is not None}


def _staleness_keys(lag: StepStaleness | None) -> dict[str, Any]:
    """``staleness/{min,mean,max}`` and ``staleness/{k}/count`` per weight-version lag; the mean and
    max are None with no trained trajectory."""
    if lag is None:
        return {"staleness/mean": None, "staleness/max": None}
    out: dict[str, Any] = {"staleness/min": lag.min, "staleness/mean": lag.mean, "staleness/max": lag.max}
    out.update({f"staleness/{k}/count": c for k, c in lag.counts.items()})
    return out


def _stage_keys(window: StepWindow) -> dict[str, float]:
    """``stage_s/{stage}``: the step's training stages row to row (model.StageTime), seconds."""
    return {f"stage_s/{t.stage}": t.ms / 1000 for t in window.stages}


def step_metrics(analysis: Analysis) -> list[dict[str, Any]]:
    """Per global step: verl-style keys for its windows, staleness and throughput."""
    throughput = {t.step: t for t in analysis.step_throughput}
    rollouts = {r.step: r for r in analysis.step_rollouts}
    stale = staleness_by_step(analysis)
    never_trained = dict(analysis.in_flight_by_step)
    out = []
    for s in analysis.steps:
        entry: dict[str, Any] = {"step": s.step}
        for key, value in (
            ("timing_s/gen", s.rollout_ms),
            ("timing_s/train", s.train_ms),
            ("timing_s/overlap", s.overlap_ms),
            ("timing_s/trainer_idle", s.trainer_idle_ms),
            ("timing_s/rollout_gap", s.rollout_gap_ms),
        ):
            entry[key] = None if value is None else value / 1000
        entry["rollout/completed"] = s.rollouts_completed
        entry["train/samples"] = s.samples_trained
        entry["progress/lines"] = s.progress
        entry["progress/order_ok"] = s.progress_order_ok
        entry["in_flight/count"] = never_trained.get(s.step, 0)  # generated in this step, never trained
        t = throughput.get(s.step)
        entry["throughput/gen_tokens_per_s"] = t.tokens_per_s if t else None
        entry["throughput/progress_tokens_per_s"] = s.gen_throughput
        _step_rollout_keys(entry, rollouts.get(s.step))
        entry.update(_staleness_keys(stale.get(s.step)))
        entry.update(_stage_keys(s))
        entry.update(_score_keys(s))
        out.append(entry)
    return out


def _stop_reason_keys(stops: Sequence[StopReason]) -> dict[str, float]:
    """``stop_reason/{reason}/count`` and ``/frac`` (the fractions sum to 1, ``unknown`` included)."""
    out: dict[str, float] = {}
    for stop in stops:
        out[f"stop_reason/{stop.reason}/count"] = stop.count
        out[f"stop_reason/{stop.reason}/frac"] = stop.frac
    return out


def _response_length_keys(length: ResponseLength) -> dict[str, float]:
    """verl's ``response_length/mean|max|min|clip_ratio``, when the trajectories recorded it."""
    values = {"mean": length.mean, "max": length.max, "min": length.min, "clip_ratio": length.clip_ratio}
    return {f"response_length/{key}": value for key, value in values.items() if value is not None}


def _step_rollout_keys(entry: dict[str, Any], step: StepRollouts | None) -> None:
    """verl's per-step rollout keys: ``stop_reason/{reason}/count|frac`` (fractions sum to 1),
    ``num_turns/*`` and ``response_length/*``; ``completion_tokens/*`` is the completion-only
    length (no tool observations)."""
    if step is None:
        return
    entry["rollout/trajectories"] = step.trajectories
    entry.update(_stop_reason_keys(step.stop_reasons))
    for name, dist in (("num_turns", step.turns), ("completion_tokens", step.completion_tokens)):
        for stat in ("mean", "min", "max"):
            entry[f"{name}/{stat}"] = getattr(dist, stat)
        for q, value in dist.quantiles.items():
            entry[f"{name}/{q}"] = value
    entry.update(_response_length_keys(step.response_length))
    if step.versioned:
        entry["staleness/spanning_versions/count"] = step.spanning
        entry["staleness/spanning_versions/frac"] = step.spanning / step.versioned


def _score_keys(window: StepWindow) -> dict[str, float]:
    """verl's ``critic/score/{mean,max,min}`` of the step, when it has scored samples."""
    score = window.score
    if not score.count:
        return {}
    return {f"critic/score/{stat}": getattr(score, stat) for stat in ("mean", "max", "min")}


def to_json(analysis: Analysis, baselines: Sequence[dict[str, Any]] = ()) -> str:
    """The ``--format json`` document; ``baselines``: the comparison with each other run
    (render/compare.py), the first also as ``baseline``."""
    details = asdict(analysis)
    header = details.pop("header")
    document = {
        "schema": SCHEMA_VERSION,
        "run": header,
        "metrics": metrics(analysis),
        "steps": step_metrics(analysis),
        "details": details,
    }
    if baselines:
        document["baseline"] = baselines[0]
        document["baselines"] = list(baselines)
    return json.dumps(finite(document), indent=2, default=str, allow_nan=False)


def finite(value: Any) -> Any:
    """``value`` with every NaN or infinite float as None: JSON has no such numbers (a trace may
    hold a score of ``nan``)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(item) for item in value]
    return value


__all__ = ["metrics", "short_name", "step_metrics", "to_json"]
