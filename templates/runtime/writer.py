"""Bounded background writers: one daemon thread per output, fed through a queue bounded in bytes.

The calling thread formats and encodes a batch and hands the bytes over;
when the queue is full the batch is dropped and counted (a trajectory store
first waits briefly for room). The thread writes what is queued and counts
what it wrote and lost. The bound covers the bytes queued and those being
written, so it is what the queue can hold in memory.

``flush()`` waits with a time limit; at interpreter exit every writer gets a
bounded flush, then the process's status file and loss report are written. A
forked child starts with empty queues and no thread: its parent's queued
records are the parent's to write.
"""

# Containment is this package's job: no failure of the tracing's own reaches the training
# loop, and nothing else (a signal handler's exception) is kept from it (see safety.py).
# ruff: noqa: BLE001

from __future__ import annotations

import atexit
import collections
import os
import sys
import threading
import time
import weakref
from typing import Any, Protocol

from . import formats, losses, process, safety, settings, streams

# A chunk is (encoded bytes, records in them, layout the output may use to find record ends).
Chunk = tuple[bytes, int, Any]


class Output(Protocol):
    """Where a writer's chunks go."""

    def write_chunks(self, chunks: list[Chunk]) -> tuple[int, losses.Counts]:
        """Write ``chunks`` in order; (records written, records lost by reason)."""

    def close(self) -> None:
        """Close what is open; the next write opens again."""

    def forget_inherited(self) -> None:
        """In a forked child: drop what the parent had open, without flushing it."""


class _PendingBytes:
    """FIFO of chunks bounded by their total size, with the bookkeeping behind flush()."""

    def __init__(self, max_bytes: int) -> None:
        self._lock = threading.Lock()
        self._has_chunks = threading.Condition(self._lock)
        self._has_room = threading.Condition(self._lock)
        self._progressed = threading.Condition(self._lock)
        self._chunks: collections.deque[Chunk] = collections.deque()
        self._bytes = 0  # queued or being written
        self._max_bytes = max_bytes
        self._accepted = 0  # records
        self._finished = 0  # records written or lost
        self._closed = False
        self._stalled = False  # a wait for room timed out; cleared when a write finishes

    def put(self, chunk: Chunk, wait_seconds: float = 0.0) -> str | None:
        """Queue ``chunk``; None if queued, else the reason it was not."""
        size = len(chunk[0])
        with self._lock:
            if self._closed:
                return formats.LOST_WRITER_CLOSED
            if self._bytes + size > self._max_bytes and not self._wait_for_room(size, wait_seconds):
                return formats.LOST_WRITER_CLOSED if self._closed else formats.LOST_QUEUE_FULL
            self._chunks.append(chunk)
            self._bytes += size
            self._accepted += chunk[1]
            self._has_chunks.notify()
            return None

    def _wait_for_room(self, size: int, wait_seconds: float) -> bool:
        if wait_seconds <= 0 or self._stalled or size > self._max_bytes:
            return False
        deadline = time.monotonic() + wait_seconds
        while self._bytes + size > self._max_bytes:
            remaining = deadline - time.monotonic()
            if self._closed or remaining <= 0:
                self._stalled = not self._closed
                return False
            self._has_room.wait(remaining)
        return not self._closed

    def take_all(self) -> list[Chunk] | None:
        """Block until chunks are queued; return them all, or None once closed and empty."""
        with self._lock:
            while not self._chunks and not self._closed:
                self._has_chunks.wait()
            chunks = list(self._chunks)
            self._chunks.clear()
            return chunks or None

    def mark_finished(self, size: int, records: int) -> None:
        with self._lock:
            self._bytes -= size
            self._finished += records
            self._stalled = False
            self._has_room.notify_all()
            self._progressed.notify_all()

    def wait_finished(self, deadline: float) -> bool:
        """Wait until everything accepted so far is finished; False on timeout."""
        with self._lock:
            target = self._accepted
            while self._finished < target:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._progressed.wait(min(remaining, 1.0))
            return True

    def unfinished(self) -> int:
        with self._lock:
            return self._accepted - self._finished

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._has_chunks.notify_all()
            self._has_room.notify_all()


# Every writer of this process, for flush(), the exit hook and the fork reset.
_live_writers: weakref.WeakSet[BackgroundWriter] = weakref.WeakSet()


class BackgroundWriter:
    """One daemon thread that drains a bounded queue into an ``Output``.

    ``facility`` and ``unit`` name what is counted (``"sample_flow"``, rows).
    The thread starts on first use; ``wait_seconds`` is how long ``submit``
    may wait for room before dropping.
    """

    def __init__(
        self, name: str, facility: str, unit: str, output: Output, max_bytes: int, wait_seconds: float = 0.0
    ) -> None:
        self.name = name
        self.facility = facility
        self.unit = unit
        self.output = output
        self.wait_seconds = wait_seconds
        self._max_bytes = max_bytes
        self._drops = losses.Tally()
        self._reset_process_state()
        _live_writers.add(self)

    def _reset_process_state(self) -> None:
        self._pending = _PendingBytes(self._max_bytes)
        self._thread: threading.Thread | None = None
        self._start_lock = safety.lock()

    def forget_after_fork(self) -> None:
        """Drop state inherited from the parent; must not touch the parent's locks."""
        self.output.forget_inherited()
        self._drops = losses.Tally()
        self._reset_process_state()

    def submit(self, chunk: Chunk) -> bool:
        """Queue ``chunk`` (bytes, records, layout); False if it was dropped (and counted)."""
        process.ensure_current()
        if self._thread is None and not self._start_thread():
            self.count_drop(formats.LOST_NO_WRITER, chunk[1])
            return False
        reason = self._pending.put(chunk, self.wait_seconds)
        if reason is not None:
            self.count_drop(reason, chunk[1])
            return False
        return True

    def count_drop(self, reason: str, records: int = 1, *, report: bool = True) -> None:
        """Count ``records`` lost for ``reason`` here and in the process's loss counts."""
        self._drops.add(reason, records)
        losses.count_lost(self.facility, reason, records, report=report)

    def _start_thread(self) -> bool:
        if not self._start_lock.acquire(timeout=settings.LOCK_TIMEOUT_SECONDS):
            return False
        try:
            if self._thread is None:
                thread = threading.Thread(
                    target=self._drain, args=(self._pending,), name=f"verl-trace-{self.name}", daemon=True
                )
                thread.start()  # RuntimeError at interpreter shutdown
                self._thread = thread
                watch_multiprocessing_exit()
            return True
        except RuntimeError as exc:
            if safety.raised_by_signal_handler(exc):
                raise
            return False
        finally:
            self._start_lock.release()

    def _drain(self, pending: _PendingBytes) -> None:
        while True:
            chunks = pending.take_all()
            if chunks is None:
                break
            size = sum(len(chunk[0]) for chunk in chunks)
            records = sum(chunk[1] for chunk in chunks)
            try:
                written, lost = self.output.write_chunks(chunks)
            except Exception as exc:
                written, lost = 0, {losses.WRITE_ERROR: records}
                safety.warn_once(("write", self.name), "tracing: %s writer failed: %s", self.name, exc)
            losses.count_written(self.facility, written)
            for reason, count in lost.items():
                self.count_drop(reason, count)
            pending.mark_finished(size, records)
        self.output.close()

    def flush(self, deadline: float) -> bool:
        """Wait (until ``deadline``, a time.monotonic() value) for queued records."""
        process.ensure_current()
        return self._pending.wait_finished(deadline)

    def close(self, deadline: float) -> bool:
        """Flush, then stop the thread and close the output; False if time ran out."""
        process.ensure_current()
        flushed = self._pending.wait_finished(deadline)
        self._pending.close()
        thread = self._thread
        if thread is None:
            self.output.close()
        else:
            thread.join(max(0.0, deadline - time.monotonic()))
        return flushed

    def retire(self) -> None:
        """Stop accepting records; the thread finishes what is queued and exits."""
        self._pending.close()
        if self._thread is None:
            self.output.close()

    def unfinished(self) -> int:
        """Records accepted but neither written nor lost yet."""
        return self._pending.unfinished()

    def drop_counts(self) -> losses.Counts:
        counts = dict(self._drops.totals())
        unfinished = self.unfinished()
        if unfinished:
            counts[formats.LOST_AT_EXIT] = counts.get(formats.LOST_AT_EXIT, 0) + unfinished
        return counts

    def drop_report(self) -> str | None:
        """``[verl tracing] NAME writer dropped N unit(s) (reason: n, ...)``, or None."""
        counts = self.drop_counts()
        total = sum(counts.values())
        if not total:
            return None
        details = losses.format_counts(counts)
        return f"[verl tracing] {self.name} writer dropped {total} {self.unit}(s) ({details})"


def deadline_after(timeout: float | None) -> float:
    """time.monotonic() ``timeout`` seconds from now (None: never)."""
    if timeout is None:
        return float("inf")
    return time.monotonic() + max(0.0, float(timeout))


def flush(timeout: float | None = 5.0) -> bool:
    """Wait up to ``timeout`` seconds for all queued trace output to reach disk.

    The exit hook does this automatically; call it explicitly before leaving
    through ``os._exit()``. Returns True when everything was written (or lost
    for a counted reason) in time.
    """
    if not safety.enter():
        return False
    try:
        process.ensure_current()
        deadline = deadline_after(timeout)
        done = True
        for writer in list(_live_writers):
            done = writer.flush(deadline) and done
        return done
    except Exception as exc:
        if safety.raised_by_signal_handler(exc):
            raise
        return False
    finally:
        safety.leave()


def close_all(timeout: float = 2.0) -> None:
    """Flush and stop every writer of this process (test and shutdown helper)."""
    deadline = deadline_after(timeout)
    for writer in list(_live_writers):
        try:
            writer.close(deadline)
        except Exception as exc:
            if safety.raised_by_signal_handler(exc):
                raise


_exit_report_written = False


def _flush_and_report_at_exit() -> None:
    """At exit: bounded flush of every writer, the final status file, one stderr line per lossy facility.

    Bounded in time: EXIT_FLUSH_SECONDS for the writers, EXIT_STATUS_SECONDS for the status file.
    """
    global _exit_report_written
    if not safety.enter():
        return
    try:
        process.ensure_current()  # may reset the flag below: check it afterwards
        if _exit_report_written:
            return
        _exit_report_written = True
        writers = list(_live_writers)
        deadline = time.monotonic() + settings.EXIT_FLUSH_SECONDS
        for writer in writers:
            writer.flush(deadline)
        for writer in writers:
            unfinished = writer.unfinished()
            if unfinished:
                losses.count_lost(writer.facility, formats.LOST_AT_EXIT, unfinished, report=False)
        report = losses.finish(settings.EXIT_STATUS_SECONDS)
        if report:
            streams.write_stderr(report)
    except Exception as exc:
        if safety.raised_by_signal_handler(exc):
            raise
    finally:
        safety.leave()


_multiprocessing_hook_pid: int | None = None


def watch_multiprocessing_exit() -> None:
    """In a multiprocessing child, also run the exit hook from its finalizers.

    Such children leave through os._exit() and never run atexit handlers, but
    they do run multiprocessing finalizers first.
    """
    global _multiprocessing_hook_pid
    multiprocessing = sys.modules.get("multiprocessing")
    if multiprocessing is None or _multiprocessing_hook_pid == os.getpid():
        return
    _multiprocessing_hook_pid = os.getpid()
    try:
        if multiprocessing.parent_process() is not None:
            from multiprocessing import util

            util.Finalize(None, _flush_and_report_at_exit, exitpriority=0)
    except Exception as exc:
        if safety.raised_by_signal_handler(exc):
            raise


def _reset_in_child() -> None:
    global _exit_report_written
    _exit_report_written = False
    for writer in list(_live_writers):
        writer.forget_after_fork()


atexit.register(_flush_and_report_at_exit)
process.on_new_process(_reset_in_child)
