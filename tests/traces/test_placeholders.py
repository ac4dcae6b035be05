"""Rows under a placeholder sample id (the runtime had no uid) are counted, warned about, and never a sample.

The extra rows are written by hand: their count and lines are known from the construction, and every
per-sample figure must equal the pristine run's.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from trace_instrument.traces.analyze import Options, analyze
from trace_instrument.traces.backend import PLACEHOLDER_UIDS

TOOL = "from=ToolAgentLoop|to=Tool|stage=AGENT_TOOL|detail=tool_executed_name=search"
TEMPLATES = Path(__file__).parents[2] / "templates" / "points"


def _append(path: Path, rows: list[str]) -> int:
    """Append CRLF rows; returns the 1-based line of the first one."""
    before = len(path.read_bytes().splitlines())
    with open(path, "ab") as f:
        f.write("".join(row + "\r\n" for row in rows).encode())
    return before + 1


@pytest.fixture
def with_placeholders(tiny_run: Path, tmp_path: Path) -> tuple[Path, list[str]]:
    copy = shutil.copytree(tiny_run, tmp_path / "trace")
    trainer, worker = sorted((copy / "sample").glob("node-a-*.csv")), sorted((copy / "sample").glob("node-b-*.csv"))
    first = _append(worker[0], [f"job-tiny,sample,unknown/sample,RUNNING,1787215021300,{TOOL}"])
    second = _append(trainer[0], [f"job-tiny,sample,None/0,RUNNING,1787215021320,{TOOL}"])
    _append(trainer[0], [f"job-tiny,sample,unknown/sample,RUNNING,1787215021340,{TOOL}"])
    return copy, [f"{worker[0]}:{first}", f"{trainer[0]}:{second}"]


def test_placeholder_rows_are_counted_and_joined_to_nothing(with_placeholders, tiny_run: Path) -> None:
    trace, first_lines = with_placeholders
    result = analyze([trace], Options(cache=False))
    pristine = analyze([tiny_run], Options(cache=False))
    assert result.header.unattributable_rows == 3
    assert result.header.rows_read == pristine.header.rows_read + 3
    skipped = [s for s in result.header.skipped if s.count == 3]
    assert [e.split(" ")[0] for e in skipped[0].examples[:2]] == first_lines
    # no invented sample: the per-sample views are exactly the pristine run's
    assert result.latencies == pristine.latencies
    assert result.funnel == pristine.funnel
    assert result.slowest == pristine.slowest
    assert result.in_flight == pristine.in_flight
    assert any("placeholder sample id" in note for note in result.notes)
    assert not any("placeholder" in note for note in pristine.notes)


def test_every_placeholder_the_templates_write_is_known() -> None:
    """The uid defaults the templates fall back to (``... else 'unknown'``) are all in PLACEHOLDER_UIDS."""
    defaults: set[str] = set()
    for template in TEMPLATES.rglob("*.py"):
        text = template.read_text()
        defaults |= set(
            re.findall(r"uid=[^\n]*?(?:else|get\([^,]+,|getattr\([^,]+,[^,]+,)\s*['\"]([^'\"]*)['\"]", text)
        )
    assert defaults, "the pattern found no defaults: the templates changed shape"
    assert defaults <= set(PLACEHOLDER_UIDS), defaults - set(PLACEHOLDER_UIDS)


# ids around the edges of "the part before the last slash is a placeholder"
EDGE_IDS = (
    "unknown/sample",
    "unknown/3",
    "unknown/",
    "unknown/a/b",
    "unknownx/1",
    "x/unknown/sample",
    "unknown",
    "None/sample",
    "nan/0",
    "N/A/sample",
    "N/A",
    "N/A/b/c",
    "/sample",
    "/",
    "//x",
    "sample",
    "",
    "a/b",
)


def _has_placeholder_uid(sample_id: str) -> bool:
    """The definition, by hand: an id with a slash whose part before the last slash is a placeholder."""
    return "/" in sample_id and sample_id.rpartition("/")[0] in PLACEHOLDER_UIDS


def test_the_placeholder_test_is_the_definition_on_duckdb() -> None:
    import duckdb

    from trace_instrument.traces.duckdb_backend import DuckDBDialect

    predicate = DuckDBDialect().is_placeholder("sample_id")
    con = duckdb.connect()
    con.execute("CREATE TABLE ids (sample_id VARCHAR)")
    con.executemany("INSERT INTO ids VALUES (?)", [(i,) for i in EDGE_IDS])
    found = {sid: bool(flag) for sid, flag in con.execute(f"SELECT sample_id, {predicate} FROM ids").fetchall()}
    assert found == {sid: _has_placeholder_uid(sid) for sid in EDGE_IDS}
    # unknown/sample, unknown/3, unknown/, None/sample, nan/0, N/A/sample, /sample and /
    assert sum(found.values()) == 8


# ids that split at a slash in odd places: characters beyond ASCII, combining marks, line ends a
# regular expression's `.` or `$` would stop at (a quoted CSV field may hold them)
ODD_IDS = (
    *EDGE_IDS,
    "é/ü/ß",
    "a\u0301/b\u0301",
    "🙂/x",
    "a//",
    "///",
    "a b/c d",
    "a\nb/0",
    "q\r/1",
    "x/y\n",
    "p\u2028q/2",
    "r\u0085/s",
    "\n/",
)


def id_parts(sample_id: str) -> tuple[str, str]:
    """The definition: the uid before the id's last slash, the trajectory part after it ('' without one)."""
    head, slash, tail = sample_id.rpartition("/")
    return (head, tail) if slash else ("", "")


def test_the_uid_and_trajectory_parts_are_the_definition_on_duckdb() -> None:
    """DuckDB splits an id at its last slash with string functions (test_spark.py holds Spark's)."""
    import duckdb

    from trace_instrument.traces.duckdb_backend import DuckDBDialect

    dialect = DuckDBDialect()
    con = duckdb.connect()
    con.execute("CREATE TABLE ids (sample_id VARCHAR)")
    con.executemany("INSERT INTO ids VALUES (?)", [(i,) for i in ODD_IDS])
    rows = con.execute(
        f"SELECT sample_id, {dialect.uid_of('sample_id')}, {dialect.traj_of('sample_id')} FROM ids"
    ).fetchall()
    assert len(rows) == len(ODD_IDS)
    for sample_id, uid, traj in rows:
        assert (uid, traj) == id_parts(sample_id), repr(sample_id)
