"""Per-file work on several cores (fork), in the order the caller gave.

The workers never outlive the run: an interruption kills them before it is let through, and a
run killed outright (SIGKILL, SIGHUP) takes them with it (the kernel's parent-death signal on
Linux, a pipe they watch everywhere).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from trace_instrument.engine.files import forget_inherited_locks

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

T = TypeVar("T")
C = TypeVar("C")
R = TypeVar("R")

MIN_FILES = 4  # below this, starting workers costs more than it saves
WORKERS_ENV = "TRACE_INSTRUMENT_WORKERS"
# what stops a run; while the pool's own code runs they wait (see _Pool.guarded)
_STOPS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))
_POLL_SECONDS = 0.05  # how often the wait for the workers looks for an interruption
_PR_SET_PDEATHSIG = 1  # linux/prctl.h

# A forked worker's copy of the run's context (the catalog is costly to pickle for every job);
# set by the pool's initializer in the worker only, never read by the serial path.
_WORKER_CONTEXT: list[Any] = []


def worker_count(jobs: int) -> int:
    import multiprocessing  # (and the pool below) only for a run that has files to work on

    configured = os.environ.get(WORKERS_ENV)
    cores = int(configured) if configured and configured.isdigit() else (os.cpu_count() or 1)
    if jobs < MIN_FILES or cores < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return 1
    return min(cores, jobs)


def file_size(path: Path) -> float:
    """Bytes in a file (0 when it cannot be read): how heavy its job is."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


def map_in_order(
    function: Callable[[C, T], R],
    items: Sequence[T],
    weights: Sequence[float],
    context: C,
    meanwhile: Callable[[], object] | None = None,
) -> list[R]:
    """function(context, item) for every item, heaviest first across workers; results in the items' order.

    `meanwhile` is run by this process while the workers work (after the items when there are none).
    Whatever ends the call early (an exception, SIGINT, SIGTERM, SIGHUP) kills the workers first.
    """
    workers = worker_count(len(items))
    if workers == 1:
        results = [function(context, item) for item in items]
        if meanwhile is not None:
            meanwhile()
        return results
    order = sorted(range(len(items)), key=lambda i: -weights[i])
    pool = _Pool(workers, context)
    try:
        with pool.guarded():
            futures = {i: pool.executor.submit(_in_worker, function, items[i]) for i in order}
        if meanwhile is not None:
            meanwhile()  # our own code: an interruption may land anywhere in it
        pool.wait(list(futures.values()))
        results = [futures[i].result() for i in range(len(items))]
    except BaseException:
        pool.kill()
        raise
    pool.close()
    return results


class _Pool:
    """A fork pool whose internals never see an interruption: the pool's own code runs with the
    stop signals recorded rather than raised (an exception raised inside it, e.g. while it holds
    a lock, left a run hanging for good), and a recorded one is let through once the workers
    are dead."""

    def __init__(self, workers: int, context: Any):
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        self._stopped: list[int] = []
        # the workers read this pipe: its end of file says this process is gone (any platform)
        self._watch_read, self._watch_write = os.pipe()
        with self.guarded():
            self.executor: ProcessPoolExecutor = ProcessPoolExecutor(
                max_workers=workers,
                mp_context=multiprocessing.get_context("fork"),
                initializer=_start_worker,
                initargs=(context, os.getpid(), self._watch_read, self._watch_write),
            )

    @contextlib.contextmanager
    def guarded(self) -> Iterator[list[int]]:
        """Run the block with the stop signals recorded (main thread; elsewhere they cannot be
        handled anyway); one that came is delivered after it, the workers killed first."""
        if threading.current_thread() is not threading.main_thread():
            yield self._stopped
            return
        previous = {s: signal.getsignal(s) for s in _STOPS}
        for signum, handler in previous.items():
            if handler is not signal.SIG_IGN:
                signal.signal(signum, self._record)
        try:
            yield self._stopped
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        if self._stopped:
            self.kill()
            _deliver(self._stopped[0], previous.get(self._stopped[0]))

    def _record(self, signum: int, frame: object) -> None:
        self._stopped.append(signum)

    def wait(self, futures: list[Future[Any]]) -> None:
        """Until every job is done or one failed, an interruption looked for between short waits."""
        from concurrent.futures import FIRST_EXCEPTION
        from concurrent.futures import wait as wait_for

        pending = set(futures)
        with self.guarded() as stopped:
            while pending and not stopped:
                done, pending = wait_for(pending, timeout=_POLL_SECONDS, return_when=FIRST_EXCEPTION)
                if any(f.exception() is not None for f in done):
                    break

    def kill(self) -> None:
        """End the workers now (they only compute: nothing of theirs needs finishing) and drop the pool."""
        # the executor names its workers only in `_processes` (pid -> Process); shutdown() would wait for them
        processes = dict(getattr(self.executor, "_processes", None) or {}) if hasattr(self, "executor") else {}
        for pid in processes:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        if hasattr(self, "executor"):
            with contextlib.suppress(Exception):
                self.executor.shutdown(wait=False, cancel_futures=True)
        for process in processes.values():
            with contextlib.suppress(Exception):
                process.join(timeout=1)
        self._close_watch()

    def close(self) -> None:
        """The jobs are done: let the workers end."""
        with self.guarded():
            self.executor.shutdown(wait=True)
        self._close_watch()

    def _close_watch(self) -> None:
        for fd in (self._watch_read, self._watch_write):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._watch_read = self._watch_write = -1


def _deliver(signum: int, handler: object) -> None:
    """Let a recorded signal through as if it came now: its handler runs (raising, for ours), or
    the default action ends the process."""
    if callable(handler):
        handler(signum, None)
    elif handler == signal.SIG_DFL:
        signal.raise_signal(signum)


def _start_worker(context: Any, parent: int, watch_read: int, watch_write: int) -> None:
    # Ctrl-C reaches the whole process group: the parent alone decides what happens
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for signum in _STOPS:
        if signum != signal.SIGINT:
            signal.signal(signum, signal.SIG_DFL)
    os.close(watch_write)  # the parent's copy alone keeps the pipe open
    forget_inherited_locks()  # the checkout lock is the parent's: it must go when the parent goes
    _die_with_parent(parent, watch_read)
    _WORKER_CONTEXT[:] = [context]


def _die_with_parent(parent: int, watch_read: int) -> None:
    """End this worker when the process that started it ends, however it ends (SIGKILL included)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # it ended before the line above took effect
        os._exit(1)
    threading.Thread(target=_watch_parent, args=(watch_read,), daemon=True, name="parent-watch").start()


def _watch_parent(watch_read: int) -> None:
    """The pipe's end of file: every copy of its write end is closed, the parent's included."""
    with contextlib.suppress(OSError):
        while os.read(watch_read, 1):
            pass
    os.kill(os.getpid(), signal.SIGKILL)


def _in_worker(function: Callable[[Any, T], R], item: T) -> R:
    return function(_WORKER_CONTEXT[0], item)
