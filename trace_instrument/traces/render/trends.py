"""The page's per-step trend charts: is this run unstable? Each figure is one of verl's per-step keys
(the JSON document's ``steps``), drawn for this run and, with ``--baseline``, for every baseline on
the same chart (each run its own line or bar, never added up)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from trace_instrument.traces.model import Analysis
from trace_instrument.traces.render.charts import (
    PALETTE,
    RUN_DASHES,
    Series,
    duration_label,
    esc,
    legend,
    lines,
    number_label,
    stacked_steps,
)
from trace_instrument.traces.render.metrics import metrics, step_metrics


@dataclass(frozen=True)
class RunSteps:
    """One run's per-step figures (verl's keys) and how its lines are told apart."""

    name: str
    dash: str
    steps: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class Quantity:
    """A per-step key drawn as a line: its key, the legend's name for it and its colour."""

    key: str
    name: str
    color: str


def run_steps(current: Analysis, baselines: Sequence[Analysis]) -> list[RunSteps]:
    """This run and each baseline, named as the comparison tables name them."""
    runs = [RunSteps("this run", RUN_DASHES[0], tuple(step_metrics(current)))]
    for i, other in enumerate(baselines, 1):
        name = "baseline" if len(baselines) == 1 else f"baseline {i}"
        rid = f" ({other.header.run_id})" if other.header.run_id else ""
        runs.append(RunSteps(name + rid, RUN_DASHES[i % len(RUN_DASHES)], tuple(step_metrics(other))))
    return runs


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


RUN_COLOR = "#57606a"  # the legend's line for a run: its dash, in grey


def _series(runs: Sequence[RunSteps], quantities: Sequence[Quantity]) -> list[Series]:
    out = []
    for run in runs:
        for q in quantities:
            points = tuple(
                (float(entry["step"]), v) for entry in run.steps if (v := _number(entry.get(q.key))) is not None
            )
            out.append(Series(q.name if len(runs) == 1 else f"{q.name}, {run.name}", q.color, run.dash, points))
    return out


def _figure(
    key: str, title: str, keys: str, runs: Sequence[RunSteps], quantities: Sequence[Quantity], chart: str
) -> str:
    """A chart under its title and legend: a colour per quantity and, with baselines, a dash per run."""
    items = [(q.name, q.color, "") for q in quantities]
    if len(runs) > 1:
        items += [(run.name, RUN_COLOR, run.dash) for run in runs]
    return _framed(key, title, keys, legend(items), chart)


def _framed(key: str, title: str, keys: str, head: str, chart: str) -> str:
    """A trend chart's ``<figure>``: its title and keys, then ``head`` (legend, note), the chart."""
    return (
        f'<figure class="trend" id="trend-{key}"><figcaption><b>{esc(title)}</b> <span>{esc(keys)}</span>'
        f"</figcaption>{head}{chart}</figure>"
    )


def _line_figure(
    runs: Sequence[RunSteps],
    key: str,
    title: str,
    keys: str,
    quantities: Sequence[Quantity],
    y_label: str,
    label: Callable[[float], str] = number_label,
    log: bool = False,
    fraction: bool = False,
) -> str:
    series = _series(runs, quantities)
    shown = [q for q in quantities if any(_number(e.get(q.key)) is not None for run in runs for e in run.steps)]
    return _figure(key, title, keys, runs, shown, lines(series, title, y_label, label, log, fraction))


def _stop_reasons(runs: Sequence[RunSteps], current: Analysis) -> str:
    """Stacked fractions per step, the reasons in the order of the run-wide counts."""
    prefix, suffix = "stop_reason/", "/frac"
    overall = [k[len(prefix) : -len(suffix)] for k in metrics(current) if k.startswith(prefix) and k.endswith(suffix)]
    seen = [
        k[len(prefix) : -len(suffix)]
        for run in runs
        for entry in run.steps
        for k in entry
        if k.startswith(prefix) and k.endswith(suffix)
    ]
    reasons = list(dict.fromkeys([*overall, *seen]))
    by_run = [
        (
            run.name,
            {
                int(entry["step"]): {r: v for r in reasons if (v := _number(entry.get(prefix + r + suffix)))}
                for entry in run.steps
                if any(entry.get(prefix + r + suffix) is not None for r in reasons)
            },
        )
        for run in runs
    ]
    title = "stop reasons per step"
    chart = stacked_steps(by_run, reasons, title, "fraction of trajectories")
    note = (
        f'<p class="chart-note">bars per step: {esc(", then ".join(name for name, _ in by_run))} (paler)</p>'
        if len(runs) > 1
        else ""
    )
    keys = "stop_reason/{reason}/frac, each step's fractions summing to 1"
    items = [(r, PALETTE[i % len(PALETTE)], "") for i, r in enumerate(reasons)]
    return _framed("stop-reasons", title, keys, (legend(items, "box") if items else "") + note, chart)


def _stage_keys(runs: Sequence[RunSteps]) -> list[str]:
    return list(dict.fromkeys(k for run in runs for entry in run.steps for k in entry if k.startswith("stage_s/")))


def trend_figures(current: Analysis, baselines: Sequence[Analysis] = ()) -> str:
    """Every per-step trend chart, each a ``<figure>`` with its legend."""
    runs = run_steps(current, baselines)
    quantiles = [Quantity(f"num_turns/{q}", q, PALETTE[i]) for i, q in enumerate(("p50", "p90", "p99"))]
    stages = [
        Quantity("timing_s/gen", "generation", PALETTE[0]),
        Quantity("timing_s/train", "training", PALETTE[1]),
        *(Quantity(k, k.split("/", 1)[1], PALETTE[(i + 2) % len(PALETTE)]) for i, k in enumerate(_stage_keys(runs))),
    ]

    def seconds(value: float) -> str:  # the stage times are in seconds
        return duration_label(value * 1000)

    return "".join(
        (
            _stop_reasons(runs, current),
            _line_figure(runs, "turns", "turns per trajectory per step", "num_turns/p50, p90, p99", quantiles, "turns"),
            _line_figure(
                runs,
                "response-length",
                "response length per step (mean)",
                "response_length/mean: verl's, tool observations included",
                [Quantity("response_length/mean", "mean", PALETTE[4])],
                "tokens",
            ),
            _line_figure(
                runs,
                "clip-ratio",
                "clip ratio per step",
                "response_length/clip_ratio",
                [Quantity("response_length/clip_ratio", "clip ratio", PALETTE[3])],
                "clipped responses",
                lambda v: f"{v:.0%}",
                fraction=True,
            ),
            _line_figure(
                runs,
                "staleness",
                "staleness per step",
                "staleness/mean, max (train step - generation step)",
                [Quantity("staleness/mean", "mean", PALETTE[6]), Quantity("staleness/max", "max", PALETTE[8])],
                "steps behind",
            ),
            _line_figure(
                runs,
                "score",
                "reward score per step",
                "critic/score/mean",
                [Quantity("critic/score/mean", "mean", PALETTE[2])],
                "mean reward score",
            ),
            _line_figure(
                runs,
                "stage-times",
                "stage times per step (log scale)",
                "timing_s/gen, timing_s/train, stage_s/{stage}",
                stages,
                "seconds (log scale)",
                seconds,
                log=True,
            ),
        )
    )
