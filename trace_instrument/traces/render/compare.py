"""``analyze RUN --baseline OTHER``: every run-wide and per-step figure of two runs side by side.

Each figure is one of the JSON document's keys (verl's names), read from each run's own analysis;
the difference is this run's value minus the baseline's. Nothing of the two runs is ever added up.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from trace_instrument.traces.model import Analysis
from trace_instrument.traces.render.metrics import metrics, step_metrics
from trace_instrument.traces.render.tables import Section, num

# the per-step figures the text and the page list (the JSON has every key of every step)
HEADLINE_STEP_KEYS = (
    "timing_s/gen",
    "timing_s/train",
    "timing_s/overlap",
    "rollout/trajectories",
    "num_turns/mean",
    "response_length/mean",
    "response_length/clip_ratio",
    "critic/score/mean",
    "staleness/mean",
    "throughput/gen_tokens_per_s",
)


@dataclass(frozen=True)
class Compared:
    """One figure of both runs; the difference is this run's minus the baseline's (None unless both are numbers)."""

    key: str
    value: float | None
    baseline: float | None
    difference: float | None


@dataclass(frozen=True)
class StepComparison:
    step: int
    figures: tuple[Compared, ...]


@dataclass(frozen=True)
class Comparison:
    run_id: str | None
    baseline_run_id: str | None
    metrics: tuple[Compared, ...]
    steps: tuple[StepComparison, ...]  # the steps either run has, in order


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _compared(current: dict[str, Any], baseline: dict[str, Any]) -> tuple[Compared, ...]:
    """The numeric keys of either side, in the current run's order, then the baseline's own."""
    keys = [k for k in dict.fromkeys([*current, *baseline]) if k != "step"]
    out = []
    for key in keys:
        value, base = _number(current.get(key)), _number(baseline.get(key))
        if value is None and base is None:
            continue
        difference = value - base if value is not None and base is not None else None
        out.append(Compared(key, value, base, difference))
    return tuple(out)


def compare(current: Analysis, baseline: Analysis) -> Comparison:
    """Both runs' figures side by side: run-wide, and per step by step number."""
    mine = {entry["step"]: entry for entry in step_metrics(current)}
    theirs = {entry["step"]: entry for entry in step_metrics(baseline)}
    steps = tuple(
        StepComparison(step, _compared(mine.get(step, {}), theirs.get(step, {}))) for step in sorted({*mine, *theirs})
    )
    return Comparison(
        run_id=current.header.run_id,
        baseline_run_id=baseline.header.run_id,
        metrics=_compared(metrics(current), metrics(baseline)),
        steps=steps,
    )


def _difference(c: Compared) -> str:
    if c.difference is None:
        return "-"
    text = num(c.difference, 3)
    return text if c.difference < 0 or text.strip("0.,") == "" else "+" + text


def comparison_sections(c: Comparison) -> list[Section]:
    """The run-wide figures, then the headline figures of each step."""
    title = f"Compared with the baseline run {c.baseline_run_id or '(one run)'}"
    run_rows = tuple((x.key, num(x.value, 3), num(x.baseline, 3), _difference(x)) for x in c.metrics)
    step_rows = tuple(
        (str(s.step), x.key, num(x.value, 3), num(x.baseline, 3), _difference(x))
        for s in c.steps
        for x in s.figures
        if x.key in HEADLINE_STEP_KEYS
    )
    return [
        Section("baseline-metrics", title + ": run-wide", ("figure", "this run", "baseline", "difference"), run_rows),
        Section(
            "baseline-steps",
            title + ": per step",
            ("step", "figure", "this run", "baseline", "difference"),
            step_rows,
        ),
    ]


def comparison_json(c: Comparison) -> dict[str, Any]:
    """The ``baseline`` object of the JSON document: every key, both values and the difference."""
    return asdict(c)
