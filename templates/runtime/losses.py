"""What the runtime wrote and lost, counted per process and reported while the run goes on.

Counts are kept per facility: rows for ``sample_flow``, lines for ``progress``,
trajectories for ``trajectory``; lost ones by reason (``formats.LOSS_REASONS``: "queue full",
"write error", "format error", ...; the reasons the writers' outputs give are named below). Adding to a count never
blocks, so a signal handler may count while the thread it interrupted counts too.

The first loss starts a reporter thread. While losses happen it rewrites
``$VERL_TRACE_DIR/status/{host}-pid{pid}.json`` at most every
``STATUS_INTERVAL_SECONDS`` and prints one stderr line with what was lost since
its previous line at most every ``STDERR_REPORT_INTERVAL_SECONDS``, so a worker
that is later killed has already told. At exit every process that traced
anything writes the status file one last time (``"final": true``) and prints
its totals.
"""

# Containment is this package's job: no failure of the tracing's own reaches the training
# loop, and nothing else (a signal handler's exception) is kept from it (see safety.py).
# ruff: noqa: BLE001

from __future__ import annotations

import collections
import json
import os
import socket
import threading
import time

from . import files, formats, process, safety, settings, streams
from .safety import raised_by_signal_handler, warn_once

FACILITIES = formats.STATUS_FACILITIES
_UNITS = {"sample_flow": "row", "progress": "line", "trajectory": "trajectory"}
_LABELS = {"sample_flow": "sample-flow", "progress": "progress", "trajectory": "trajectory"}
STATUS_SCHEMA = 1

# Reasons an output gives for what it could not write (all reasons: formats.LOSS_REASONS).
WRITE_ERROR = formats.LOST_WRITE_ERROR
NOT_REGULAR_FILE = formats.LOST_NOT_REGULAR
FOLDER_REMOVED = formats.LOST_FOLDER_REMOVED

Counts = dict[str, int]


class Tally:
    """Counts by key. ``add`` is a deque append (atomic) and never waits for a lock.

    Additions are folded into the totals by readers, and by ``add`` itself once
    many have piled up, if it can take the fold lock without waiting.
    """

    _FOLD_AFTER = 1024

    def __init__(self) -> None:
        self._new: collections.deque[tuple[str, int]] = collections.deque()
        self._totals: collections.Counter[str] = collections.Counter()
        self._fold_lock = safety.lock()

    def add(self, key: str, count: int = 1) -> None:
        self._new.append((key, count))
        if len(self._new) > self._FOLD_AFTER and self._fold_lock.acquire(blocking=False):
            try:
                self._fold()
            finally:
                self._fold_lock.release()

    def totals(self) -> Counts:
        """The counts so far (empty if another reader holds the lock for too long)."""
        if not self._fold_lock.acquire(timeout=settings.LOCK_TIMEOUT_SECONDS):
            return {}
        try:
            self._fold()
            return {key: count for key, count in self._totals.items() if count}
        finally:
            self._fold_lock.release()

    def _fold(self) -> None:
        while True:
            try:
                key, count = self._new.popleft()
            except IndexError as exc:
                if raised_by_signal_handler(exc):
                    raise
                return
            self._totals[key] += count


def format_counts(counts: Counts) -> str:
    """``reason: n, reason: n`` in a stable order."""
    return ", ".join(f"{reason}: {count}" for reason, count in sorted(counts.items()))


class _Ledger:
    """One process's counts and the state of its reports."""

    def __init__(self) -> None:
        self.lost = {facility: Tally() for facility in FACILITIES}
        self.written = Tally()
        self.reporter_started = False
        self.reporter_lock = safety.lock()
        self.stopped = threading.Event()
        self.status_lock = threading.Lock()
        self.final_written = False
        self.lost_in_status: dict[str, Counts] | None = None
        self.lost_at_last_line: dict[str, Counts] = {}
        self.last_line_at = float("-inf")

    def lost_totals(self) -> dict[str, Counts]:
        return {facility: self.lost[facility].totals() for facility in FACILITIES}


_ledger = _Ledger()


def count_lost(facility: str, reason: str, count: int = 1, *, report: bool = True) -> None:
    """Count ``count`` records of ``facility`` lost for ``reason``; never raises.

    ``report=False`` only counts: for callers that must not start a thread (a
    re-entrant call may have interrupted this very thread inside ``Thread.start``).
    """
    try:
        if count <= 0:
            return
        ledger = _ledger
        ledger.lost[facility].add(reason, count)
        if report and not ledger.reporter_started:
            _start_reporter(ledger)
    except Exception as exc:
        if raised_by_signal_handler(exc):
            raise


def count_written(facility: str, count: int) -> None:
    """Count ``count`` records of ``facility`` that reached their file."""
    if count > 0:
        _ledger.written.add(facility, count)


def _start_reporter(ledger: _Ledger) -> None:
    if not ledger.reporter_lock.acquire(timeout=settings.LOCK_TIMEOUT_SECONDS):
        return
    try:
        if ledger.reporter_started:
            return
        thread = threading.Thread(target=_report_periodically, args=(ledger,), name="verl-trace-losses", daemon=True)
        thread.start()  # RuntimeError at interpreter shutdown
        ledger.reporter_started = True
    except RuntimeError as exc:
        if raised_by_signal_handler(exc):
            raise
    finally:
        ledger.reporter_lock.release()


def _report_periodically(ledger: _Ledger) -> None:
    while not ledger.stopped.wait(settings.STATUS_INTERVAL_SECONDS):
        try:
            _report_now(ledger)
        except Exception:
            warn_once("loss-report", "tracing: loss report failed", exc_info=True)


def _report_now(ledger: _Ledger) -> None:
    lost = ledger.lost_totals()
    if lost != ledger.lost_in_status:
        _write_status(ledger, lost, final=False)
    now = time.monotonic()
    if now - ledger.last_line_at < settings.STDERR_REPORT_INTERVAL_SECONDS:
        return
    since = {facility: _minus(lost[facility], ledger.lost_at_last_line.get(facility, {})) for facility in FACILITIES}
    if not any(since.values()):
        return
    parts = [_describe(facility, counts) for facility, counts in since.items() if counts]
    trace_dir = settings.trace_dir
    where = f"; counts in {status_path(trace_dir)}" if trace_dir and ledger.lost_in_status is not None else ""
    streams.write_stderr(f"[verl tracing] lost since the last report: {'; '.join(parts)}{where}\n")
    ledger.lost_at_last_line = lost
    ledger.last_line_at = now


def _minus(now: Counts, before: Counts) -> Counts:
    return {reason: count - before.get(reason, 0) for reason, count in now.items() if count > before.get(reason, 0)}


def _describe(facility: str, counts: Counts) -> str:
    return f"{_LABELS[facility]} {_dropped(facility, counts)}"


def _dropped(facility: str, counts: Counts) -> str:
    return f"dropped {sum(counts.values())} {_UNITS[facility]}(s) ({format_counts(counts)})"


def status_path(trace_dir: str) -> str:
    """This process's status file under ``trace_dir``."""
    name = f"{files.safe_name(socket.gethostname())}-pid{os.getpid()}.json"
    return os.path.join(trace_dir, "status", name)


def status(final: bool = False) -> dict[str, object]:
    """The content of this process's status file as it would be written now."""
    return _status(_ledger, _ledger.lost_totals(), final)


def _status(ledger: _Ledger, lost: dict[str, Counts], final: bool) -> dict[str, object]:
    written = ledger.written.totals()
    return {
        "schema": STATUS_SCHEMA,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "updated_at": settings.clock(),
        "final": final,
        "lost": lost,
        "written": {facility: written.get(facility, 0) for facility in FACILITIES},
    }


def _write_status(ledger: _Ledger, lost: dict[str, Counts], final: bool) -> bool:
    """Rewrite the status file; False when there is no trace dir, the final one is written, or it failed."""
    trace_dir = settings.trace_dir
    if not trace_dir or not ledger.status_lock.acquire(timeout=settings.LOCK_TIMEOUT_SECONDS):
        return False
    try:
        if ledger.final_written:
            return False
        path = status_path(trace_dir)
        content = (json.dumps(_status(ledger, lost, final)) + "\n").encode("utf-8", "backslashreplace")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        files.replace_file(os.path.dirname(path), os.path.basename(path), content)
        ledger.lost_in_status = lost
        ledger.final_written = final
        return True
    except Exception as exc:
        warn_once(("status", trace_dir), "tracing: cannot write the status file under %s: %s", trace_dir, exc)
        return False
    finally:
        ledger.status_lock.release()


def finish(timeout: float) -> str:
    """At exit: write the final status file (if anything was traced) and return the stderr report.

    The file is written from a helper thread that is waited for ``timeout``
    seconds at most: a hung file system must not hold up the exit.
    """
    ledger = _ledger
    ledger.stopped.set()
    lost = ledger.lost_totals()
    if any(lost.values()) or ledger.written.totals():
        try:
            thread = threading.Thread(target=_write_status, args=(ledger, lost, True), daemon=True)
            thread.start()
            thread.join(timeout)
        except RuntimeError as exc:
            if raised_by_signal_handler(exc):
                raise
    return "".join(
        f"[verl tracing] {_LABELS[facility]} writer {_dropped(facility, counts)}\n"
        for facility, counts in lost.items()
        if counts
    )


def stop_reporting() -> None:
    """Stop the reporter thread (test and shutdown helper); counting goes on."""
    _ledger.stopped.set()


def _reset_in_child() -> None:
    global _ledger
    _ledger = _Ledger()


process.on_new_process(_reset_in_child)
