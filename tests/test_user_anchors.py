"""--anchors DIR: the documented example instruments a custom agent loop."""

from __future__ import annotations

import compileall
import json
import shutil

from support import TESTS, tree_bytes

from trace_instrument.engine.apply import apply
from trace_instrument.engine.check import check
from trace_instrument.engine.remove import remove
from trace_instrument.model import Status
from trace_instrument.spec import load_catalog

EXAMPLES = TESTS.parent / "examples"
RUNTIME_TEMPLATES = TESTS.parent / "templates" / "runtime"
TARGET = "verl/experimental/agent_loop/my_agent_loop.py"


def test_the_example_instruments_a_custom_agent_loop(checkout_090):
    shutil.copy(EXAMPLES / "my_agent_loop.py", checkout_090 / TARGET)
    pristine = tree_bytes(checkout_090)
    catalog = load_catalog([EXAMPLES / "anchors"])
    result = apply(checkout_090, catalog)
    mine = [p for p in result.points if p.file == TARGET]
    assert [p.status for p in mine] == [Status.APPLIED] * 3
    text = (checkout_090 / TARGET).read_text()
    assert "from verl.utils.tracing import TurnRecord, trace_flow" in text
    assert text.index("detail='sending_generate_request'") < text.index("_rec = TurnRecord(prompt_ids)")
    assert text.index("self._traj_tracker.append_turn_record(_traj_key, _rec)") < text.index(
        "detail='received_generate_response'"
    )
    compile(text, TARGET, "exec")
    assert {p.status for p in check(checkout_090, catalog).points} == {Status.PRESENT}
    remove(checkout_090, catalog)
    assert tree_bytes(checkout_090) == pristine


def test_without_the_user_anchors_the_custom_loop_is_unexpected_tracing(checkout_090):
    shutil.copy(EXAMPLES / "my_agent_loop.py", checkout_090 / TARGET)
    apply(checkout_090, load_catalog([EXAMPLES / "anchors"]))
    result = check(checkout_090, load_catalog())
    unexpected = {p.file for p in result.points if p.status is Status.UNEXPECTED}
    assert unexpected == {TARGET}


def test_plain_remove_keeps_what_the_users_points_need(checkout_090):
    """Without the user's anchors, remove keeps the runtime package their code imports and names
    their points with the command that removes them; with the anchors, everything goes."""
    shutil.copy(EXAMPLES / "my_agent_loop.py", checkout_090 / TARGET)
    pristine = tree_bytes(checkout_090)
    user_ids = {p.id for p in load_catalog([EXAMPLES / "anchors"]).points} - {p.id for p in load_catalog().points}
    assert len(user_ids) == 3  # examples/anchors/my_agent_loop.yaml
    _cli("apply", "--anchors", str(EXAMPLES / "anchors"), str(checkout_090), code=0)
    runtime = checkout_090 / "verl/utils/tracing"
    compileall.compile_dir(str(runtime), quiet=1)
    assert list((runtime / "__pycache__").glob("*.pyc")), "byte code to leave behind, if remove forgot it"

    plain = json.loads(_cli("remove", "--format", "json", str(checkout_090), code=1))
    kept = {p["id"]: p["message"] for p in plain["points"] if p["status"] == "kept"}
    assert set(kept) == user_ids
    assert all("trace-instrument remove --anchors" in message for message in kept.values())
    assert {f["status"] for f in plain["runtime"]} == {"kept-in-use"}
    assert all(f["users"] == [TARGET] for f in plain["runtime"])
    assert sorted(p.name for p in runtime.glob("*.py")) == sorted(p.name for p in RUNTIME_TEMPLATES.glob("*.py"))
    text = (checkout_090 / TARGET).read_text()
    assert "from verl.utils.tracing import TurnRecord, trace_flow" in text
    compile(text, TARGET, "exec")
    manifest = json.loads((checkout_090 / ".trace-instrument.json").read_text())
    assert set(manifest["points"]) == user_ids, "the manifest still records what is left"

    _cli("remove", "--anchors", str(EXAMPLES / "anchors"), str(checkout_090), code=0)
    assert tree_bytes(checkout_090) == pristine
    assert not runtime.exists(), "no verl/utils/tracing/ (nor its __pycache__/) is left behind"
    assert not (checkout_090 / ".trace-instrument.json").exists()


def _cli(*args: str, code: int) -> str:
    from typer.testing import CliRunner

    from trace_instrument.cli import app

    outcome = CliRunner().invoke(app, list(args))
    assert outcome.exit_code == code, f"exit {outcome.exit_code}, expected {code}:\n{outcome.output}"
    return outcome.output
