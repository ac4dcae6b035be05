"""Tracing runtime for verl: sample-flow events, progress lines and trajectory dumps.

- ``trace_flow``: one CSV row (and one stdout line) per sample and pipeline stage,
  under ``{trace_dir}/sample/``.
- ``log_progress`` and helpers: bare progress lines on stdout, mirrored to
  ``{trace_dir}/progress/{YYYYMMDD-HH}.log``.
- ``Turn``/``Trajectory``/``TurnRecord``/``TrajectoryTracker``/``TrajectoryStore``:
  per-rollout JSONL records under ``{trace_dir}/trajectory/``; ``trace_agent_stop``
  records why an agent loop ended.

Everything is off until a trace directory is set (``$VERL_TRACE_DIR`` at import,
or ``set_trace_dir()``), and no failure of the tracing's own raises into the
training code (what interrupts a call, a signal handler's exception, reaches it
unchanged). What is lost anyway is counted and reported (stderr,
``{trace_dir}/status/``).
Standard library only; imports are relative so the package can live anywhere.

Modules: ``settings`` (environment, switch, clock), ``safety`` (containment,
re-entry guard), ``streams`` (stdout/stderr), ``files`` (raw descriptors, atomic
small files), ``process`` (fork handling), ``losses`` (counts, status file),
``writer`` (bounded background writers, flush, exit), ``formats`` (the files'
format: CSV columns, events, trajectory keys), ``trace`` (sample flow), ``progress``
(progress lines) and the three ``trajectory_*`` modules.
"""

from .progress import (
    log_gen_throughput,
    log_gen_throughput_tokens,
    log_progress,
    log_rollout_completed,
    log_step_window,
)
from .settings import get_trace_dir, set_trace_dir
from .trace import suppress_sample_trace, trace_flow
from .trajectory_store import TrajectoryStore
from .trajectory_tracker import TrajectoryTracker, trace_agent_stop
from .trajectory_types import Trajectory, Turn, TurnRecord
from .writer import flush

# the trace-instrument release that wrote this package: an older release refuses to write over it
__version__ = "0.3.0"

__all__ = [
    "Trajectory",
    "TrajectoryStore",
    "TrajectoryTracker",
    "Turn",
    "TurnRecord",
    "flush",
    "get_trace_dir",
    "log_gen_throughput",
    "log_gen_throughput_tokens",
    "log_progress",
    "log_rollout_completed",
    "log_step_window",
    "set_trace_dir",
    "suppress_sample_trace",
    "trace_agent_stop",
    "trace_flow",
]
