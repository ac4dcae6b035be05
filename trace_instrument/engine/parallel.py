"""Per-file work on several cores (fork), in the order the caller gave."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
C = TypeVar("C")
R = TypeVar("R")

MIN_FILES = 4  # below this, starting workers costs more than it saves
WORKERS_ENV = "TRACE_INSTRUMENT_WORKERS"

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
    """
    workers = worker_count(len(items))
    if workers == 1:
        results = [function(context, item) for item in items]
        if meanwhile is not None:
            meanwhile()
        return results
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    order = sorted(range(len(items)), key=lambda i: -weights[i])
    pool_context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(
        max_workers=workers, mp_context=pool_context, initializer=_start_worker, initargs=(context,)
    ) as pool:
        try:
            futures = {i: pool.submit(_in_worker, function, items[i]) for i in order}
            if meanwhile is not None:
                meanwhile()
            return [futures[i].result() for i in range(len(items))]
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)  # jobs under way finish (a second or so)
            raise


def _start_worker(context: Any) -> None:
    # Ctrl-C reaches the whole process group: the parent alone decides what happens
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _WORKER_CONTEXT[:] = [context]


def _in_worker(function: Callable[[Any, T], R], item: T) -> R:
    return function(_WORKER_CONTEXT[0], item)
