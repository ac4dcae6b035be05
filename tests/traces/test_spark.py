"""`analyze --engine spark`: the same SQL files on Spark in local mode give the same numbers as DuckDB."""

from __future__ import annotations

import shutil
from dataclasses import asdict
from pathlib import Path
from types import ModuleType

import pytest
from recompute import read_rows

from trace_instrument.traces.analyze import Options, analyze
from trace_instrument.traces.salvage import RowProblem


def _rounded(value: object) -> object:
    """Floats to 9 significant digits: the engines may differ in the last bits of an interpolation."""
    if isinstance(value, float):
        return float(f"{value:.9g}")
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_rounded(v) for v in value]
    return value


def test_spark_matches_duckdb(tiny_run: Path, monkeypatch: pytest.MonkeyPatch, pyspark: ModuleType) -> None:
    from trace_instrument.traces.spark_backend import SparkDialect

    spark = asdict(analyze([tiny_run], Options(cache=False, engine="spark")))
    duck = asdict(analyze([tiny_run], Options(cache=False)))
    assert spark.pop("engine") == "spark" and duck.pop("engine") == "duckdb"
    assert _rounded(spark) == _rounded(duck)
    # sample ids sharing a hash (forced: a key of two values) fall back to the ids' text on Spark too
    monkeypatch.setattr(SparkDialect, "sample_keys", lambda self, column: (f"pmod(xxhash64({column}), 2)", column))
    fallback = asdict(analyze([tiny_run], Options(cache=False, engine="spark")))
    fallback.pop("engine")
    assert _rounded(fallback) == _rounded(duck)
    # and the numbers are the hand-computed ones (test_analyze_tiny), not just equal to each other
    gen = next(x for x in spark["latencies"] if x["to_event"].endswith("received_generate_response"))
    assert (gen["count"], gen["p50"], gen["p90"]) == (4, 250.0, 300.0)
    assert spark["rollouts"]["turns"]["quantiles"]["p99"] == pytest.approx(1.98)


def test_spark_skips_the_same_damaged_rows_as_duckdb(tiny_run: Path, tmp_path: Path, pyspark: ModuleType) -> None:
    """A bare LF in a CRLF file and a corrupt file: both engines read the good rows and count the same bad ones."""
    copy = shutil.copytree(tiny_run, tmp_path / "trace")
    worker = next((copy / "sample").glob("node-b-*.csv"))
    lines = worker.read_bytes().splitlines()
    worker.write_bytes(b"\r\n".join(lines[:5] + [lines[5] + b"\nstray"] + lines[6:]) + b"\r\n")
    (copy / "sample" / "node-z-pid9.csv").write_bytes(
        b"\xff\xfe\x00garbage\n"
        b'job,sample,u/0,RUNNING,1787215021000,"never closed\n'
        b"a,b,c\n"
        b"job,sample,u/0,RUNNING,soon,from=A|to=B|stage=X\n"
        b"job,sample,u/0,RUNNING,1,2,3,4\n"
    )
    # a clean file whose timestamps only a cast reads (+5) or that are plain digits with a leading zero
    trainer = next((copy / "sample").glob("node-a-*.csv"))
    first = trainer.read_bytes().splitlines()[0].split(b",")
    odd = [b",".join([*first[:4], ts, first[5]]) for ts in (b"+" + first[4], b"1e3", b"0" + first[4])]
    with open(trainer, "ab") as f:
        f.write(b"\r\n".join(odd) + b"\r\n")
    # a file whose rows are good, two of them with line breaks inside a quoted sample id (which
    # Spark's line-by-line reader splits: the file is read through salvage, the copy whole); the
    # ids' uid is one of the run's, so the file is the run's
    fields, uid = b",".join(first[4:]), b"11111111-aaaa-4aaa-aaaa-111111111111"
    (copy / "sample" / "node-y-pid8.csv").write_bytes(
        b'job-tiny,sample,"' + uid + b'/a\nb",RUNNING,' + fields + b"\r\n"
        b'job-tiny,sample,"' + uid + b'/c\r\nd",RUNNING,' + fields + b"\r\n"
        b"job-tiny,sample," + uid + b"/e,RUNNING," + fields + b"\r\n"
    )
    spark = analyze([copy], Options(cache=False, engine="spark"))
    duck = analyze([copy], Options(cache=False))
    # the leading-zero row is read: the same row as the file's first, so a duplicate (left out of the latencies)
    assert len(read_rows(tiny_run)) + 1 + 3 == duck.header.rows_read == spark.header.rows_read
    assert duck.header.rows_rejected == spark.header.rows_rejected == 6 + 2 + 1
    assert spark.header.skipped == duck.header.skipped
    bad_ts = next(s for s in duck.header.skipped if s.reason == RowProblem.BAD_TIMESTAMP.value)
    assert bad_ts.count == 3 and dict(bad_ts.per_file)[str(trainer)] == 2
    spark_figures, duck_figures = asdict(spark), asdict(duck)
    assert spark_figures.pop("engine") == "spark" and duck_figures.pop("engine") == "duckdb"
    assert _rounded(spark_figures) == _rounded(duck_figures)


def test_spark_opens_a_trajectory_as_duckdb_does(tiny_run: Path, pyspark: ModuleType) -> None:
    """``--trajectory`` reads the run's rows and trajectory lines through the engine's SQL: the same
    turns, rows and stop reason on Spark, for a finished trajectory and one cut off mid-rollout.
    (``--baseline`` compares two analyses, each the engine's, which the test above holds equal.)"""
    from trace_instrument.traces.trajectory import open_trajectories

    ids = ["22222222-bbbb-4bbb-bbbb-222222222222/0", "22222222-bbbb-4bbb-bbbb-222222222222/1"]
    spark = open_trajectories([tiny_run], ids, Options(cache=False, engine="spark"))
    duck = open_trajectories([tiny_run], ids, Options(cache=False))
    assert [d.sample_id for d in duck] == ids and duck[0].turns and all(d.rows for d in duck)
    assert _rounded([asdict(d) for d in spark]) == _rounded([asdict(d) for d in duck])


def test_spark_splits_sample_ids_as_defined(pyspark: ModuleType) -> None:
    """Spark's uid and trajectory parts of the odd ids are the definition's (test_placeholders.py)."""
    from test_placeholders import ODD_IDS, id_parts

    from trace_instrument.traces.spark_backend import SparkBackend

    backend = SparkBackend()
    try:
        backend.spark.createDataFrame([(i,) for i in ODD_IDS], "sample_id string").createOrReplaceTempView("ids")
        dialect = backend.dialect
        rows = backend.run(f"SELECT sample_id, {dialect.uid_of('sample_id')}, {dialect.traj_of('sample_id')} FROM ids")
    finally:
        backend.close()
    assert len(rows) == len(ODD_IDS)
    for sample_id, uid, traj in rows:
        assert (uid, traj) == id_parts(sample_id), repr(sample_id)
