"""Per-operation fixtures: tests/fixtures/<operation>/<case>/, each a spec.yaml and a before.py
(the file verl/target.py of a synthetic checkout) and what the operation makes of them.

apply/<case>/
    after.py       what apply makes of before.py. Run four ways: before -> after (apply),
                   after -> after (the no-op twin: a second apply changes no byte),
                   after -> before (remove) and before -> before under --dry-run.
    expected.yaml  the points apply does not place: per point its status, reason, a fragment of
                   its message (`message`, or all of it: `message_is`) and, where they matter,
                   the lines, name issues and candidates; `edits`: each failing edit of it
                   (index, status, reason, a fragment of its message, line, candidates).
                   `check` on before.py reports the same (a point's `check:` mapping says where
                   it differs). Without an after.py, nothing at all is written.
remove/<case>/     apply then remove, as a user runs them (the manifest apply writes is kept between).
    applied.py     what apply makes of before.py (the runs of `steps.yaml`, else one of every point).
    steps.yaml     optional: `apply:` and `remove:`, each a list of runs, a run the point ids it
                   names (`--only`); without one, each is one run of every point. `force: true`:
                   remove runs with --force.
    edited.py      optional: the file as the user edits it after apply (before remove runs).
    removed.py     what remove gives back when it is not before.py (needed with edited.py).
    expected.yaml  optional: the points remove keeps (as for apply), with what check reports on
                   edited.py (a point's `check:` mapping); without it every point goes, and
                   with the last of them the manifest. A second remove changes nothing.
check/<case>/      before.py holds the points' code already (moved, drifted, broken ...).
    expected.yaml  what check reports; apply reports the same (a point's `apply:` mapping says
                   where it differs) and leaves the file alone,
    after.py       ... unless it repairs it: then apply gives after.py and check is clean on it.

The exit code of each operation (trace_instrument.render.exits) is `exit` in expected.yaml (one
number for both, or a mapping by operation), 1 when not given. Points expected.yaml does not
name must be placed by apply (missing in check before that), or be present in check cases.
"""

from __future__ import annotations

import ast
import io
import shutil
import tokenize
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from support import assert_snapshot

from trace_instrument.engine.apply import apply
from trace_instrument.engine.check import check
from trace_instrument.engine.remove import remove
from trace_instrument.model import EXTRAS, Catalog, Edit, EditKind, PointResult, Reason, RunResult, Selection, Status
from trace_instrument.render import exits
from trace_instrument.spec import load_catalog

FIXTURES = Path(__file__).parent / "fixtures"
TARGET = "verl/target.py"
ALL = Selection(extras=frozenset(EXTRAS))
OVERRIDE_KEYS = {"apply", "check", "remove"}
POINT_KEYS = {
    "status",
    "reason",
    "message",
    "message_is",
    "line",
    "expected_line",
    "names",
    "context",
    "candidates",
    "diff",
    "edits",
}
POINT_KEYS |= OVERRIDE_KEYS
NAME_KEYS = {"name", "problem", "binding", "binding_line", "relation", "line", "expected"}
CONTEXT_KEYS = {"subject", "problem", "statement_line", "reader", "line"}
EDIT_KEYS = {"index", "status", "reason", "message", "line", "candidates"}


def _cases(operation: str, *having: str) -> list[Any]:
    found = []
    for spec in sorted((FIXTURES / operation).glob("*/spec.yaml")):
        case = spec.parent
        if all((case / name).exists() for name in having):
            found.append(pytest.param(case, id=f"{operation}/{case.name}"))
    return found


def test_every_case_is_complete() -> None:
    """A case folder is run only when it holds what its operation needs."""
    operations = (("apply", ("after.py", "expected.yaml")), ("check", ("expected.yaml",)), ("remove", ("applied.py",)))
    for operation, outcomes in operations:
        for case in sorted(p for p in (FIXTURES / operation).iterdir() if p.is_dir()):
            assert (case / "spec.yaml").is_file() and (case / "before.py").is_file(), case
            assert any((case / name).is_file() for name in outcomes), f"{case}: no {' or '.join(outcomes)}"
    for case in sorted(p for p in (FIXTURES / "remove").iterdir() if p.is_dir()):
        assert (case / "removed.py").is_file() or not (case / "edited.py").exists(), f"{case}: no removed.py"
    # the operations' case folders, and the data other tests read (each named by its test)
    data = ["manifests", "port_trees", "runtime-0.1.0", "style", "verl-0.9.0-small"]
    assert sorted(p.name for p in FIXTURES.iterdir()) == sorted(["apply", "check", "remove", "spec", *data])


# -- running a case ----------------------------------------------------------------------


def _catalog(case: Path, tmp_path: Path) -> Catalog:
    """The case's points alone (its spec copied to a folder of its own: expected.yaml is no spec)."""
    folder = tmp_path / "spec"
    folder.mkdir(exist_ok=True)
    shutil.copy(case / "spec.yaml", folder / "spec.yaml")
    return load_catalog([folder], shipped=False)


def _checkout(tmp_path: Path, data: bytes) -> Path:
    root = tmp_path / "checkout"
    target = root / TARGET
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return root


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


Operation = Callable[..., RunResult]


def _operate(case: Path, tmp_path: Path, data: bytes, operation: Operation, **kwargs: Any) -> tuple[RunResult, Path]:
    root = _checkout(tmp_path, data)
    return operation(root, _catalog(case, tmp_path), ALL, **kwargs), root


def _run(case: Path, tmp_path: Path, data: bytes, operation: Operation = apply, **kwargs: Any) -> bytes:
    """The target's bytes after a run that must go through without errors."""
    result, root = _operate(case, tmp_path, data, operation, **kwargs)
    assert not result.error, result.error
    assert not [f.error for f in result.files if f.error]
    return (root / TARGET).read_bytes()


# -- what a case expects -------------------------------------------------------------------


@dataclass(frozen=True)
class Expected:
    points: dict[str, dict[str, Any]]
    exit: dict[str, int]

    def of(self, point_id: str, operation: str) -> dict[str, Any] | None:
        """What `operation` must report for the point (None: not named, so in place)."""
        point = self.points.get(point_id)
        if point is None:
            return None
        fields = {k: v for k, v in point.items() if k not in OVERRIDE_KEYS}
        return {**fields, **point.get(operation, {})}


def _expected(case: Path) -> Expected:
    data = yaml.safe_load((case / "expected.yaml").read_text(encoding="utf-8"))
    assert set(data) <= {"points", "exit"}, f"{case.name}/expected.yaml: unknown keys {set(data) - {'points', 'exit'}}"
    points = data["points"]
    for point_id, fields in points.items():
        unknown = set(fields) - POINT_KEYS
        assert not unknown, f"{case.name}/expected.yaml: {point_id}: unknown keys {unknown}"
        for issue in fields.get("names", []):
            assert set(issue) <= NAME_KEYS, f"{case.name}/expected.yaml: {point_id}: unknown name keys"
        for issue in fields.get("context", []):
            assert set(issue) <= CONTEXT_KEYS, f"{case.name}/expected.yaml: {point_id}: unknown context keys"
        for edit in fields.get("edits", []):
            assert set(edit) <= EDIT_KEYS, f"{case.name}/expected.yaml: {point_id}: unknown edit keys"
    code = data.get("exit", exits.FAILED)
    exit_codes = code if isinstance(code, dict) else {"apply": code, "check": code}
    return Expected(points, {"apply": exits.FAILED, "check": exits.FAILED, **exit_codes})


def _assert_point(found: PointResult, wanted: dict[str, Any], operation: str) -> None:
    where = f"{operation}: {found.point_id}"
    assert found.status.value == wanted["status"], f"{where}: {found.status.value} ({found.message})"
    reason = found.reason.value if found.reason is not None else None
    assert reason == wanted.get("reason"), f"{where}: reason {reason} ({found.message})"
    assert "message" in wanted or "message_is" in wanted, f"{where}: expected.yaml names no message"
    if "message_is" in wanted:
        assert found.message == wanted["message_is"], f"{where}: message"
    if "message" in wanted:
        assert wanted["message"] in found.message, f"{where}: {found.message!r} lacks {wanted['message']!r}"
    for key in ("line", "expected_line", "diff"):
        if key in wanted:
            assert getattr(found, key) == wanted[key], f"{where}: {key}"
    if "names" in wanted or found.names:
        issues = [_name_fields(issue, wanted) for issue in found.names]
        expected_issues = [_name_expectation(issue, wanted) for issue in wanted.get("names", [])]
        assert issues == expected_issues, f"{where}: names"
    if "context" in wanted or found.context:
        expected_context = [{"problem": wanted.get("reason"), "reader": "", **c} for c in wanted.get("context", [])]
        named = {key for entry in wanted.get("context", []) for key in entry}
        context = [
            {
                key: getattr(c, key) if key != "problem" else c.problem.value
                for key in {"subject", "problem", "reader"} | named
            }
            for c in found.context
        ]
        assert context == expected_context, f"{where}: context"
    if "candidates" in wanted:
        assert [{"line": c.line, "code": c.code} for c in found.candidates] == wanted["candidates"], where
    _assert_edits(found, wanted.get("edits", []), where)


def _assert_edits(found: PointResult, wanted: list[dict[str, Any]], where: str) -> None:
    """Each failing edit the point names is the one expected, in edit order (none when none is).

    A point of one edit may leave `edits` out: its one failing edit is the point's own failure."""
    if not wanted and all(e.of == 1 for e in found.edits):
        own = [(e.status, e.reason, e.line, e.message) for e in found.edits]
        assert own in ([], [(found.status, found.reason, found.line, found.message)]), f"{where}: edits"
        return
    assert [e.index for e in found.edits] == [e["index"] for e in wanted], f"{where}: failing edits"
    for edit, expected in zip(found.edits, wanted):
        at = f"{where}: edit {edit.index}"
        reason = edit.reason.value
        assert (edit.status.value, reason) == (expected["status"], expected["reason"]), f"{at}: {edit.message}"
        assert expected["message"] in edit.message, f"{at}: {edit.message!r} lacks {expected['message']!r}"
        if "line" in expected:
            assert edit.line == expected["line"], f"{at}: line"
        if "candidates" in expected:
            assert [{"line": c.line, "code": c.code} for c in edit.candidates] == expected["candidates"], at


def _name_expectation(issue: dict[str, Any], point: dict[str, Any]) -> dict[str, Any]:
    return {"problem": point.get("reason"), "binding": "", "binding_line": 0, "relation": "bound by", **issue}


def _name_fields(issue: Any, point: dict[str, Any]) -> dict[str, Any]:
    """The fields of a NameIssue the expectation speaks of (the line and expected text when named)."""
    fields = {
        "name": issue.name,
        "problem": issue.problem.value,
        "binding": issue.binding,
        "binding_line": issue.binding_line,
        "relation": issue.relation,
    }
    named = {key for entry in point.get("names", []) for key in entry}
    fields.update({key: getattr(issue, key) for key in ("line", "expected") if key in named})
    return fields


def _assert_points(result: RunResult, expected: Expected, operation: str, unnamed: set[Status]) -> None:
    assert result.error is None, result.error
    found = {p.point_id: p for p in result.points}
    assert set(expected.points) <= set(found), f"{operation}: no result for {set(expected.points) - set(found)}"
    for point_id, point in found.items():
        wanted = expected.of(point_id, operation)
        if wanted is None:
            assert point.status in unnamed, f"{operation}: {point_id} is {point.status.value}: {point.message}"
            assert not point.edits, f"{operation}: {point_id} names failing edits: {point.edits}"
        else:
            _assert_point(point, wanted, operation)


# -- apply: positive cases, run four ways ----------------------------------------------------


@pytest.mark.parametrize("case", _cases("apply", "after.py"))
def test_apply_gives_after(case: Path, tmp_path: Path) -> None:
    before = (case / "before.py").read_bytes()
    produced = _run(case, tmp_path, before)
    assert produced != before, "the fixture must change something"
    compile(produced, "after.py", "exec")
    assert_snapshot(case / "after.py", produced)


@pytest.mark.parametrize("case", _cases("apply", "after.py"))
def test_no_op_twin_second_apply_changes_nothing(case: Path, tmp_path: Path) -> None:
    after = (case / "after.py").read_bytes()
    assert _run(case, tmp_path, after) == after


@pytest.mark.parametrize("case", _cases("apply", "after.py"))
def test_remove_restores_before(case: Path, tmp_path: Path) -> None:
    """remove on after.py, with no manifest, gives before.py back; except that a rewrite whose
    captured body starts or ends its template is kept: only apply's record says where it was,
    and an opt-in extra whose code calls nothing of the runtime is not looked for: without the
    manifest's record it is the fork's own code (`missing`, left as it is)."""
    after = (case / "after.py").read_bytes()
    points = _catalog(case, tmp_path).points
    open_bodies = {p.id for p in points if any(_open_body(e) for e in p.edits)}
    untold = {p.id for p in points if p.extra is not None and not p.tracing_names}
    if not open_bodies:
        assert _run(case, tmp_path, after, operation=remove) == (case / "before.py").read_bytes()
        return
    result, root = _operate(case, tmp_path, after, remove)
    assert (root / TARGET).read_bytes() == after
    for point in result.points:
        if point.point_id in untold:
            assert point.status is Status.MISSING, point.message
        elif point.point_id in open_bodies:
            assert (point.status, point.reason) == (Status.KEPT, Reason.EDITED_BY_HAND), point.message
            assert "was not recorded when it was applied" in point.message


def _open_body(edit: Edit) -> bool:
    """Does the rewrite capture a body its template's own code does not bound (first or last)?"""
    stmts = edit.template.stmts
    return edit.kind is EditKind.REWRITE and (_is_body(stmts[0]) or _is_body(stmts[-1]))


def _is_body(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Name) and stmt.value.id.endswith("_body__")


@pytest.mark.parametrize("case", _cases("apply", "after.py"))
def test_dry_run_writes_nothing_and_plans_the_reviewed_text(case: Path, tmp_path: Path) -> None:
    """A dry run leaves the file as it is, and what it plans is the reviewed after.py."""
    before = (case / "before.py").read_bytes()
    result, root = _operate(case, tmp_path, before, apply, write=False)
    assert not result.error and not [f.error for f in result.files if f.error]
    assert (root / TARGET).read_bytes() == before
    (planned,) = [f for f in result.files if f.path == TARGET]
    reviewed = (case / "after.py").read_bytes()
    encoding, _ = tokenize.detect_encoding(io.BytesIO(reviewed).readline)  # as Python reads it (a BOM too)
    assert planned.updated == reviewed.decode(encoding)


# -- apply: what it refuses ------------------------------------------------------------------


@pytest.mark.parametrize("case", _cases("apply", "expected.yaml"))
def test_apply_reports_what_it_does_not_place(case: Path, tmp_path: Path) -> None:
    expected = _expected(case)
    before = (case / "before.py").read_bytes()
    result, root = _operate(case, tmp_path, before, apply)
    _assert_points(result, expected, "apply", {Status.APPLIED})
    assert exits.apply_exit(result) == expected.exit["apply"]
    if not (case / "after.py").exists():
        assert _files(root) == {TARGET: before}, "nothing may be written: no edit, no runtime, no manifest"
        assert not result.written


@pytest.mark.parametrize("case", _cases("apply", "expected.yaml", "after.py"))
def test_nothing_of_a_point_not_placed_is_written(case: Path, tmp_path: Path) -> None:
    """Where other points of the file are applied, check on the result still finds no trace of
    the ones apply did not place (a line of theirs would make them drifted or broken)."""
    expected = _expected(case)
    result, _root = _operate(case, tmp_path, (case / "after.py").read_bytes(), check)
    found = {p.point_id: p for p in result.points}
    for point_id, point in found.items():
        wanted = expected.of(point_id, "check")
        if wanted is None:
            assert point.status is Status.PRESENT, f"{point_id}: {point.status.value} {point.message}"
        else:  # the lines moved with what apply added; the status and reason may not change
            reason = point.reason.value if point.reason is not None else None
            assert (point.status.value, reason) == (wanted["status"], wanted.get("reason")), point.message


@pytest.mark.parametrize("case", _cases("apply", "expected.yaml"))
def test_check_reports_the_same_before_apply(case: Path, tmp_path: Path) -> None:
    expected = _expected(case)
    before = (case / "before.py").read_bytes()
    result, root = _operate(case, tmp_path, before, check)
    _assert_points(result, expected, "check", {Status.MISSING})
    assert exits.check_exit(result) == expected.exit["check"]
    assert _files(root) == {TARGET: before}


# -- remove: apply, then remove on what apply left (manifest included) ------------------------------


def _steps(case: Path, operation: str) -> list[Selection]:
    """The runs of one operation: `--only` selections from steps.yaml, else one run of every point."""
    steps = case / "steps.yaml"
    runs = yaml.safe_load(steps.read_text(encoding="utf-8")).get(operation) if steps.exists() else None
    return [Selection(only=frozenset(run)) for run in runs] if runs else [ALL]


def _forced(case: Path) -> dict[str, bool]:
    """remove's keyword arguments: `force` when steps.yaml says so."""
    steps = case / "steps.yaml"
    force = bool(yaml.safe_load(steps.read_text(encoding="utf-8")).get("force")) if steps.exists() else False
    return {"force": True} if force else {}


def _run_steps(
    root: Path, catalog: Catalog, operation: Operation, selections: list[Selection], **kwargs: Any
) -> RunResult:
    """Run each selection in turn; the last run's result."""
    result = None
    for selection in selections:
        result = operation(root, catalog, selection, **kwargs)
        assert not result.error, result.error
        assert not [f.error for f in result.files if f.error]
        problems = [(p.point_id, p.status.value, p.message) for p in result.points if p.status is Status.ERROR]
        assert not problems, problems
    assert result is not None
    return result


@pytest.mark.parametrize("case", _cases("remove", "applied.py"))
def test_remove_gives_back_what_apply_found(case: Path, tmp_path: Path) -> None:
    """remove after apply gives the file back byte for byte, or keeps the user's edits (removed.py),
    or keeps the points it must (expected.yaml); run again, it changes nothing."""
    catalog = _catalog(case, tmp_path)
    root = _checkout(tmp_path, (case / "before.py").read_bytes())
    _run_steps(root, catalog, apply, _steps(case, "apply"))
    applied = (root / TARGET).read_bytes()
    assert_snapshot(case / "applied.py", applied)
    placed = check(root, catalog, ALL)
    assert all(p.status is Status.PRESENT for p in placed.points), [(p.point_id, p.status.value) for p in placed.points]
    expected = _expected(case) if (case / "expected.yaml").exists() else Expected({}, {})
    if (case / "edited.py").exists():
        (root / TARGET).write_bytes((case / "edited.py").read_bytes())
        if expected.points:
            _assert_points(check(root, catalog, ALL), expected, "check", {Status.PRESENT})
    removed = _run_steps(root, catalog, remove, _steps(case, "remove"), **_forced(case))
    _assert_points(removed, expected, "remove", {Status.REMOVED})
    wanted = case / ("removed.py" if (case / "removed.py").exists() else "before.py")
    assert (root / TARGET).read_bytes() == wanted.read_bytes()
    kept = any(p.status is Status.KEPT for p in removed.points)
    assert (root / ".trace-instrument.json").exists() == kept, "the manifest stays exactly while a point does"
    files = _files(root)
    again = remove(root, catalog, _steps(case, "remove")[-1], **_forced(case))
    assert not again.error and _files(root) == files, "a second remove changes nothing"
    assert all(p.status in (Status.MISSING, Status.KEPT) for p in again.points)
    if _forced(case) and not kept:  # all out, the fork's lines aside: apply places the points again
        assert exits.apply_exit(apply(root, catalog, ALL)) == exits.OK
        assert exits.check_exit(check(root, catalog, ALL)) == exits.OK


# -- check: code already in the file -----------------------------------------------------------


@pytest.mark.parametrize("case", _cases("check", "expected.yaml"))
def test_check_reports_the_code_in_place(case: Path, tmp_path: Path) -> None:
    expected = _expected(case)
    before = (case / "before.py").read_bytes()
    result, root = _operate(case, tmp_path, before, check)
    _assert_points(result, expected, "check", {Status.PRESENT})
    # the case's code stands without the manifest apply writes: the tree is unfinished (no manifest)
    # when some point's code is in place, as the case expects it; its points decide the rest
    wanted = [(expected.of(p.point_id, "check") or {"status": "present"})["status"] for p in result.points]
    code_there = any(s in ("present", "drifted", "moved", "stale", "broken") for s in wanted)
    assert [p.reason for p in result.unfinished] == ([Reason.NO_MANIFEST] if code_there else [])
    assert exits.check_exit(replace(result, unfinished=())) == expected.exit["check"]
    assert _files(root) == {TARGET: before}


@pytest.mark.parametrize("case", _cases("check", "expected.yaml"))
def test_apply_on_the_code_in_place(case: Path, tmp_path: Path) -> None:
    expected = _expected(case)
    before = (case / "before.py").read_bytes()
    result, root = _operate(case, tmp_path, before, apply)
    _assert_points(result, expected, "apply", {Status.PRESENT})
    assert exits.apply_exit(result) == expected.exit["apply"]
    after = case / "after.py"
    if not after.exists():
        assert (root / TARGET).read_bytes() == before, "apply leaves what it cannot put right alone"
        return
    produced = (root / TARGET).read_bytes()
    assert_snapshot(after, produced)
    again = check(root, _catalog(case, tmp_path), ALL)
    assert exits.check_exit(again) == exits.OK, [(p.point_id, p.status.value, p.message) for p in again.points]
