"""Training-progress lines: always on stdout, and with tracing on in an hourly log file.

``log_progress(line)`` prints the bare line and appends it to
``{trace_dir}/progress/{YYYYMMDD-HH}.log`` (local time; one file per hour,
shared by every process of the run through O_APPEND). The other functions
build the fixed line formats the training dashboards parse.

Lines are written synchronously, under one lock per process. A write that
fails is counted as a lost line; if it stopped mid-line, the next line in that
file starts on a fresh line (the file is shared, so the torn part cannot be cut
back safely). No failure of the tracing's own raises from here.
"""

# Containment is this package's job: no failure of the tracing's own reaches the training
# loop, and nothing else (a signal handler's exception) is kept from it (see safety.py).

from __future__ import annotations

import os
import time
from typing import Any

from . import files, formats, losses, process, safety, settings, streams, writer

__all__ = [
    "log_gen_throughput",
    "log_gen_throughput_tokens",
    "log_progress",
    "log_rollout_completed",
    "log_step_window",
]

_FACILITY = "progress"

_lock = safety.lock()
_file_key: tuple[str, str] | None = None  # (progress dir, hour) of the open file
_fd: int | None = None
_path: str | None = None
_identity: files.FileIdentity = (0, 0)  # of the open file, to tell when its name is gone
_torn_path: str | None = None  # the file whose last line a failed write cut short
_announced = False


def _open_for(progress_dir: str, hour: str) -> int:
    global _file_key, _fd, _path, _announced, _identity, _torn_path
    if _fd is not None and _file_key == (progress_dir, hour):
        if files.still_named(_path, _identity):
            return _fd
        files.report_moved(progress_dir)  # removed or replaced: make it again
        _torn_path = None  # the new file under that name starts whole
    close_file()
    os.makedirs(progress_dir, exist_ok=True)
    if not _announced:
        _announced = files.publish_discovery(files.PROGRESS_DISCOVERY_FILE, progress_dir)
    _path = os.path.join(progress_dir, f"{hour}.log")
    _fd = files.open_fd(_path)
    _identity = files.identity(os.fstat(_fd))
    _file_key = (progress_dir, hour)
    writer.watch_multiprocessing_exit()
    return _fd


def close_file() -> None:
    """Close the open progress file (the next line opens it again)."""
    global _file_key, _fd
    fd, _fd, _file_key = _fd, None, None
    files.close_fd(fd)


def _append_line(trace_dir: str, line: str) -> None:
    progress_dir = os.path.join(trace_dir, "progress")
    hour = time.strftime("%Y%m%d-%H", time.localtime(settings.clock()))
    data = (line + "\n").encode("utf-8", "backslashreplace")
    if not _lock.acquire(timeout=settings.LOCK_TIMEOUT_SECONDS):
        losses.count_lost(_FACILITY, formats.LOST_LOCK_TIMEOUT)
        return
    try:
        _write_line(progress_dir, hour, data)
    finally:
        _lock.release()


def _write_line(progress_dir: str, hour: str, data: bytes) -> None:
    global _torn_path
    prefix = b""
    try:
        fd = _open_for(progress_dir, hour)
        prefix = b"\n" if _torn_path == _path else b""
        files.write_all(fd, prefix + data)
    except OSError as exc:
        if safety.raised_by_signal_handler(exc):  # a watchdog's TimeoutError is an OSError too
            raise
        written = getattr(exc, "written", 0)
        if written > len(prefix):
            _torn_path = _path
        elif prefix and written == len(prefix):
            _torn_path = None
        close_file()  # retry from scratch on the next line
        not_regular = isinstance(exc, files.NotRegularFile)
        losses.count_lost(_FACILITY, losses.NOT_REGULAR_FILE if not_regular else losses.WRITE_ERROR)
        safety.warn_once("progress-write", "tracing: cannot append to the progress log in %s: %s", progress_dir, exc)
        return
    _torn_path = None
    if files.unlinked(fd):  # removed while the line was written
        files.report_moved(progress_dir)
        close_file()
        losses.count_lost(_FACILITY, losses.FOLDER_REMOVED)
        return
    losses.count_written(_FACILITY, 1)


def _reset_in_child() -> None:
    global _lock
    _lock = safety.lock()


process.on_new_process(_reset_in_child)


def log_progress(message: Any) -> None:
    """Print one progress line; also append it to the hourly progress log when tracing is on."""
    if not safety.enter():
        if settings.trace_dir:
            losses.count_lost(_FACILITY, formats.LOST_REENTRANT, report=False)
        return
    try:
        process.ensure_current()
        try:
            line = message if isinstance(message, str) else str(message)
        except Exception as exc:
            if safety.raised_by_signal_handler(exc):
                raise
            if settings.trace_dir:
                losses.count_lost(_FACILITY, formats.LOST_FORMAT_ERROR)
            safety.warn_once("log_progress-format", "tracing: log_progress got a message with no text", exc_info=True)
            return
        streams.echo(line + "\n", flush=True)
        trace_dir = settings.trace_dir
        if trace_dir:
            _append_line(trace_dir, line)
    except Exception as exc:
        if safety.raised_by_signal_handler(exc):
            raise
        safety.warn_once("log_progress", "tracing: log_progress failed", exc_info=True)
    finally:
        safety.leave()


def log_step_window(step: Any, phase: Any, boundary: Any) -> None:
    """Progress line ``Step {step} {phase} {boundary}``, e.g. ``Step 3 train started``."""
    try:
        log_progress(f"Step {step} {phase} {boundary}")
    except Exception as exc:
        if safety.raised_by_signal_handler(exc):
            raise


def log_gen_throughput_tokens(n_tokens: Any, seconds: Any) -> None:
    """Progress line ``gen throughput (token/s): X.XX``; skips missing or invalid input."""
    try:
        if n_tokens is None or seconds is None or n_tokens < 0 or seconds <= 0:
            return
        log_progress(f"gen throughput (token/s): {int(n_tokens) / seconds:.2f}")
    except Exception as exc:
        if safety.raised_by_signal_handler(exc):
            raise


def log_gen_throughput(batch: Any, seconds: Any) -> None:
    """Throughput line for a rollout batch, counting only non-padding response tokens.

    ``batch.batch`` must hold ``responses``; with a 2-D ``attention_mask`` the
    tokens are its sum over the response columns, otherwise every response slot
    counts. Works on anything tensor-like (``dim``, ``shape``, ``sum``, ``numel``).
    """
    try:
        tensors = batch.batch
        # A TensorDict refuses `key in td`; it answers `key in td.keys()`.
        if tensors is None or "responses" not in tensors.keys():  # noqa: SIM118
            return
        responses = tensors["responses"]
        mask = tensors.get("attention_mask", None)
        if mask is not None and mask.dim() == 2 and mask.shape[-1] >= responses.shape[-1]:
            prompt_len = mask.shape[-1] - responses.shape[-1]
            n_tokens = int(mask[:, prompt_len:].sum())
        else:
            n_tokens = int(responses.numel())
        log_gen_throughput_tokens(n_tokens, seconds)
    except Exception as exc:
        if safety.raised_by_signal_handler(exc):
            raise


def log_rollout_completed(uid: Any, traj_uid: Any, score: Any = None) -> None:
    """Progress line ``Task {uid}/{traj_uid} is completed, score=S status=Finished`` (tracing on only)."""
    try:
        if not settings.trace_dir:
            return
        if score is None:
            score = 0.0
        log_progress(f"Task {uid}/{traj_uid} is completed, score={score} status=Finished")
    except Exception as exc:
        if safety.raised_by_signal_handler(exc):
            raise
