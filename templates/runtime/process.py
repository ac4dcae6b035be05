"""Fork handling: a forked child starts with runtime state of its own.

A child created by ``fork()`` inherits its parent's queued records, open
files, counters and locks, some possibly held by parent threads that do not
exist in the child. None of it is the child's. Each module registers a reset
with ``on_new_process``; the resets run from the at-fork hook, and from
``ensure_current()`` (called by every entry point) for a fork the hook never
saw, e.g. ``fork()`` called from C. A reset must not wait on an inherited lock.

``around_fork`` registers work done in the parent right before and after a
fork (holding the stdout lock, so that no thread of ours is mid-write when
the child is made).
"""

# Containment is this package's job: no failure of the tracing's own reaches the training
# loop, and nothing else (a signal handler's exception) is kept from it (see safety.py).

from __future__ import annotations

import os
from collections.abc import Callable

from .safety import raised_by_signal_handler

_pid = os.getpid()
_resets: list[Callable[[], None]] = []
_before_fork: list[Callable[[], None]] = []
_after_fork_in_parent: list[Callable[[], None]] = []


def on_new_process(reset: Callable[[], None]) -> None:
    """Run ``reset()`` first thing in every forked child."""
    _resets.append(reset)


def around_fork(before: Callable[[], None], after_in_parent: Callable[[], None]) -> None:
    """Run ``before()`` in the forking thread right before a fork, ``after_in_parent()`` right after."""
    _before_fork.append(before)
    _after_fork_in_parent.append(after_in_parent)


def ensure_current() -> None:
    """Catch up on a fork the at-fork hook did not see."""
    if _pid != os.getpid():
        _start_new_process()


def _start_new_process() -> None:
    global _pid
    _pid = os.getpid()
    for reset in _resets:
        try:
            reset()
        except Exception as exc:
            if raised_by_signal_handler(exc):
                raise


def _run_all(callbacks: list[Callable[[], None]]) -> None:
    for callback in list(callbacks):
        try:
            callback()
        except Exception as exc:
            if raised_by_signal_handler(exc):
                raise


def _at_fork_in_child() -> None:
    _start_new_process()


if hasattr(os, "register_at_fork"):
    # Late-bound so a test can simulate a fork that skips the child hook.
    os.register_at_fork(
        before=lambda: _run_all(_before_fork),
        after_in_parent=lambda: _run_all(_after_fork_in_parent),
        after_in_child=lambda: _at_fork_in_child(),
    )
