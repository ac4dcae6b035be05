"""The figures do not depend on the order an engine's threads add rows up in: the same trace gives
the same JSON document every time."""

from __future__ import annotations

import math
from importlib import resources
from pathlib import Path

import duckdb

from trace_instrument.traces.duckdb_backend import DuckDBDialect

# a float sum of these is 0 or 1 by the order it adds them in; the exact sum is 1
VALUES = (1e16, 1.0, -1e16)
ORDERS = ((0, 1, 2), (0, 2, 1), (1, 0, 2))


def _means(expression: str) -> set[float]:
    con = duckdb.connect()
    con.execute("SET threads = 1")
    found = set()
    for order in ORDERS:
        con.execute("CREATE OR REPLACE TABLE t (x DOUBLE)")
        con.executemany("INSERT INTO t VALUES (?)", [(VALUES[i],) for i in order])
        found.add(con.execute(f"SELECT {expression} FROM t").fetchone()[0])
    return found


def test_a_float_mean_is_the_same_in_any_order() -> None:
    assert len(_means("avg(x)")) > 1  # the engine's own mean depends on the order
    assert _means(DuckDBDialect().exact_mean("x")) == {1 / 3}


def test_values_no_decimal_holds_take_the_float_mean() -> None:
    """inf, NaN or a value of 10^18 or more: the engine's own mean, never an overflow or a value left out."""
    con = duckdb.connect()
    mean = DuckDBDialect().exact_mean("x")
    for values, expected in (
        ((9e28, 9e28), 9e28),
        ((1e30, 1.0, 1.0), (1e30 + 2) / 3),
        ((1.0, float("inf")), float("inf")),
    ):
        con.execute("CREATE OR REPLACE TABLE t (x DOUBLE)")
        con.executemany("INSERT INTO t VALUES (?)", [(v,) for v in values])
        assert con.execute(f"SELECT {mean} FROM t").fetchone()[0] == expected
    con.execute("CREATE OR REPLACE TABLE t (x DOUBLE)")
    con.executemany("INSERT INTO t VALUES (?)", [(1.0,), (float("nan"),)])
    assert math.isnan(con.execute(f"SELECT {mean} FROM t").fetchone()[0])
    con.execute("CREATE OR REPLACE TABLE t (x DOUBLE)")
    assert con.execute(f"SELECT {mean} FROM t").fetchone()[0] is None  # no values: no mean


def test_no_view_takes_a_float_mean_of_its_own() -> None:
    """Every mean of a floating-point field goes through exact_mean (integer means are exact)."""
    floats = ("sglang_", "score")
    folder = Path(str(resources.files("trace_instrument.traces") / "sql"))
    paths = sorted(folder.rglob("*.sql"))
    assert len(paths) > 50  # the views' files, found
    for path in paths:
        text = path.read_text(encoding="utf-8")
        for field in floats:
            assert f"avg({field}" not in text, path


def test_trajectory_lines_keep_their_order_on_every_read(sim_run, tmp_path: Path) -> None:
    """A trajectory's id is its line's place (files in order, each line by line), so an export's
    ``traj_id`` and the first bad lines shown are the same on every read, threads or not."""
    import json

    from trace_instrument.traces.discover import discover
    from trace_instrument.traces.duckdb_backend import DuckDBBackend
    from trace_instrument.traces.model import FileKind

    inputs = discover([sim_run[0]])
    expected = []
    for f in inputs.of_kind(FileKind.TRAJECTORY):
        for line in Path(f.path).read_text(encoding="utf-8").splitlines():
            top = json.loads(line)
            expected.append((f.file_id, top["prompt_uid"], top["sample_index"]))
    assert len({e[0] for e in expected}) > 1
    for attempt in range(3):
        backend = DuckDBBackend(None, tmp_path / f"spill{attempt}", threads=2)
        try:
            backend.load(inputs)
            got = backend.run("SELECT file_id, prompt_uid, sample_index FROM traj_lines ORDER BY rowid")
            ids = backend.run("SELECT traj_id, prompt_uid, sample_index FROM trajectories_all ORDER BY traj_id")
        finally:
            backend.close()
        assert got == expected
        assert [row[1:] for row in ids] == [row[1:] for row in expected]
