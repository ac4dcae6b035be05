"""--anchors DIR: the documented example instruments a custom agent loop."""

from __future__ import annotations

import compileall
import json
import shutil

from support import TESTS, tree_bytes

from trace_instrument.engine.apply import apply
from trace_instrument.engine.check import check
from trace_instrument.engine.remove import remove
from trace_instrument.model import Reason, Selection, Status
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


# -- an own point copied from a shipped one -------------------------------------------------------

SHIPPED_SPEC = TESTS.parent / "anchors" / "ray_trainer.yaml"
COPY = """\
file: verl/trainer/ppo/ray_trainer.py
points:
  - id: mine.traj-uid-repeat
    imports: ["import numpy as np"]
    facility: sample_flow
    title: my copy of flow.v0.traj-uid-repeat
    scope: {scope}
    after: |
      {anchor}
    template: points/sample_flow/v0_traj_uid_repeat.py
"""
REPEAT = "gen_batch_output = gen_batch.repeat(repeat_times=rollout_n, interleave=True)"


def _copy(tmp_path, scope: str, anchor: str = REPEAT):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "mine.yaml").write_text(COPY.format(scope=scope, anchor=anchor), encoding="utf-8")
    return folder


def _shipped_line(point_id: str) -> int:
    """The line of `- id: ID` in the shipped spec (where the loader says the point is declared)."""
    lines = SHIPPED_SPEC.read_text(encoding="utf-8").splitlines()
    return next(n for n, line in enumerate(lines, 1) if line.strip() == f"- id: {point_id}")


def test_a_copy_in_the_same_scope_names_the_shipped_point_not_a_missing_marker(tmp_path, verl_090):
    """The copy's code makes the very tracing calls of the point it was copied from, in the same
    scope: the load says so, with both places and the way out (an override), not 'declare a marker'."""
    folder = _copy(tmp_path, "RayPPOTrainer.fit")
    output = _cli("check", "--anchors", str(folder), str(verl_090), code=2)
    shipped = f"anchors/ray_trainer.yaml:{_shipped_line('flow.v0.traj-uid-repeat')}"
    problems = [line.strip() for line in output.splitlines() if "nothing recognises" in line]
    mine = next(p for p in problems if p.startswith(f"{folder / 'mine.yaml'}:3 (point mine.traj-uid-repeat)"))
    assert f"flow.v0.traj-uid-repeat ({shipped}, scope RayPPOTrainer.fit) makes too" in mine
    assert "`overrides:` entry" in mine and "a tracing call of its own" in mine
    theirs = next(p for p in problems if p.startswith(f"{shipped} (point flow.v0.traj-uid-repeat)"))
    assert f"mine.traj-uid-repeat ({folder / 'mine.yaml'}:3, scope RayPPOTrainer.fit)" in theirs
    assert len(problems) == 2, problems  # flow.v0.uid-generated shares a stage, not the copy's calls


def test_a_copy_in_the_class_holding_the_method_is_refused_alike(tmp_path):
    """A class scope holds its methods: the copy would be recognised in the shipped point's code."""
    from trace_instrument.spec import SpecError

    try:
        load_catalog([_copy(tmp_path, "RayPPOTrainer")])
    except SpecError as exc:
        problems = [str(p) for p in exc.problems]
    else:
        raise AssertionError("the copy loaded")
    mine = next(p for p in problems if "(point mine.traj-uid-repeat)" in p)
    assert mine.startswith(f"{tmp_path / 'mine' / 'mine.yaml'}:3 (point mine.traj-uid-repeat): nothing recognises")
    line = _shipped_line("flow.v0.traj-uid-repeat")
    assert f"flow.v0.traj-uid-repeat (anchors/ray_trainer.yaml:{line}, scope RayPPOTrainer.fit) makes too" in mine
    assert "declare a 'marker'" not in mine


def test_a_copy_under_the_same_id_is_a_duplicate_id_only(tmp_path):
    folder = _copy(tmp_path, "RayPPOTrainer.fit")
    text = (folder / "mine.yaml").read_text(encoding="utf-8")
    (folder / "mine.yaml").write_text(text.replace("mine.traj-uid-repeat", "flow.v0.traj-uid-repeat"), "utf-8")
    from trace_instrument.spec import SpecError

    try:
        load_catalog([folder])
    except SpecError as exc:
        problems = [str(p) for p in exc.problems]
    else:
        raise AssertionError("the copy loaded")
    assert len(problems) == 1 and "duplicate id 'flow.v0.traj-uid-repeat'" in problems[0], problems


def test_a_copy_in_another_scope_loads_and_check_names_the_locals_it_lacks(tmp_path, verl_090):
    """In another scope the copy is a point of its own; the locals its template reads (written for
    RayPPOTrainer.fit) are not there, and check says which."""
    folder = _copy(tmp_path, "RayPPOTrainer._validate", "test_batch = test_batch.union(test_output_gen_batch)")
    result = check(verl_090, load_catalog([folder]), Selection(only=frozenset({"mine.traj-uid-repeat"})))
    (mine,) = result.points
    assert (mine.status, mine.reason) == (Status.REFUSED, Reason.UNBOUND_NAME), mine.message
    assert {"rollout_n", "gen_batch_output"} <= {issue.name for issue in mine.names}
