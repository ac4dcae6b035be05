"""``analyze RUN --baseline OTHER``: every run-wide and per-step figure of two runs side by side.

Each figure is one of the JSON document's keys (verl's names), read from each run's own analysis;
the difference is this run's value minus the baseline's, the change that difference in percent of
the baseline's value. Several baselines are compared one by one, each in columns of its own:
nothing of two runs is ever added up.
"""

from __future__ import annotations

from collections.abc import Sequence
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
    """One figure of both runs; the difference is this run's minus the baseline's (None unless both are
    numbers), the percent that difference over the baseline's magnitude (None also when that is 0)."""

    key: str
    value: float | None
    baseline: float | None
    difference: float | None
    percent: float | None = None


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
        out.append(Compared(key, value, base, difference, change_percent(value, base)))
    return tuple(out)


def change_percent(value: float | None, baseline: float | None) -> float | None:
    """``value``'s change from ``baseline`` in percent of the baseline's magnitude; None when either is
    missing or the baseline is 0 (no finite change)."""
    if value is None or baseline is None or baseline == 0:
        return None
    return (value - baseline) / abs(baseline) * 100


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


def _difference(c: Compared | None) -> str:
    if c is None or c.difference is None:
        return "-"
    text = num(c.difference, 3)
    return text if c.difference < 0 or text.strip("0.,") == "" else "+" + text


def percent_text(percent: float | None) -> str:
    """``+12.5%``, ``-3.0%``, ``0.0%``; ``-`` when there is no change to give."""
    if percent is None:
        return "-"
    text = f"{percent:,.1f}%"
    return text if text.startswith("-") or text.strip("0.,%") == "" else "+" + text


def _by_key(figures: Sequence[Compared]) -> dict[str, Compared]:
    return {x.key: x for x in figures}


def _sides(
    keys: Sequence[str], value_of: dict[str, float | None], each: list[dict[str, Compared]]
) -> list[tuple[str, ...]]:
    """A row per key: the figure, this run's value, then each baseline's value, difference and change."""
    rows = []
    for key in keys:
        row = [key, num(value_of.get(key), 3)]
        for figures in each:
            x = figures.get(key)
            row += [num(x.baseline if x else None, 3), _difference(x), percent_text(x.percent if x else None)]
        rows.append(tuple(row))
    return rows


def _keys(each: Sequence[Sequence[Compared]]) -> list[str]:
    """Every key of every comparison, in the first's order, then each later one's own."""
    return list(dict.fromkeys(x.key for figures in each for x in figures))


def _values(each: Sequence[Sequence[Compared]]) -> dict[str, float | None]:
    """This run's value of each key (the same in every comparison: one run's own figure)."""
    out: dict[str, float | None] = {}
    for figures in each:
        for x in figures:
            if out.get(x.key) is None:
                out[x.key] = x.value
    return out


def comparison_sections(comparisons: Comparison | Sequence[Comparison]) -> list[Section]:
    """The run-wide figures, then the headline figures of each step: this run's value, then for each
    baseline its value, the difference and the change in percent (a baseline's columns each)."""
    cs = [comparisons] if isinstance(comparisons, Comparison) else list(comparisons)
    if len(cs) == 1:
        title = f"Compared with the baseline run {cs[0].baseline_run_id or '(one run)'}"
        heads: tuple[str, ...] = ("baseline", "difference", "change")
    else:
        title = "Compared with the baseline runs " + ", ".join(
            f"{i} = {c.baseline_run_id or '(one run)'}" for i, c in enumerate(cs, 1)
        )
        heads = tuple(h for i in range(1, len(cs) + 1) for h in (f"baseline {i}", f"difference {i}", f"change {i}"))
    run_each = [list(c.metrics) for c in cs]
    run_rows = _sides(_keys(run_each), _values(run_each), [_by_key(f) for f in run_each])
    step_rows: list[tuple[str, ...]] = []
    for step in sorted({s.step for c in cs for s in c.steps}):
        each = [[x for s in c.steps if s.step == step for x in s.figures if x.key in HEADLINE_STEP_KEYS] for c in cs]
        keys = [k for k in HEADLINE_STEP_KEYS if k in set(_keys(each))]
        step_rows += [(str(step), *row) for row in _sides(keys, _values(each), [_by_key(f) for f in each])]
    return [
        Section("baseline-metrics", title + ": run-wide", ("figure", "this run", *heads), tuple(run_rows)),
        Section("baseline-steps", title + ": per step", ("step", "figure", "this run", *heads), tuple(step_rows)),
    ]


def comparison_json(c: Comparison) -> dict[str, Any]:
    """The ``baseline`` object of the JSON document: every key, both values, the difference and the
    change in percent (each of several baselines has one such object in ``baselines``)."""
    return asdict(c)
