"""The trace files' format has one definition, the runtime's templates/runtime/formats.py: the
runtime writes by it, the points' code names its events, and the reader (its events, its SQL)
reads by it."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import duckdb
import pytest

from trace_instrument import formats
from trace_instrument.traces.backend import Dialect, sql_text
from trace_instrument.traces.duckdb_backend import DuckDBDialect
from trace_instrument.traces.events import EVENT_NAMES, Event

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = ROOT / "templates" / "runtime"
POINTS = ROOT / "templates" / "points"
SQL = ROOT / "trace_instrument" / "traces" / "sql"
# The events' names as the reader has always shown and exported them (views, Parquet, the page)
SHOWN_NAMES = {
    1: "DATA_PREPROCESS:uid_generated",
    2: "DATA_PREPROCESS:traj_uid_generated_by_repeat",
    3: "DATA_DISPATCH:dispatched_to_agent_loop_manager",
    4: "DATA_DISPATCH:dispatched_to_agent_loop_worker",
    5: "AGENT_LOOP:agent_task_started",
    6: "AGENT_LOOP:session_started",
    7: "LLM_GENERATE:sending_generate_request",
    8: "LLM_GENERATE:received_generate_response",
    9: "AGENT_TOOL:tool_executed",
    10: "AGENT_LOOP:agent_run_completed",
    11: "ROLLOUT_REWARD:reward_score_computed",
    12: "TRAIN_SAMPLE:sampled_from_replay_buffer",
    13: "TRAIN_REWARD:reward_extracted",
    14: "TRAIN_LOGPROB:old_log_prob_computed",
    15: "TRAIN_REF_LOGPROB:ref_log_prob_computed",
    16: "TRAIN_ADVANTAGE:advantage_computed",
    17: "TRAIN_UPDATE:actor_parameters_updated",
    18: "FILTER_TRAJECTORIES",
    19: "SYNC_PARAMS:weights_synced",
}


def _runtime_package():
    spec = importlib.util.spec_from_file_location(
        "rt_format", RUNTIME / "__init__.py", submodule_search_locations=[str(RUNTIME)]
    )
    assert spec is not None and spec.loader is not None
    package = importlib.util.module_from_spec(spec)
    sys.modules["rt_format"] = package
    try:
        spec.loader.exec_module(package)
        return {name: module for name, module in sys.modules.items() if name.startswith("rt_format.")}
    finally:
        for name in [n for n in sys.modules if n == "rt_format" or n.startswith("rt_format.")]:
            del sys.modules[name]


def _event_of(pairs: list[tuple[str, str]]) -> list[int | None]:
    """The reader's event code of each (stage, detail), computed by the SQL it renders."""
    con = duckdb.connect()
    con.execute("CREATE TABLE t (i INTEGER, stage VARCHAR, detail VARCHAR)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?)", [(i, s, d) for i, (s, d) in enumerate(pairs)])
    rows = con.execute(f"SELECT {Dialect().event_of('stage', 'detail')} FROM t ORDER BY i").fetchall()
    con.close()
    return [row[0] for row in rows]


def _written_events() -> list[tuple[str, str, str]]:
    """(template, stage, the detail's text up to its first value) of every trace_flow call in the points' code."""
    found = []
    for path in sorted(POINTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "trace_flow"):
                continue
            keywords = {k.arg: k.value for k in node.keywords}
            stage, detail = keywords["stage"], keywords.get("detail")
            assert isinstance(stage, ast.Constant), f"{path.name}: the stage is a literal"
            if detail is None:
                text = ""
            elif isinstance(detail, ast.Constant):
                text = detail.value
            else:
                assert isinstance(detail, ast.JoinedStr) and isinstance(detail.values[0], ast.Constant), path.name
                text = detail.values[0].value
            found.append((path.relative_to(POINTS).as_posix(), stage.value, text))
    return found


def test_the_definition_is_the_runtimes_file_and_holds_literals_only():
    """The tool executes the file on its own: no import, and every statement a literal assignment."""
    assert formats.SOURCE.resolve() == (RUNTIME / "formats.py").resolve()
    tree = ast.parse(formats.SOURCE.read_text(encoding="utf-8"))
    for statement in tree.body:
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
            continue  # the docstring
        assert isinstance(statement, ast.Assign), ast.unparse(statement)
        ast.literal_eval(statement.value)


def test_the_runtime_writes_by_the_definition():
    modules = _runtime_package()
    assert modules["rt_format.trace"]._COMPLETE_STAGES == frozenset(formats.COMPLETE_STAGES)
    assert modules["rt_format.trajectory_tracker"].AGENT_STOP_REASONS == frozenset(formats.AGENT_STOP_REASONS)
    store = modules["rt_format.trajectory_store"]
    assert (*store._INDEX_KEYS, "raw_message") == formats.TRAJECTORY_LINE_KEYS
    assert store._KEPT_TURN_FIELDS == formats.TURN_KEYS


def test_the_readers_events_are_the_formats_in_pipeline_order():
    assert [e.name for e in Event] == list(formats.EVENTS)
    assert [int(e) for e in Event] == list(range(1, len(formats.EVENTS) + 1))
    assert EVENT_NAMES == SHOWN_NAMES


def test_every_event_the_points_write_is_one_the_reader_tells():
    written = _written_events()
    assert len(written) >= 20
    codes = _event_of([(stage, text) for _, stage, text in written])
    for (where, stage, text), code in zip(written, codes, strict=True):
        assert code is not None, f"{where}: {stage}:{text} is no event of the format"
        event_stage, shown_detail, _ = formats.EVENTS[Event(code).name]
        assert (event_stage, text.startswith(shown_detail)) == (stage, True), where
    # every event is written by some point but FILTER_TRAJECTORIES (verl writes no such row yet)
    assert {Event(c).name for c in codes} == set(formats.EVENTS) - {"FILTER_TRAJECTORIES"}


@pytest.mark.parametrize(
    ("stage", "detail", "event"),
    [
        ("AGENT_LOOP", "session_started", "SESSION_STARTED"),
        ("AGENT_LOOP", "session_started_session_id=3_rollout_n=4", "SESSION_STARTED"),
        ("AGENT_LOOP", "agent_task_started_late", None),  # as written, no more
        ("AGENT_TOOL", "tool_executed_name=search", "TOOL_EXECUTED"),
        ("AGENT_TOOL", "tool_executed", None),  # a tool row names its tool
        ("TRAIN_UPDATE", "anything at all", "TRAIN_UPDATE"),
        ("SYNC_PARAMS", "", "SYNC_PARAMS"),
        ("DATA_PREPROCESS", "", None),
        ("data_preprocess", "uid_generated", None),
        ("LLM_GENERATE", "it's quoted", None),
    ],
)
def test_a_row_is_told_as_the_format_says(stage, detail, event):
    (code,) = _event_of([(stage, detail)])
    assert (Event(code).name if code is not None else None) == event


def test_no_sql_file_spells_a_stage_or_a_detail():
    """The SQL names events by macro ({{event(NAME)}}, {{event_of(stage, detail)}}): the strings are the format's."""
    names = {text for stage, detail, written in formats.EVENTS.values() for text in (stage, detail, written)}
    names = {n.rstrip("*") for n in names} - {""}
    for path in sorted(SQL.rglob("*.sql")):
        literals = set(_sql_literals(path.read_text(encoding="utf-8")))
        assert not literals & names, f"{path.relative_to(SQL)} spells {sorted(literals & names)}"
    assert "'uid_generated'" in DuckDBDialect().render(sql_text("events"), {}), "the names are rendered in"


def _sql_literals(sql: str) -> list[str]:
    code = "\n".join(line.split("--")[0] for line in sql.splitlines())
    return [part for index, part in enumerate(code.split("'")) if index % 2 == 1]
