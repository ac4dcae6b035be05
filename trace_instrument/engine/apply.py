"""apply: put every selected point in place, all files or none."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst

from trace_instrument.edit.imports import ImportChanges
from trace_instrument.edit.transform import EditError, edit_module
from trace_instrument.engine import runtime
from trace_instrument.engine.analysis import FileProblem, FileWork, analyse, decode
from trace_instrument.engine.files import CheckoutError, PendingWrite, checkout_lock, checkout_root, write_all
from trace_instrument.locate import AnchorFailure, FileLocator, Placement
from trace_instrument.model import Catalog, FileResult, Point, PointResult, RunResult, Selection, Status


@dataclass(eq=False)
class _PointPlan:
    point: Point
    result: PointResult
    placements: list[Placement] = field(default_factory=list)

    @property
    def planned(self) -> bool:
        return self.result.status is Status.APPLIED


def apply(
    root: str | Path,
    catalog: Catalog,
    selection: Selection = Selection(),
    *,
    write: bool = True,
    keep_going: bool = False,
) -> RunResult:
    try:
        base = checkout_root(root)
    except CheckoutError as exc:
        return RunResult(str(root), (), error=str(exc))
    works: dict[str, FileWork | FileProblem] = {}
    plans: dict[str, list[_PointPlan]] = {}
    for relative in catalog.files:
        chosen = [p for p in catalog.points if p.file == relative and selection.wants(p)]
        if not chosen:
            continue
        work = analyse(base, relative, catalog)
        works[relative] = work
        plans[relative] = [_plan_point(work, point) for point in chosen]
    _settle_dependencies(catalog, plans)
    _refuse_overlaps(plans)
    files = [_edit_file(works[path], plans[path]) for path in plans]
    runtime_plan = runtime.plan_install(base, catalog) if selection.wants_runtime else []
    result = RunResult(str(base), tuple(files), runtime_files=tuple((w.path, status) for w, status in runtime_plan))
    blocked = [f for f in files if f.error]
    if not write or (blocked and not keep_going):
        return result
    writes = [PendingWrite(f.path, f.updated.encode(_encoding(works[f.path]))) for f in files if f.changed and not f.error]
    writes += [w for w, status in runtime_plan if status == "created"]
    if not writes:
        return result
    try:
        with checkout_lock(base):
            write_all(base, writes)
    except (CheckoutError, OSError) as exc:
        return RunResult(result.root, result.files, result.runtime_files, written=False, error=f"nothing written: {exc}")
    return RunResult(result.root, result.files, result.runtime_files, written=True)


def _encoding(work: FileWork | FileProblem) -> str:
    import io
    import tokenize

    encoding, _ = tokenize.detect_encoding(io.BytesIO(work.source.data).readline)
    return encoding


# -- planning ----------------------------------------------------------------------------------


def _plan_point(work: FileWork | FileProblem, point: Point) -> _PointPlan:
    if isinstance(work, FileProblem):
        status = Status.NOT_APPLICABLE if work.missing else Status.SKIPPED
        return _PointPlan(point, _result(point, status, message=work.message))
    state = work.state(point)
    if state.complete:
        return _PointPlan(point, _result(point, Status.PRESENT, line=state.line))
    if not state.untouched:
        return _PointPlan(point, _result(point, Status.DRIFTED, line=state.line, message=drift_message(state)))
    placements = []
    for edit in point.edits:
        placed = work.locator.place(point, edit)
        if isinstance(placed, AnchorFailure):
            return _PointPlan(
                point,
                _result(point, placed.status, line=placed.line, message=placed.message, candidates=placed.candidates),
            )
        placements.append(placed)
    line = min(p.line for p in placements)
    return _PointPlan(point, _result(point, Status.APPLIED, line=line), placements)


def drift_message(state) -> str:
    present = len(state.blocks)
    total = present + len(state.absent)
    where = sorted({getattr(n, "lineno", 0) for n in state.marker_nodes} | {b.line for b in state.blocks})
    lines = ", ".join(str(line) for line in where if line)
    return f"present but edited by hand: {present} of {total} edits as in the template (its code at lines {lines}); left alone"


def _result(point: Point, status: Status, **details) -> PointResult:
    return PointResult(point.id, point.facility, point.file, status, **details)


def _settle_dependencies(catalog: Catalog, plans: dict[str, list[_PointPlan]]) -> None:
    """A point whose required point is not in place is not applied either."""
    by_id = {plan.point.id: plan for items in plans.values() for plan in items}
    changed = True
    while changed:
        changed = False
        for plan in by_id.values():
            if not plan.planned:
                continue
            for required in plan.point.requires:
                other = by_id.get(required)
                if other is not None and (other.result.status.in_place or other.planned):
                    continue
                why = f"not selected" if other is None else other.result.status.value
                plan.result = _result(plan.point, Status.SKIPPED, line=plan.result.line, message=f"requires {required} ({why})")
                plan.placements = []
                changed = True
                break


def _refuse_overlaps(plans: dict[str, list[_PointPlan]]) -> None:
    """Two edits that would rewrite the same statement: neither is made."""
    for items in plans.values():
        owner: dict[int, _PointPlan] = {}
        for plan in items:
            for placement in plan.placements:
                for stmt in placement.region:
                    other = owner.setdefault(id(stmt), plan)
                    if other is not plan and other.planned:
                        line = getattr(stmt, "lineno", 0)
                        for victim, rival in ((plan, other), (other, plan)):
                            victim.result = _result(
                                victim.point, Status.AMBIGUOUS, line=line,
                                message=f"its anchor overlaps point {rival.point.id} at line {line}; fix the anchor specs",
                            )
                            victim.placements = []


# -- editing ------------------------------------------------------------------------------------


def _edit_file(work: FileWork | FileProblem, plans: list[_PointPlan]) -> FileResult:
    if isinstance(work, FileProblem):
        error = "" if work.missing else work.message
        return FileResult(work.path, tuple(p.result for p in plans), error=error)
    original = decode(work.source.data)
    planned = [p for p in plans if p.planned]
    if not planned:
        return FileResult(work.path, tuple(p.result for p in plans), original=original)
    placements = [pl for p in planned for pl in p.placements]
    names = frozenset(n for p in planned for n in p.point.tracing_names)
    extra_imports = tuple(dict.fromkeys(i for p in planned for i in p.point.imports))
    try:
        module = cst.parse_module(work.source.data)
        edited = edit_module(module, work.tree, placements, imports=ImportChanges(names, extra_imports))
        updated = edited.code
        _check_result(work, updated, planned)
    except (EditError, cst.ParserSyntaxError, SyntaxError, _NotRecognised) as exc:
        results = tuple(
            _result(p.point, Status.ERROR, line=p.result.line, message=f"not applied: {exc}") if p.planned else p.result
            for p in plans
        )
        return FileResult(work.path, results, original=original, error=f"edit failed: {exc}")
    return FileResult(work.path, tuple(p.result for p in plans), original=original, updated=updated)


class _NotRecognised(Exception):
    pass


def _check_result(work: FileWork, updated: str, planned: list[_PointPlan]) -> None:
    """The output must parse, and every point just applied must be recognised in it."""
    tree = ast.parse(updated, filename=work.path)
    locator = FileLocator(tree, work.points, frozenset(_helpers(work)))
    for plan in planned:
        if not locator.state(plan.point).complete:
            raise _NotRecognised(f"point {plan.point.id} is not recognisable after insertion (catalog bug)")


def _helpers(work: FileWork) -> frozenset[str]:
    return work.locator.recognition.helper_names
