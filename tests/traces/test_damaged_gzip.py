"""A gzip trace file cut short (a copy interrupted, a disk that filled up): the lines before the
cut are read and the file is counted as damaged at its last good line, on both engines alike.
A trajectory file used to vanish without a word (Python's gzip module drops the block it was
decompressing at the cut); Spark stopped the whole analysis with a Java EOFException."""

from __future__ import annotations

import gzip
import json
import shutil
import zlib
from pathlib import Path
from types import ModuleType

import pytest

from trace_instrument.traces.analyze import Options, analyze
from trace_instrument.traces.parquet import export_parquet
from trace_instrument.traces.salvage import DAMAGED_TRAJECTORY_FILE, RowProblem

NO_CACHE = Options(cache=False)


def _cut_gzip(path: Path, keep: float) -> tuple[Path, int]:
    """Replace ``path`` by ``path.gz`` cut at ``keep`` of its compressed bytes; the complete lines
    that still decompress, counted by zlib in one call (no streaming)."""
    packed = gzip.compress(path.read_bytes())
    cut = packed[: int(len(packed) * keep)]
    target = path.with_name(path.name + ".gz")
    target.write_bytes(cut)
    path.unlink()
    return target, zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(cut).count(b"\n")


def _lines(paths: list[Path]) -> int:
    return sum(p.read_bytes().count(b"\n") for p in paths)


@pytest.fixture
def damaged(sim_run, tmp_path: Path) -> tuple[Path, dict]:
    trace = Path(shutil.copytree(sim_run[0], tmp_path / "trace", ignore=shutil.ignore_patterns(".trace-*")))
    jsonl = max(trace.glob("trajectory/*.jsonl"), key=lambda p: p.stat().st_size)
    sample = max(trace.glob("sample/*.csv"), key=lambda p: p.stat().st_size)
    other_trajectories = _lines([p for p in trace.glob("trajectory/*.jsonl") if p != jsonl])
    other_rows = _lines([p for p in trace.glob("sample/*.csv") if p != sample])
    jsonl_gz, jsonl_kept = _cut_gzip(jsonl, 0.6)
    sample_gz, sample_kept = _cut_gzip(sample, 0.6)
    assert 0 < jsonl_kept and 0 < sample_kept
    expected = {
        "trajectories": other_trajectories + jsonl_kept,
        "rows": other_rows + sample_kept,
        "jsonl": (str(jsonl_gz), jsonl_kept),
        "sample": (str(sample_gz), sample_kept),
    }
    return trace, expected


def _check(analysis, expected: dict) -> None:
    header = analysis.header
    assert header.trajectories_read == expected["trajectories"]
    assert header.rows_read == expected["rows"]
    skipped = {s.reason: s for s in header.skipped}
    path, kept = expected["jsonl"]
    traj = skipped[DAMAGED_TRAJECTORY_FILE]
    assert traj.count == 1 and traj.per_file == ((path, 1),)
    assert traj.examples == (f"{path}:{kept} (the last line that decompressed)",)
    path, kept = expected["sample"]
    rows = skipped[RowProblem.UNREADABLE_FILE.value]
    assert rows.count == 1 and rows.per_file == ((path, 1),)
    assert rows.examples == (f"{path}:{kept} (ends after line {kept}: {kept:,} rows read)",)


def test_a_cut_gzip_file_keeps_its_lines_and_is_counted_as_damaged(damaged, tmp_path: Path) -> None:
    trace, expected = damaged
    _check(analyze([trace], NO_CACHE), expected)
    export_parquet([trace], tmp_path / "parquet", NO_CACHE)
    manifest = json.loads((tmp_path / "parquet" / "manifest.json").read_text(encoding="utf-8"))
    left_out = {item["reason"]: item for item in manifest["left_out"]}
    assert left_out[DAMAGED_TRAJECTORY_FILE]["count"] == 1
    assert left_out[RowProblem.UNREADABLE_FILE.value]["count"] == 1


def test_a_whole_gzip_file_is_not_damaged(sim_run, tmp_path: Path) -> None:
    """The no-op twin: the same files compressed whole are read whole, nothing reported."""
    trace = Path(shutil.copytree(sim_run[0], tmp_path / "trace", ignore=shutil.ignore_patterns(".trace-*")))
    rows, trajectories = _lines(list(trace.glob("sample/*.csv"))), _lines(list(trace.glob("trajectory/*.jsonl")))
    for path in [*trace.glob("sample/*.csv"), *trace.glob("trajectory/*.jsonl")]:
        _cut_gzip(path, 1.0)
    header = analyze([trace], NO_CACHE).header
    assert header.rows_read == rows and header.trajectories_read == trajectories
    assert not header.skipped


def test_spark_reads_a_cut_gzip_file_as_duckdb_does(damaged, pyspark: ModuleType) -> None:
    trace, expected = damaged
    spark = analyze([trace], Options(cache=False, engine="spark"))
    _check(spark, expected)
    duck = analyze([trace], NO_CACHE).header
    assert {(s.reason, s.count, s.per_file) for s in spark.header.skipped} == {
        (s.reason, s.count, s.per_file) for s in duck.skipped
    }
    assert spark.header.rows_rejected == duck.rows_rejected
