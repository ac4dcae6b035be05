"""How `analyze` and `export` read: the options, and when a run is read in memory."""

from __future__ import annotations

from dataclasses import dataclass

from trace_instrument.traces.model import (
    DEFAULT_MEMORY_LIMIT,
)

# Trace files up to this size are read into memory, without a cache: a database file costs a third
# more loading time (its columns are compressed as they are written), and reading such a run again
# takes seconds anyway. Past DuckDB's memory limit, the in-memory tables move to the spill directory.
IN_MEMORY_MAX_BYTES = 512 * 2**20
GZIP_RATIO = 8  # a compressed trace file counts as this many times its size


@dataclass(frozen=True)
class Options:
    """How to read: the step range, the run, the engine, the cache and DuckDB's memory limit.

    ``in_memory_max_bytes``: inputs of at most this size (gzip files weighted by GZIP_RATIO) are
    read into memory and never cached.
    """

    steps: tuple[int, int] | None = None
    run: str | None = None  # a run id or job id (traces/runs.py): required when the inputs hold several runs
    engine: str = "duckdb"
    cache: bool = True
    memory_limit: str = DEFAULT_MEMORY_LIMIT
    threads: int | None = None
    spark_master: str | None = None
    in_memory_max_bytes: int = IN_MEMORY_MAX_BYTES
    open_slowest: int = 0  # the slowest rollouts opened turn by turn (Analysis.slowest_details), for the page


DEFAULT_OPTIONS = Options()
