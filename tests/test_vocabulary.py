"""One definition of each vocabulary: the copies the runtime must keep (it stands alone inside
verl) are read from its source and compared with the tool's definitions in model.py."""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import json
import sys
from pathlib import Path

from trace_instrument.formats import RAW_MESSAGE_KEYS, TRAJECTORY_LINE_KEYS, TURN_KEYS
from trace_instrument.model import (
    RUNTIME_EXPORTS,
    TRACING_NAMES,
    Confidence,
    PortStatus,
    Reason,
    RunErrorKind,
    Status,
)
from trace_instrument.render.jsonout import schema

RUNTIME = Path(__file__).resolve().parents[1] / "templates" / "runtime"


def _dunder_all(path: Path) -> list[str]:
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets):
            return [ast.literal_eval(element) for element in node.value.elts]  # type: ignore[attr-defined]
    raise AssertionError(f"{path} has no __all__")


def test_the_runtime_exports_exactly_the_tracing_names_and_the_generic_ones():
    exported = _dunder_all(RUNTIME / "__init__.py")
    assert len(exported) == len(set(exported))
    assert set(exported) == RUNTIME_EXPORTS
    assert TRACING_NAMES < RUNTIME_EXPORTS


def test_check_looks_for_every_tracing_name_in_files_outside_the_catalog(tmp_path):
    """A call of each name the runtime exports for tracing, in a verl file no point edits, is
    reported by check as unexpected, at its line: the names it looks for are the vocabulary's."""
    from trace_instrument.engine.check import check
    from trace_instrument.model import Status
    from trace_instrument.spec import load_catalog

    names = sorted(TRACING_NAMES)
    (tmp_path / "verl").mkdir()
    (tmp_path / "verl" / "fork_helpers.py").write_text("".join(f"{n}()\n" for n in names), encoding="utf-8")
    (found,) = [f for f in check(tmp_path, load_catalog()).files if f.path == "verl/fork_helpers.py"]
    reported = [(p.status, p.line) for p in found.points]
    assert reported == [(Status.UNEXPECTED, line) for line in range(1, len(names) + 1)]


def test_a_trajectory_line_the_runtime_writes_has_exactly_the_specified_keys(tmp_path, monkeypatch):
    """The runtime, loaded from its templates as a package of its own, writes one line."""
    monkeypatch.setenv("VERL_TRACE_DISCOVERY_DIR", str(tmp_path / "discovery"))
    (tmp_path / "discovery").mkdir()
    spec = importlib.util.spec_from_file_location(
        "rt_vocab", RUNTIME / "__init__.py", submodule_search_locations=[str(RUNTIME)]
    )
    assert spec is not None and spec.loader is not None
    runtime = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "rt_vocab", runtime)
    spec.loader.exec_module(runtime)
    record = runtime.TurnRecord([1, 2, 3])
    record.fill_sglang_response("done", [4, 5], "stop", {"e2e_latency": 0.5})
    record.stamp_end()
    store = runtime.TrajectoryStore(str(tmp_path), 1)
    store.write(runtime.Trajectory(request_id="0", prompt_uid="u1", sample_index=0, turns=[record.turn]))
    store.close()
    (path,) = tmp_path.glob("*.jsonl")
    assert (tmp_path / "discovery" / "verl_trace_trajectory_path.txt").exists()
    line = json.loads(path.read_text(encoding="utf-8"))
    assert tuple(line) == TRAJECTORY_LINE_KEYS
    raw = json.loads(line["raw_message"])
    assert set(raw) == set(RAW_MESSAGE_KEYS)
    assert set(raw["turns"][0]) == set(TURN_KEYS)
    fields = {f.name for f in dataclasses.fields(runtime.Turn)}
    assert set(TURN_KEYS) <= fields, "every turn key is a field of the runtime's Turn"


def test_the_json_schemas_list_every_status_and_reason():
    point = schema("check")["$defs"]["point"]["properties"]
    assert point["status"]["enum"] == [s.value for s in Status]
    assert point["reason"]["anyOf"][0]["enum"] == [r.value for r in Reason]


def test_the_port_schema_lists_every_port_status_and_confidence():
    point = schema("port")["properties"]["points"]["items"]["properties"]
    assert point["status"]["enum"] == [s.value for s in PortStatus]
    assert point["confidence"]["enum"] == [*(c.value for c in Confidence), None]


def test_the_json_schemas_list_every_run_error_kind():
    """Every error object a command's JSON carries (report's twice: its own and verify's) names the
    kinds of RunErrorKind, and where the run stopped."""

    def errors(node: object) -> list[dict[str, object]]:
        if isinstance(node, list):
            return [found for item in node for found in errors(item)]
        if not isinstance(node, dict):
            return []
        properties = node.get("properties")
        if isinstance(properties, dict) and {"kind", "message"} <= set(properties) and "traceback" not in properties:
            return [properties]
        return [found for value in node.values() for found in errors(value)]

    for name, count in (("run", 1), ("check", 1), ("verify", 1), ("report", 2), ("port", 1)):
        found = errors(schema(name))
        assert len(found) == count, name
        for properties in found:
            assert properties["kind"] == {"enum": [k.value for k in RunErrorKind]}, name
            assert set(properties) == {"kind", "message", "path", "line", "install"}, name


def test_the_trace_reader_reads_only_fields_the_trajectory_line_has():
    """analyze's engines name the fields they read (types per engine); each is a specified key."""
    import re

    from trace_instrument.traces import duckdb_backend, spark_backend

    assert set(duckdb_backend.TOP_SCHEMA) == set(TRAJECTORY_LINE_KEYS)
    assert set(duckdb_backend.PAYLOAD_SCHEMA) <= set(RAW_MESSAGE_KEYS)
    turn_fields = duckdb_backend.PAYLOAD_SCHEMA["turns"][0]  # type: ignore[index]
    assert set(turn_fields) <= set(TURN_KEYS)
    spark_fields = set(re.findall(r"(\w+):", spark_backend.TOP_SCHEMA + spark_backend.PAYLOAD_SCHEMA))
    assert spark_fields <= set(TRAJECTORY_LINE_KEYS) | set(RAW_MESSAGE_KEYS) | set(TURN_KEYS)
    assert set(turn_fields) <= spark_fields, "both engines read the same turn fields"
