"""Per-file work on several cores (fork), in the order the caller gave."""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

# Forked workers inherit this: what every job needs and is costly to pickle (the catalog).
SHARED: dict[str, Any] = {}
MIN_FILES = 4  # below this, starting workers costs more than it saves
WORKERS_ENV = "TRACE_INSTRUMENT_WORKERS"


def worker_count(jobs: int) -> int:
    configured = os.environ.get(WORKERS_ENV)
    cores = int(configured) if configured and configured.isdigit() else (os.cpu_count() or 1)
    if jobs < MIN_FILES or cores < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return 1
    return min(cores, jobs)


def map_in_order(
    function: Callable[[T], R], items: Sequence[T], weights: Sequence[float], shared: dict[str, Any]
) -> list[R]:
    """function(item) for every item, heaviest first across workers; results in the items' order."""
    workers = worker_count(len(items))
    SHARED.update(shared)
    try:
        if workers == 1:
            return [function(item) for item in items]
        order = sorted(range(len(items)), key=lambda i: -weights[i])
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            futures = {i: pool.submit(function, items[i]) for i in order}
            return [futures[i].result() for i in range(len(items))]
    finally:
        for key in shared:
            SHARED.pop(key, None)
