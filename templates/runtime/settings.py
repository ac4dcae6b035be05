"""Configuration, the trace switch and the clock.

The environment is read here, once, when the package is imported, so a
disabled ``trace_flow()`` costs one attribute lookup:

- ``VERL_TRACE_DIR``: the trace directory; tracing is on when it is set and not
  empty. Read again only when ``set_trace_dir(None)`` (or ``""``) hands the
  switch back to the environment.
- ``DLC_JOB_ID``: the first column of the sample-flow CSV.
- ``VERL_TRACE_DISCOVERY_DIR``: where the discovery files go (``/tmp``); tests
  and sandboxed jobs point it elsewhere.
- ``VERL_TRACE_TRAJECTORY_QUEUE_MB``: the trajectory writer's memory bound in
  MiB of encoded lines waiting to be written (default 256).

The other limits are plain constants, patched by tests.
"""

# Containment is this package's job: no failure of the tracing's own reaches the training
# loop, and nothing else (a signal handler's exception) is kept from it (see safety.py).

from __future__ import annotations

import os
import time

from .safety import raised_by_signal_handler, warn_once

TRACE_DIR_VARIABLE = "VERL_TRACE_DIR"
TRAJECTORY_QUEUE_VARIABLE = "VERL_TRACE_TRAJECTORY_QUEUE_MB"
_MIB = 1024 * 1024


def _megabytes_from_env(name: str, default: int) -> int:
    text = os.environ.get(name, "").strip()
    if not text:
        return default * _MIB
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        warn_once(name, "tracing: ignoring %s=%r (want a positive number of MiB); using %d", name, text, default)
        return default * _MIB
    return int(value * _MIB)


JOB_ID = os.environ.get("DLC_JOB_ID", "ENV_NOTFOUND_DLC_JOB_ID")
DISCOVERY_DIR = os.environ.get("VERL_TRACE_DISCOVERY_DIR") or "/tmp"

# Encoded bytes of sample-flow rows queued or being written (per trace dir).
SAMPLE_QUEUE_MAX_BYTES = 32 * _MIB
# Encoded bytes of trajectory lines queued or being written (per store).
TRAJECTORY_QUEUE_MAX_BYTES = _megabytes_from_env(TRAJECTORY_QUEUE_VARIABLE, 256)
# How long TrajectoryStore.write() waits for room before it drops a trajectory.
# A writer that could not make room in time is not waited for again until it does.
TRAJECTORY_QUEUE_WAIT_SECONDS = 1.0
# Time the exit hook spends draining writers, then writing the status file; keeps exit under 2 s.
EXIT_FLUSH_SECONDS = 1.0
EXIT_STATUS_SECONDS = 0.5
# Upper bound on waiting for a lock another thread holds (never one this thread holds).
LOCK_TIMEOUT_SECONDS = 1.0
# A thread blocked writing to stdout (a stalled pipe) holds up other echoes this long at most.
STDOUT_LOCK_TIMEOUT_SECONDS = 10.0
# While losses happen: the status file is rewritten at most this often...
STATUS_INTERVAL_SECONDS = 5.0
# ...and a stderr line says what was lost since the previous line at most this often.
STDERR_REPORT_INTERVAL_SECONDS = 60.0

clock = time.time  # the single time source of every record; tests replace it


def path_text(path: object) -> str:
    """``path`` (str, bytes, os.PathLike or anything printable) as text; may raise."""
    try:
        return os.fsdecode(path)  # type: ignore[arg-type]
    except TypeError as exc:
        if raised_by_signal_handler(exc):
            raise
        return str(path)


trace_dir: str | None = os.environ.get(TRACE_DIR_VARIABLE) or None
enabled: bool = trace_dir is not None


def set_trace_dir(path: object) -> None:
    """Turn tracing on with ``path`` as the trace directory.

    ``None`` or ``""`` hand the switch back to ``$VERL_TRACE_DIR``, read at this
    call, as the original runtime did: tracing is then on if the variable is set
    and off otherwise. A value that cannot be read as a path is ignored (with a
    warning); this never raises.
    """
    global trace_dir, enabled
    try:
        text = path_text(path) if path is not None else ""
        text = text or os.environ.get(TRACE_DIR_VARIABLE) or ""
    except Exception as exc:
        if raised_by_signal_handler(exc):
            raise
        warn_once("set_trace_dir", "tracing: set_trace_dir() ignored a value that is not a path", exc_info=True)
        return
    # Order matters for concurrent readers: never enabled without a directory.
    enabled = False
    trace_dir = text or None
    enabled = trace_dir is not None


def get_trace_dir() -> str | None:
    """The active trace directory, or None when tracing is off."""
    return trace_dir
