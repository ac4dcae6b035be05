"""Every JSON output validates against the JSON Schema the package ships for it.

The outputs come from real runs on verl 0.9.0 in states that exercise every
part of the shapes: a pristine tree, an instrumented one, one with broken,
moved and drifted points, an internal error with its traceback, and errors.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from trace_instrument.cli import app
from trace_instrument.engine.apply import apply
from trace_instrument.engine.check import check
from trace_instrument.model import Catalog, FileProblemKind
from trace_instrument.render import jsonout
from trace_instrument.spec import load_catalog

RAY_TRAINER = "verl/trainer/ppo/ray_trainer.py"


def _json(*args: object) -> dict:
    outcome = CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)
    return json.loads(outcome.output)


def _valid(name: str, body: dict) -> None:
    schema = jsonout.schema(name)
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(body, schema, cls=jsonschema.Draft202012Validator)


def _trouble(root: Path) -> None:
    """Broken points (an import deleted), a drifted one (whose import stays), and a runtime file missing."""
    trainer = root / RAY_TRAINER
    text = trainer.read_text(encoding="utf-8")
    lines = text.splitlines(True)
    text = "".join(
        "from verl.utils.tracing import trace_flow\n" if line.startswith("from verl.utils.tracing import") else line
        for line in lines
    )
    trainer.write_text(text.replace("detail='actor_parameters_updated'", "detail='x'"))
    (root / "verl/utils/tracing/trajectory_store.py").unlink()


@pytest.mark.parametrize("state", ["pristine", "instrumented", "trouble"])
def test_every_command_validates(checkout_090, state):
    if state != "pristine":
        apply_body = _json("apply", "--format", "json", checkout_090)
        _valid("run", apply_body)
        assert apply_body["command"] == "apply" and apply_body["summary"]["by_status"] == {"applied": 94}
    if state == "trouble":
        _trouble(checkout_090)
    check_body = _json("check", "--format", "json", checkout_090)
    _valid("check", check_body)
    _valid("verify", _json("verify", "--format", "json", checkout_090))
    _valid("report", _json("report", "--format", "json", checkout_090))
    _valid("run", _json("apply", "--format", "json", "--dry-run", checkout_090))
    _valid("run", _json("remove", "--format", "json", "--dry-run", checkout_090))
    if state == "trouble":
        statuses = {p["status"] for p in check_body["points"]}
        assert {"broken", "drifted", "missing"} <= statuses
        assert any(p["names"] for p in check_body["points"] if p["status"] == "broken")


def test_points_and_errors_validate(tmp_path):
    _valid("points", _json("points", "--format", "json"))
    for command, shape in (("check", "check"), ("apply", "run"), ("remove", "run"), ("verify", "verify")):
        body = _json(command, "--format", "json", tmp_path / "not-a-checkout")
        _valid(shape, body)
        assert body["error"]["kind"] == "not-a-checkout" and body["exit_code"] == 2


def test_an_internal_error_keeps_its_traceback(checkout_090, catalog, monkeypatch):
    """A bug of the tool on one file is that file's error, with the traceback, in JSON and with --debug."""
    from trace_instrument.engine import apply as apply_module

    def explode(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a bug in the tool")

    # the edit step of one operation fails for every file (the edge where engine meets LibCST)
    monkeypatch.setattr(apply_module, "edit_module", explode)
    monkeypatch.setenv("TRACE_INSTRUMENT_WORKERS", "1")
    result = apply(checkout_090, catalog, write=False)
    errors = [f.error for f in result.files if f.error is not None]
    assert errors and {e.kind for e in errors} == {FileProblemKind.INTERNAL}
    assert all("RuntimeError: a bug in the tool" in e.traceback and "Traceback" in e.traceback for e in errors)
    body = jsonout.run("apply", result, dry_run=True)
    _valid("run", body)
    assert any("a bug in the tool" in (f["error"] or {}).get("traceback", "") for f in body["files"])
    debug = CliRunner().invoke(app, ["--debug", "apply", "--dry-run", str(checkout_090)])
    plain = CliRunner().invoke(app, ["apply", "--dry-run", str(checkout_090)])
    assert debug.exit_code == plain.exit_code == 2
    assert "Traceback (most recent call last)" in debug.output
    assert "Traceback (most recent call last)" not in plain.output
    assert check(checkout_090, catalog).error is None, "check does not edit: unaffected"


def _two_failing_edits(tmp_path: Path) -> tuple[Path, Catalog]:
    """A synthetic checkout holding the fixture apply/two-edits-both-fail, and its point alone."""
    case = Path(__file__).parent / "fixtures" / "apply" / "two-edits-both-fail"
    spec = tmp_path / "spec"
    spec.mkdir()
    shutil.copy(case / "spec.yaml", spec / "spec.yaml")
    root = tmp_path / "checkout"
    (root / "verl").mkdir(parents=True)
    shutil.copy(case / "before.py", root / "verl" / "target.py")
    return root, load_catalog([spec], shipped=False)


def test_each_failing_edit_is_in_the_json(tmp_path):
    """A point whose two edits fail for two reasons lists both, each with its own status, line and
    candidates, in check's and apply's JSON; the point's own status is the first edit's."""
    root, points = _two_failing_edits(tmp_path)
    check_body = jsonout.check(check(root, points))
    apply_body = jsonout.run("apply", apply(root, points, write=False), dry_run=True)
    _valid("check", check_body)
    _valid("run", apply_body)
    for body in (check_body, apply_body):
        (grow,) = [p for p in body["points"] if p["id"] == "t.grow"]
        assert grow["status"] == "anchor-lost"
        edits = [(e["index"], e["of"], e["status"], e["reason"], e["line"]) for e in grow["edits"]]
        # edit 1's anchor is reported at its scope's line (the class, line 1); edit 2 matches at lines 3 and 7
        assert edits == [(1, 2, "anchor-lost", "anchor-not-found", 1), (2, 2, "ambiguous", "several-matches", 3)]
        assert [c["line"] for c in grow["edits"][1]["candidates"]] == [3, 7]
        assert "Loop.generate" in grow["edits"][1]["message"] and "Loop.call_tools" in grow["edits"][1]["message"]
        assert all(e["template"].endswith("spec.yaml:" + str(line)) for e, line in zip(grow["edits"], (11, 16)))
