"""DuckDB's plans for the large joins: the hash table is built on the small side, whatever DuckDB guesses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trace_instrument.traces.backend import sql_text
from trace_instrument.traces.discover import discover
from trace_instrument.traces.duckdb_backend import DuckDBBackend

# DuckDB guesses 2,688 rows for a CSV scan it has not read; a long run has more distinct contents
DISTINCT_CONTENTS = 5000
ROWS_PER_CONTENT = 2


def _write_run(root: Path) -> None:
    """One sample-flow CSV file: each tool content (its own step and tool name) on two rows."""
    sample = root / "sample"
    sample.mkdir(parents=True)
    lines = []
    for n in range(DISTINCT_CONTENTS):
        content = f"from=Tool|to=ToolAgentLoop|stage=AGENT_TOOL|global_step={n}|detail=tool_executed_name=t{n}"
        for copy in range(ROWS_PER_CONTENT):
            lines.append(f"job-1,flow,uid{n}/0,ok,{1000 + n * 10 + copy},{content}\n")
    (sample / "node-0-pid1.csv").write_text("".join(lines))


def _tables(node: dict[str, Any]) -> set[str]:
    """The tables and table functions scanned anywhere below a plan node."""
    info = node.get("extra_info", {})
    found = {str(info["Table"]).rsplit(".", 1)[-1]} if "Table" in info else set()
    if "Function" in info:
        found.add(str(info["Function"]).lower())
    for child in node.get("children", []):
        found |= _tables(child)
    return found


def _hash_joins(node: dict[str, Any]) -> list[dict[str, Any]]:
    own = [node] if node.get("name") == "HASH_JOIN" else []
    return own + [join for child in node.get("children", []) for join in _hash_joins(child)]


def test_the_events_join_builds_its_hash_table_on_the_contents(tmp_path: Path) -> None:
    _write_run(tmp_path / "run")
    backend = DuckDBBackend(None, tmp_path / "spill")
    try:
        backend.load(discover([tmp_path / "run"]))
        counts = backend.run(
            "SELECT count(*), count(DISTINCT cid), count(DISTINCT step) FROM events_all WHERE code = 9"
        )
        assert counts == [(DISTINCT_CONTENTS * ROWS_PER_CONTENT, DISTINCT_CONTENTS, DISTINCT_CONTENTS)]
        rendered = backend.dialect.render(sql_text("events", "duckdb"), {})
        query = rendered[rendered.index("CREATE TABLE events_all AS") + len("CREATE TABLE events_all AS") :]
        with backend._joins_as_written():
            plan = json.loads(backend.run("EXPLAIN (FORMAT json) " + query)[0][1])
    finally:
        backend.close()
    (content_join,) = [j for roots in plan for j in _hash_joins(roots) if "content" in str(j["extra_info"])]
    probe, build = content_join["children"]
    assert _tables(build) == {"contents"}
    assert "read_csv" in _tables(probe)


def test_the_whole_run_views_read_their_tables_unfiltered(tiny_run: Path, tmp_path: Path) -> None:
    """With nothing selected every view is its table as it is (an always-true filter still cost a
    subquery per scan), and shows what the filtered views show for a run of every file."""
    from trace_instrument.traces.backend import whole_views

    inputs = discover([tiny_run])
    backend = DuckDBBackend(None, tmp_path / "spill")
    try:
        backend.load(inputs)
        views = whole_views()
        assert sql_text("views").count("CREATE OR REPLACE TEMP VIEW") == len(views) == 13
        backend.select_steps(None)
        for view, _ in views:
            plan = json.loads(backend.run(f"EXPLAIN (FORMAT json) SELECT count(*) FROM {view}")[0][1])
            assert not any(_hash_joins(node) for node in plan), view
        whole = {view: sorted(map(repr, backend.run(f"SELECT * FROM {view}"))) for view, _ in views}
        # the tiny run has no placeholder rows and no sglang times
        empty = {"placeholder_events", "sglang_values", "sglang_buckets"}
        assert all(rows for view, rows in whole.items() if view not in empty)
        backend.select_run(tuple(f.file_id for f in inputs.files))
        backend.select_steps(None)
        assert {view: sorted(map(repr, backend.run(f"SELECT * FROM {view}"))) for view, _ in views} == whole
    finally:
        backend.close()
