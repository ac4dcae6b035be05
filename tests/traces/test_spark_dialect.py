"""The Spark engine's parts that need no Spark (default tier): the SQL its dialect writes where DuckDB
runs the same functions, the torn-line filters, and what SparkBackend asks of a session, on a stand-in
session that records it. Spark itself runs in the spark tier (test_spark.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

from trace_instrument.traces.discover import TornTail
from trace_instrument.traces.model import FileKind, SourceFile
from trace_instrument.traces.spark_backend import (
    PAYLOAD_SCHEMA,
    TOP_SCHEMA,
    SparkBackend,
    SparkDialect,
    _csv_torn_filter,
    _jsonl_torn_filter,
    _lit,
)

IDS = ["11111111-aaaa/0", "uid/with/slashes/3", "no-slash", "/7", "tail/", "line\rbreak/2", ""]


def _uid(sample_id: str) -> str:
    return sample_id.rpartition("/")[0]  # all before the last slash; none: empty


def test_the_uid_and_a_position_are_what_duckdb_computes_of_the_same_sql() -> None:
    """instr, substring, length and reverse mean the same in both engines."""
    dialect = SparkDialect()
    with duckdb.connect() as db:
        db.execute("CREATE TABLE ids (s VARCHAR)")
        db.executemany("INSERT INTO ids VALUES (?)", [[i] for i in IDS])
        rows = db.sql(f"SELECT s, {dialect.uid_of('s')}, {dialect.position('s', '/')} FROM ids").fetchall()
    assert {s: (uid, at) for s, uid, at in rows} == {s: (_uid(s), s.find("/") + 1) for s in IDS}


def test_the_dialects_own_spellings() -> None:
    dialect = SparkDialect()
    assert dialect.traj_of("s") == "CASE WHEN instr(s, '/') = 0 THEN '' ELSE substring_index(s, '/', -1) END"
    assert dialect.starts_with("e", "TRAIN_") == "startswith(e, 'TRAIN_')"
    assert dialect.last_ignore_nulls("x") == "last(x, true)"
    constants = dialect.constants()
    assert (constants["top_schema"], constants["payload_schema"]) == (TOP_SCHEMA, PAYLOAD_SCHEMA)
    assert "prompt_uid:string" in TOP_SCHEMA and "turns:array<struct<turn_index:bigint" in PAYLOAD_SCHEMA


def test_a_literal_escapes_quotes_and_backslashes_as_spark_reads_them() -> None:
    assert _lit("it's") == "'it\\'s'"
    assert _lit("C:\\run") == "'C:\\\\run'"
    assert _lit("") == "''"


def _file(file_id: int, kind: FileKind = FileKind.SAMPLE) -> SourceFile:
    return SourceFile(file_id, f"/runs/{file_id}.csv", kind, "/runs")


def test_the_torn_filters_leave_out_each_torn_line_and_nothing_else() -> None:
    samples = [_file(1), _file(2), _file(3)]
    torn = {
        1: TornTail(1, "j,sample,u/0,RUNNING,17,from=A", ("j", "sample", "u/0", "RUNNING", "17", "from=A")),
        2: TornTail(2, "j,sam", ("j", "sam")),  # cut inside its fields: nothing of it was read as a row
    }
    assert _csv_torn_filter(samples, torn) == (
        "NOT ((f.file_id = 1 AND r.sample_id = 'u/0' AND r.ts = '17' AND r.content = 'from=A'))"
    )
    assert _csv_torn_filter(samples, {}) == "TRUE"
    lines = [_file(4, FileKind.TRAJECTORY), _file(5, FileKind.TRAJECTORY)]
    assert (
        _jsonl_torn_filter(lines, {5: TornTail(5, '{"a": \'x', ())})
        == "NOT ((f.file_id = 5 AND t.value = '{\"a\": \\'x'))"
    )
    assert _jsonl_torn_filter(lines, {}) == "TRUE"


class _Session:
    """What SparkBackend calls on a SparkSession, recorded."""

    def __init__(self, rows: list[tuple[Any, ...]] | None = None) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.rows = rows or []
        self.catalog = self
        self.read = self
        self.write = self

    def sql(self, text: str) -> _Session:
        self.calls.append(("sql", text))
        return self

    def collect(self) -> list[tuple[Any, ...]]:
        return self.rows

    def __getattr__(self, name: str) -> Any:
        def record(*args: Any, **kwargs: Any) -> _Session:
            self.calls.append((name, *args))
            return self

        return record


def _backend(session: _Session) -> SparkBackend:
    backend = SparkBackend.__new__(SparkBackend)  # no SparkSession: the stand-in takes its place
    backend.dialect = SparkDialect()
    backend.spark = session  # type: ignore[assignment]
    backend._work = None
    backend._inputs_files = ()
    backend._salvaged = {}
    backend._unpacked = {}
    return backend


def test_a_table_of_the_pipeline_becomes_a_cached_view() -> None:
    session = _Session(rows=[("a", [1, [2, 3]])])
    backend = _backend(session)
    assert backend.run("-- the steps\nCREATE TEMP TABLE steps AS SELECT 1") == [("a", [1, [2, 3]])]
    backend.run("SELECT * FROM steps")
    assert session.calls == [("sql", "CACHE TABLE steps AS SELECT 1"), ("sql", "SELECT * FROM steps")]


def test_drop_close_and_export_ask_the_session(tmp_path: Path) -> None:
    session = _Session()
    backend = _backend(session)
    backend.drop_table("steps")
    backend.export_parquet("steps", str(tmp_path / "steps.parquet"))
    backend._work = str(tmp_path / "work")
    Path(backend._work).mkdir()
    backend.close()
    assert session.calls == [
        ("sql", "UNCACHE TABLE IF EXISTS steps"),
        ("dropTempView", "steps"),
        ("table", "steps"),
        ("mode", "overwrite"),
        ("parquet", str(tmp_path / "steps.parquet")),
        ("clearCache",),
        ("stop",),
    ]
    assert not (tmp_path / "work").exists(), "the clean copies of damaged files go with the session"


def test_the_files_table_names_each_file_by_the_uri_spark_reads(tmp_path: Path) -> None:
    session = _Session()
    files = (
        SourceFile(1, str(tmp_path / "a.csv"), FileKind.SAMPLE, str(tmp_path), "node-a", 12),
        SourceFile(2, str(tmp_path / "t.jsonl"), FileKind.TRAJECTORY, str(tmp_path)),
    )
    _backend(session)._files(files)
    ((name, rows, schema), (view, table)) = session.calls
    assert (name, view, table) == ("createDataFrame", "createOrReplaceTempView", "files")
    assert rows == [
        (1, str(tmp_path / "a.csv"), f"file://{tmp_path}/a.csv", FileKind.SAMPLE, str(tmp_path), "node-a", 12),
        (2, str(tmp_path / "t.jsonl"), f"file://{tmp_path}/t.jsonl", FileKind.TRAJECTORY, str(tmp_path), None, None),
    ]
    assert schema.split(", ")[:3] == ["file_id INT", "path STRING", "uri STRING"]


@pytest.mark.parametrize("sql", ["CREATE VIEW v AS SELECT 1", "SELECT 'CREATE TABLE x AS'"])
def test_other_statements_go_to_spark_as_they_are(sql: str) -> None:
    session = _Session()
    _backend(session).run(sql)
    assert session.calls == [("sql", sql)]
