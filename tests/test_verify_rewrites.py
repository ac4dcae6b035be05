"""Business code inside a rewrite is business code: verify's zero-intrusion proof covers it, check
does not call a point present whose anchor no longer holds, and apply and remove keep the edit.

On real verl 0.9.0, with `traj.c1.central-dump`: its template keeps the `output: ... = await
agent_loop.run(...)` statement whole (`__anchor_0__`) and the value of the `return` (`result =
__anchor_1_value__`). The fork edits either after apply. Every line asserted is found in the
file's text by the test itself.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from trace_instrument.engine.apply import apply
from trace_instrument.engine.check import check
from trace_instrument.engine.remove import remove
from trace_instrument.engine.verify import verify
from trace_instrument.model import Check, Reason, Status
from trace_instrument.render import exits
from trace_instrument.spec import load_catalog

AGENT_LOOP = "verl/experimental/agent_loop/agent_loop.py"
POINT = "traj.c1.central-dump"
KEPT_VALUE = 'self._agent_loop_postprocess(output, trajectory["validate"], **kwargs)'
KEPT_STATEMENT = "await agent_loop.run(sampling_params, **kwargs)"
# (what the fork changes, into what): one edit of the value, one of the statement kept whole
EDITS = {
    "value": (KEPT_VALUE, "self._agent_loop_postprocess(output, False, **kwargs)"),
    "statement": (KEPT_STATEMENT, "await agent_loop.run(sampling_params, retries=2, **kwargs)"),
}
RUN_COMPLETED = """\
                trace_flow(uid=kwargs.get('uid', 'unknown'), traj_uid=kwargs.get('traj_uid', 'N/A'),
                           from_module=f'AgentLoop({agent_name})', to_module='AgentLoopWorker',
                           stage='AGENT_LOOP', detail='agent_run_completed',
                           global_step=trajectory.get('step', -1))
"""


def _edit(path: Path, old: str, new: str) -> int:
    """Replace the one occurrence of `old`; the line it is on."""
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new), encoding="utf-8")
    return next(n for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if new in line)


def _intrusions(root: Path, catalog, baseline=None) -> list[tuple[str, int]]:
    result = verify(root, catalog, baseline=baseline)
    assert result.error is None, result.error
    return [(f.subject, f.line) for f in result.findings if f.check is Check.ZERO_INTRUSION and not f.ok]


@pytest.fixture
def applied(checkout_090: Path, catalog) -> Path:
    result = apply(checkout_090, catalog)
    assert exits.apply_exit(result) == exits.OK, [(p.point_id, p.message) for p in result.points if p.message]
    return checkout_090


@pytest.mark.parametrize("kind", sorted(EDITS))
def test_an_edit_of_kept_code_is_one_business_edit_at_its_line(applied: Path, verl_090: Path, catalog, kind: str):
    line = _edit(applied / AGENT_LOOP, *EDITS[kind])
    assert _intrusions(applied, catalog) == [(AGENT_LOOP, line)], "against the last apply"
    assert _intrusions(applied, catalog, verl_090) == [(AGENT_LOOP, line)], "against the pristine release"


@pytest.mark.parametrize("kind", sorted(EDITS))
def test_check_calls_the_point_drifted_at_the_edit_with_the_anchor_diff(applied: Path, catalog, kind: str):
    old, new = EDITS[kind]
    line = _edit(applied / AGENT_LOOP, old, new)
    result = check(applied, catalog)
    found = {p.point_id: p for p in result.points}
    point = found.pop(POINT)
    assert (point.status, point.reason, point.line) == (Status.DRIFTED, Reason.EDITED_BY_HAND, line)
    assert "its anchor no longer holds" in point.message
    removed = [row for row in point.diff.splitlines() if row.startswith("-") and not row.startswith("---")]
    added = [row for row in point.diff.splitlines() if row.startswith("+") and not row.startswith("+++")]
    assert len(removed) == len(added) == 1, point.diff  # the one statement, against its anchor
    assert {"statement": "retries=2, **kwargs", "value": "(output, False, **kwargs)"}[kind] in added[0]
    if kind == "value":  # flow.v0.run-completed goes `before` that return: its anchor is the edited code too
        assert found.pop("flow.v0.run-completed").status is Status.ANCHOR_LOST
    assert {p.status for p in found.values()} == {Status.PRESENT}, "every other point"
    assert exits.check_exit(result) == exits.FAILED
    verified = verify(applied, catalog)
    expected = [(Check.POINTS, line)]
    if kind == "value":  # verify's points proof agrees with check: run-completed's block has no anchor now
        text = (applied / AGENT_LOOP).read_text(encoding="utf-8")
        block = text[: text.index(RUN_COMPLETED)].count("\n") + 1
        expected = sorted([*expected, (Check.POINTS, block)], key=lambda finding: finding[1])
    failing = [(f.check, f.line) for f in verified.findings if f.check is Check.POINTS and not f.ok]
    assert sorted(failing, key=lambda finding: finding[1]) == expected


def test_apply_on_the_edited_tree_puts_back_a_lost_point_and_records_the_edit(applied: Path, verl_090: Path, catalog):
    """apply's own check (business code before and after) agrees on a tree whose kept code was
    edited: another point of the file comes back, the edit is recorded as the business code now."""
    path = applied / AGENT_LOOP
    line = _edit(path, *EDITS["statement"])
    text = path.read_text(encoding="utf-8")
    assert text.count(RUN_COMPLETED) == 1
    path.write_text(text.replace(RUN_COMPLETED, ""), encoding="utf-8")  # flow.v0.run-completed's call, whole
    assert {p.point_id: p.status for p in check(applied, catalog).points}["flow.v0.run-completed"] is Status.MISSING
    result = apply(applied, catalog)
    statuses = {p.point_id: p.status for p in result.points}
    assert result.error is None and not [f.error for f in result.files if f.error]
    assert (statuses["flow.v0.run-completed"], statuses[POINT]) == (Status.APPLIED, Status.DRIFTED)
    assert path.read_text(encoding="utf-8") == text, "the point comes back as it was"
    assert _intrusions(applied, catalog) == [], "apply recorded the business code as it now is"
    assert _intrusions(applied, catalog, verl_090) == [(AGENT_LOOP, line)]


@pytest.mark.parametrize("kind", sorted(EDITS))
def test_remove_gives_back_the_release_with_the_forks_edit(applied: Path, verl_090: Path, catalog, kind: str):
    old, new = EDITS[kind]
    _edit(applied / AGENT_LOOP, old, new)
    result = remove(applied, catalog)
    assert exits.remove_exit(result) == exits.OK, [(p.point_id, p.status.value) for p in result.points]
    pristine = (verl_090 / AGENT_LOOP).read_text(encoding="utf-8")
    assert pristine.count(old) == 1
    assert (applied / AGENT_LOOP).read_text(encoding="utf-8") == pristine.replace(old, new)


def test_an_override_for_the_forks_code_makes_the_point_present_again(applied: Path, catalog, tmp_path: Path):
    """What check's message advises: re-anchor the point on the fork's code."""
    _edit(applied / AGENT_LOOP, *EDITS["statement"])
    folder = tmp_path / "fork-anchors"
    folder.mkdir()
    (folder / "fork.yaml").write_text(
        f"file: {AGENT_LOOP}\n"
        "points:\n"
        f"  - overrides: {POINT}\n"
        "    rewrite: |\n"
        "      output: AgentLoopOutput = await agent_loop.run(sampling_params, retries=2, **kwargs)\n"
        '      return await self._agent_loop_postprocess(output, trajectory["validate"], **kwargs)\n',
        encoding="utf-8",
    )
    overridden = load_catalog([folder])
    assert exits.check_exit(check(applied, overridden)) == exits.OK


# -- a replace_expr: the rest of the swapped statement is business code too -----------------------

SWAP_SPEC = """\
file: verl/target.py
points:
  - id: t.swap
    facility: progress
    title: the run reads a logging wrapper of the data
    scope: Worker.run
    changes_behaviour: run() reads self._logged() instead of self.data
    replace_expr: |
      result = run(self.data, ...)
    expr: self.data
    code: self._logged()
    marker: |
      self._logged()
"""
SWAP_BEFORE = """\
class Worker:
    def _logged(self):  # what the swapped expression calls: the class has it (unset-attribute otherwise)
        return self.data

    def run(self):
        result = run(self.data, 2)
        return result
"""


def test_an_edit_where_a_swapped_statements_anchor_has_a_wildcard_is_a_business_edit(tmp_path: Path):
    spec = tmp_path / "spec"
    spec.mkdir()
    (spec / "spec.yaml").write_text(SWAP_SPEC, encoding="utf-8")
    catalog = load_catalog([spec], shipped=False)
    root = tmp_path / "checkout"
    (root / "verl").mkdir(parents=True)
    target = root / "verl" / "target.py"
    target.write_text(SWAP_BEFORE, encoding="utf-8")
    pristine = tmp_path / "pristine"
    shutil.copytree(root, pristine)
    assert exits.apply_exit(apply(root, catalog)) == exits.OK
    assert _intrusions(root, catalog) == [] and _intrusions(root, catalog, pristine) == []
    line = _edit(target, "run(self._logged(), 2)", "run(self._logged(), 3)")
    assert _intrusions(root, catalog) == [("verl/target.py", line)]
    assert _intrusions(root, catalog, pristine) == [("verl/target.py", line)]
    assert {p.point_id: p.status for p in check(root, catalog).points} == {"t.swap": Status.PRESENT}
    remove(root, catalog)
    assert target.read_text(encoding="utf-8") == SWAP_BEFORE.replace("run(self.data, 2)", "run(self.data, 3)")
