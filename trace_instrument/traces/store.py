"""Opening an engine on a run's inputs: in memory, or on the DuckDB cache beside the traces (its key, its
completeness, its metadata)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from trace_instrument import formats
from trace_instrument.caches import code_digest
from trace_instrument.traces.backend import Backend, LoadReport
from trace_instrument.traces.discover import CACHE_DIR_NAME, Inputs, discover
from trace_instrument.traces.model import Skipped, SourceFile, TraceInputError
from trace_instrument.traces.options import GZIP_RATIO, Options

# The reader's own code: its modules and SQL files, and the trace format it reads by (the runtime's).
# A cache is keyed by their digest, so one written by another version of the reader is never read (it
# has another name, and is removed as stale).
READER_CODE = Path(__file__).parent
READER_SUFFIXES = (".py", ".sql")
# Told what a long read is doing ("reading 42 files, 1.3 GB"); the CLI shows it on a terminal.
Progress = Callable[[str], None]


# -- opening an engine on the inputs ---------------------------------------------------------------


def _file_stats(inputs: Inputs) -> Iterator[tuple[SourceFile, os.stat_result]]:
    """Each input file with its stat; a file gone since discovery is left out."""
    for f in inputs.files:
        try:
            yield f, os.stat(f.path)
        except OSError:
            continue


def _cache_key(inputs: Inputs) -> str:
    """The inputs (path, size, time) as this reader reads them."""
    digest = hashlib.sha256(code_digest(READER_CODE, READER_SUFFIXES, formats.SOURCE))
    for f, stat in _file_stats(inputs):
        digest.update(f"{f.path}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:24]


def _cache_dir(roots: list[Path]) -> Path | None:
    candidates = [roots[0] / CACHE_DIR_NAME, Path.home() / ".cache" / "trace-instrument" / "analyze"]
    for candidate in candidates:
        try:
            candidate.mkdir(parents=True, exist_ok=True)
            probe = candidate / ".write-probe"
            probe.write_text("")
            probe.unlink()
            return candidate
        except OSError:
            continue
    return None


@contextmanager
def open_engine(
    roots: list[Path], options: Options, progress: Progress | None = None
) -> Iterator[tuple[Backend, Inputs, LoadReport, bool]]:
    """Discover the inputs and load them into an engine (DuckDB reuses a cache of an unchanged folder).

    ``progress`` is told what is being done, in a few words, as each part starts."""
    tell = progress or _quiet
    tell("finding the trace files")
    inputs = discover_inputs(roots)
    if options.engine == "spark":
        from trace_instrument.traces.spark_backend import SparkBackend

        spark = SparkBackend(master=options.spark_master)
        try:
            tell(f"reading {_size(inputs)} with Spark")
            report = spark.load(inputs)
            yield spark, inputs, report, False
        finally:
            spark.close()
        return
    with _duckdb_database(roots, inputs, options) as (database, spill_dir, reused):
        from trace_instrument.traces.duckdb_backend import DuckDBBackend

        backend = DuckDBBackend(database, spill_dir, options.memory_limit, options.threads)
        try:
            if reused:
                tell("reading the cache")
                report = _read_cache_meta(backend)
                backend.select_steps(None)
            else:
                tell(f"reading {_size(inputs)}")
                report = backend.load(inputs)
                if database is not None and options.cache:
                    # a checkpoint of an in-memory database would spend a second compressing tables no one reuses
                    _write_cache_meta(backend, report)
            yield backend, inputs, report, reused
        finally:
            backend.close()


@contextmanager
def _duckdb_database(roots: list[Path], inputs: Inputs, options: Options) -> Iterator[tuple[Path | None, Path, bool]]:
    """(the database file or None for memory, the spill directory, whether the file is a complete cache)."""
    in_memory = _input_bytes(inputs) <= options.in_memory_max_bytes
    cache_dir = _cache_dir(roots) if options.cache and not in_memory else None
    if cache_dir is not None:
        database = cache_dir / f"analyze-{_cache_key(inputs)}.duckdb"
        for old in cache_dir.glob("analyze-*.duckdb*"):
            if not old.name.startswith(database.name):
                _remove(old)
        if database.exists() and not _cache_complete(database):
            _remove(database)
        yield database, Path(str(database) + ".tmp"), database.exists()
        return
    tmp = Path(tempfile.mkdtemp(prefix="trace-analyze-"))
    try:
        yield (None if in_memory else tmp / "analyze.duckdb"), tmp, False
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def trace_folders(roots: list[Path]) -> list[Path]:
    """``roots`` as paths; raises TraceInputError naming those that are not folders."""
    roots = [Path(r) for r in roots]
    missing = [str(r) for r in roots if not r.is_dir()]
    if missing:
        raise TraceInputError("not a folder: " + ", ".join(missing))
    return roots


def discover_inputs(roots: list[Path]) -> Inputs:
    """The trace files under ``roots``; raises TraceInputError when there are none."""
    inputs = discover(roots)
    if not inputs.files:
        raise TraceInputError(
            "no trace files found under " + ", ".join(str(r) for r in roots) + " (expected sample/*.csv, "
            "progress/*.log or trajectory/*.jsonl below these folders)"
        )
    return inputs


def _quiet(_: str) -> None:
    """No one is told."""


def _size(inputs: Inputs) -> str:
    """``42 files, 1.3 GB`` (bytes on disk)."""
    total = float(sum(s.st_size for _, s in _file_stats(inputs)))
    for unit in ("bytes", "KB", "MB", "GB"):
        if total < 1000 or unit == "GB":
            break
        total /= 1000
    amount = f"{total:,.0f} {unit}" if unit == "bytes" else f"{total:,.1f} {unit}"
    return f"{len(inputs.files):,} files, {amount}"


def _input_bytes(inputs: Inputs) -> int:
    return sum(s.st_size * (GZIP_RATIO if f.path.endswith(".gz") else 1) for f, s in _file_stats(inputs))


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _cache_complete(database: Path) -> bool:
    import duckdb

    try:
        con = duckdb.connect(str(database), read_only=True)
    except duckdb.Error:
        return False
    try:
        return bool(con.execute("SELECT count(*) FROM cache_meta").fetchone())
    except duckdb.Error:
        return False
    finally:
        con.close()


def _write_cache_meta(backend: Backend, report: LoadReport) -> None:
    payload = json.dumps(
        {
            "skipped": [[s.reason, s.count, list(s.examples), [list(f) for f in s.per_file]] for s in report.skipped],
            "rejected": report.rows_rejected,
            "rejected_per_file": [list(f) for f in report.rejected_per_file],
        }
    )
    backend.run("CREATE TABLE cache_meta (report VARCHAR)")
    backend.run("INSERT INTO cache_meta VALUES ('" + payload.replace("'", "''") + "')")
    backend.run("CHECKPOINT")


def _read_cache_meta(backend: Backend) -> LoadReport:
    (payload,) = backend.run("SELECT report FROM cache_meta")[0]
    data = json.loads(payload)
    skipped = tuple(
        Skipped(r, int(n), tuple(ex), tuple((str(p), int(c)) for p, c in files)) for r, n, ex, files in data["skipped"]
    )
    rejected = tuple((str(p), int(c)) for p, c in data["rejected_per_file"])
    return LoadReport(skipped, int(data["rejected"]), rejected)
