"""``export --to tensorboard|mlflow|wandb``: the trace figures in the experiment trackers verl logs into.

The figures are those of ``analyze --format json`` (render/metrics.py), under the same names behind a
prefix (``trace/`` by default), so they sit beside verl's own series on the same charts and never
collide with them: every per-step figure (``steps``) at verl's ``global_step`` as the x-axis, and the
run-wide figures (``metrics``) as summary values under ``{prefix}run/``.

Each tracker's library is an extra (pyproject.toml): tensorboard, mlflow, wandb. Its module here is
imported only when it is asked for, and each module imports its library when it opens a writer.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol

from trace_instrument.traces.model import Analysis, StepBasis, StepWindow
from trace_instrument.traces.render.metrics import metrics, step_metrics

DEFAULT_PREFIX = "trace/"
RUN_WIDE = "run/"  # behind the prefix: the run-wide figures, apart from the per-step series of the same name
# characters every tracker takes in a name (MLflow's set is the smallest); a transition's "->" reads "_to_"
_NAME_CHARACTERS = re.compile(r"[^A-Za-z0-9_\-. :/]")
# Per-step figures that no completeness of their step settles, left out of what ``--follow`` logs: a
# sample generated in a step may be trained by any later step (an async run's staleness), so the
# step's never-trained count falls until the run ends; logged at completion, it would stay too high.
UNSETTLED_STEP_KEYS = frozenset({"in_flight/count"})


class Tracker(str, Enum):
    """The experiment trackers ``export --to`` writes into, and the module that imports each one's library."""

    tensorboard = "tensorboard"
    mlflow = "mlflow"
    wandb = "wandb"

    @property
    def library(self) -> str:
        return {"tensorboard": "tensorboardX", "mlflow": "mlflow", "wandb": "wandb"}[self.value]


def tracker_name(prefix: str, key: str) -> str:
    """The name a figure of ``analyze --format json`` has in a tracker: ``prefix`` + its key, with a
    transition's ``->`` as ``_to_`` and any other character a tracker refuses as ``_``."""
    return prefix + _NAME_CHARACTERS.sub("_", key.replace("->", "_to_"))


def _number(value: Any) -> float | None:
    """A figure's value as a tracker takes it; None for text, missing and non-finite values (JSON's null)."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    return None


def _named(prefix: str, values: dict[str, Any]) -> dict[str, float]:
    named = {tracker_name(prefix, key): _number(value) for key, value in values.items() if key != "step"}
    return {name: value for name, value in named.items() if value is not None}


@dataclass(frozen=True)
class Figures:
    """What a tracker is given of one analysis: the per-step figures by global step, and the run-wide ones."""

    steps: dict[int, dict[str, float]]
    summary: dict[str, float]


def figures(analysis: Analysis, prefix: str = DEFAULT_PREFIX, settled_only: bool = False) -> Figures:
    """The figures of ``analyze --format json`` named for the trackers (see tracker_name); numbers only.
    ``settled_only`` (``--follow``): without the per-step figures in UNSETTLED_STEP_KEYS."""
    left_out = UNSETTLED_STEP_KEYS if settled_only else frozenset()
    steps = {
        int(entry["step"]): _named(prefix, {k: v for k, v in entry.items() if k not in left_out})
        for entry in step_metrics(analysis)
    }
    return Figures(
        {step: values for step, values in steps.items() if values}, _named(prefix + RUN_WIDE, metrics(analysis))
    )


def complete_steps(analysis: Analysis) -> set[int]:
    """The steps whose figures no later row changes (``export --follow`` logs a step once, then):

    - its training window closed, and a later step's training begun; or, for the run's last step
      (``total_training_steps``), its weights synced or its progress lines all written, and no
      sample left in training;
    - its four progress lines written, when the run writes progress lines (the gen throughput);
    - when the figures count trajectories by the step that trained them, a trajectory line read for
      every sample the step trained (the trajectory files are written by other processes, later).
    """
    started = [w.step for w in analysis.steps if w.train_start_ms is not None]
    last = analysis.header.total_training_steps
    training = any(group.state == "in training" for group in analysis.in_flight)
    by_train = analysis.step_rollouts_by is StepBasis.TRAIN_STEP
    rollouts = {r.step: r.trajectories for r in analysis.step_rollouts}
    return {
        w.step
        for w in analysis.steps
        if w.train_end_ms is not None
        and (any(s > w.step for s in started) or _ended(w, last, training))
        and (w.progress == "complete" or not analysis.header.progress_lines)
        and (not by_train or rollouts.get(w.step, 0) >= w.samples_trained)
    }


def _ended(window: StepWindow, last: int | None, training: bool) -> bool:
    return window.step == last and not training and (window.sync_ms is not None or window.progress == "complete")


class Writer(Protocol):
    """One tracker's run, open: per-step figures logged once each, the summary replaced as often as asked;
    ``run_id`` is the tracker's id of the run written into (None: TensorBoard's folders have none)."""

    run_id: str | None

    def log_step(self, step: int, values: dict[str, float]) -> None: ...

    def set_summary(self, values: dict[str, float], step: int) -> None: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class Exported:
    """What one export wrote: the steps logged (each once), the figures in them, the summary's size, and
    where (a folder, a tracking URI) and into which run."""

    steps: tuple[int, ...]
    values: int
    summary: int
    target: str
    run_id: str | None


def open_writer(tracker: Tracker, target: str, run_id: str | None, run_name: str | None, prefix: str) -> Writer:
    """A writer into ``target`` (a folder, or MLflow's tracking URI), attached to ``run_id`` when given."""
    if tracker is Tracker.tensorboard:
        from trace_instrument.traces.render.trackers.tensorboard_events import TensorBoardWriter

        return TensorBoardWriter(target)
    if tracker is Tracker.mlflow:
        from trace_instrument.traces.render.trackers.mlflow_runs import MlflowWriter

        return MlflowWriter(target, run_id, run_name)
    from trace_instrument.traces.render.trackers.wandb_runs import WandbWriter

    return WandbWriter(target, run_id, run_name, prefix)


class Exporter:
    """Logs the figures of successive analyses of one run into an open writer: each step once (only the
    complete ones when ``complete_only``, as ``--follow`` asks), the summary whenever it changed."""

    def __init__(self, writer: Writer, prefix: str = DEFAULT_PREFIX, complete_only: bool = False) -> None:
        self.writer = writer
        self.prefix = prefix
        self.complete_only = complete_only
        self.logged: dict[int, int] = {}  # step -> figures logged
        self.summary: dict[str, float] = {}

    def add(self, analysis: Analysis) -> tuple[int, ...]:
        """Log what ``analysis`` adds: the steps not logged yet (complete, if asked), and the summary
        when it changed; the steps logged by this call are returned."""
        found = figures(analysis, self.prefix, settled_only=self.complete_only)
        ready = complete_steps(analysis) if self.complete_only else set(found.steps)
        new = sorted(step for step in ready if step in found.steps and step not in self.logged)
        for step in new:
            self.writer.log_step(step, found.steps[step])
            self.logged[step] = len(found.steps[step])
        if found.summary != self.summary and (found.summary or self.summary):
            # a run-wide figure the rows no longer give (a transition that is not the last any more)
            # cannot be taken back from every tracker: its latest value becomes NaN
            gone = {name: math.nan for name in self.summary if name not in found.summary}
            self.writer.set_summary({**gone, **found.summary}, max(self.logged, default=0))
            self.summary = found.summary
        return tuple(new)

    def result(self, target: str, run_id: str | None) -> Exported:
        return Exported(tuple(sorted(self.logged)), sum(self.logged.values()), len(self.summary), target, run_id)


def export_analysis(
    analysis: Analysis, tracker: Tracker, target: str, run_id: str | None, prefix: str = DEFAULT_PREFIX
) -> Exported:
    """Every step of one analysis and its summary into a tracker, the writer closed at the end."""
    writer = open_writer(tracker, target, run_id, run_name(analysis), prefix)
    exporter = Exporter(writer, prefix)
    try:
        exporter.add(analysis)
    finally:
        writer.close()
    return exporter.result(target, writer.run_id)


def run_name(analysis: Analysis) -> str | None:
    """The name a new tracker run takes: the traced run's id, else its job id."""
    return analysis.header.run_id or next(iter(analysis.header.job_ids), None)
