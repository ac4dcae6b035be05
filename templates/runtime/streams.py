"""The standard streams: stdout echoes of trace events and progress lines, stderr reports.

Echoes from all threads go through one lock: concurrent writes to one text
stream can lose or mangle lines (seen on CPython 3.11 with stdout on a pipe).
The lock is held across ``fork()`` so no echo of ours is half-written when a
child is made; if a parent thread was stuck mid-write anyway, the child does
not touch the stream object (whose internal lock that thread may hold) and
writes its echoes straight to the stream's file descriptor.
"""

# Containment is this package's job: no failure of the tracing's own reaches the training
# loop, and nothing else (a signal handler's exception) is kept from it (see safety.py).

from __future__ import annotations

import os
import sys
from typing import Any

from . import process, safety, settings

_stdout_lock = safety.lock()
_held_for_fork = False
# True in a child forked while a parent thread was writing to stdout.
_stream_may_be_locked = False


def echo(text: str, flush: bool = False) -> None:
    """Write ``text`` to the current sys.stdout; a missing, closed or broken stream is ignored."""
    stream = sys.stdout
    if stream is None:
        return
    process.ensure_current()  # a fork the hook missed leaves the lock held
    if not _stdout_lock.acquire(timeout=settings.STDOUT_LOCK_TIMEOUT_SECONDS):
        return
    try:
        if _stream_may_be_locked:
            _write_to_descriptor(stream, text)
        else:
            _write_to_stream(stream, text, flush)
    except Exception as exc:  # a closed or broken stdout is not the training's problem...
        if safety.raised_by_signal_handler(exc):  # ...a signal handler's exception is
            raise
    finally:
        _stdout_lock.release()


def _write_to_stream(stream: object, text: str, flush: bool) -> None:
    try:
        stream.write(text)  # type: ignore[attr-defined]
    except UnicodeEncodeError as exc:
        if safety.raised_by_signal_handler(exc):
            raise
        encoding = getattr(stream, "encoding", None) or "utf-8"
        stream.write(text.encode(encoding, "backslashreplace").decode(encoding, "replace"))  # type: ignore[attr-defined]
    if flush:
        stream.flush()  # type: ignore[attr-defined]


def _write_to_descriptor(stream: object, text: str) -> None:
    fd = stream.fileno()  # type: ignore[attr-defined]
    data = text.encode(getattr(stream, "encoding", None) or "utf-8", "backslashreplace")
    while data:
        data = data[os.write(fd, data) :]


def write_stderr(text: str) -> None:
    """Write ``text`` to stderr (sys.stderr, else fd 2); never raises."""
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except Exception as exc:
        if safety.raised_by_signal_handler(exc):
            raise
        try:
            os.write(2, text.encode("utf-8", "backslashreplace"))
        except OSError as again:
            if safety.raised_by_signal_handler(again):
                raise


def _hold_for_fork() -> None:
    global _held_for_fork
    _held_for_fork = _stdout_lock.acquire(timeout=settings.LOCK_TIMEOUT_SECONDS)


def _release_after_fork() -> None:
    global _held_for_fork
    if _held_for_fork:
        _held_for_fork = False
        _stdout_lock.release()


def _held_by_another_thread(lock: Any) -> bool:
    if lock.acquire(blocking=False):  # free, or this thread's own: an RLock lets its owner in
        lock.release()
        return False
    return True


def _reset_in_child() -> None:
    global _stdout_lock, _held_for_fork, _stream_may_be_locked
    # Held by someone other than our own fork hook: that thread was mid-write.
    _stream_may_be_locked = _stream_may_be_locked or (not _held_for_fork and _held_by_another_thread(_stdout_lock))
    _held_for_fork = False
    _stdout_lock = safety.lock()


process.around_fork(_hold_for_fork, _release_after_fork)
process.on_new_process(_reset_in_child)
