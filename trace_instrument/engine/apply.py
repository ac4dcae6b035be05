"""apply: put every selected point in place, all files or none."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst

from trace_instrument import __version__
from trace_instrument.edit.imports import ImportChanges
from trace_instrument.edit.transform import EditError, edit_module
from trace_instrument.engine import runtime
from trace_instrument.engine.analysis import FileProblem, FileWork, decode
from trace_instrument.engine.common import (
    business_baseline,
    commit,
    drift_message,
    file_writes,
    point_result,
    problem_results,
    selected_files,
)
from trace_instrument.engine.files import CheckoutError, checkout_root
from trace_instrument.engine.manifest import Manifest
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
    for work, points in selected_files(base, catalog, selection):
        works[work.path] = work
        plans[work.path] = [_plan_point(work, point) for point in points]
    _settle_dependencies(plans)
    _refuse_overlaps(plans)
    files = [_edit_file(works[path], plans[path]) for path in plans]
    runtime_plan = runtime.plan_install(base, catalog) if selection.wants_runtime else []
    result = RunResult(str(base), tuple(files), runtime_files=tuple((w.path, status) for w, status in runtime_plan))
    if any(f.error for f in files) and not keep_going:
        return result
    writes = file_writes(files, works) + [w for w, status in runtime_plan if status == "created"]
    if writes:
        in_place = [p.point for items in plans.values() for p in items if p.result.status.in_place]
        manifest = Manifest.load(base)
        baselines = {f.path: business_baseline(works[f.path], catalog) for f in files if f.changed and not f.error}
        updated = manifest.updated(in_place, gone=[], baselines=baselines)
        if updated != manifest:
            writes.append(updated.write(f"trace-instrument {__version__}"))
    return commit(base, result, writes, write=write)


# -- planning ----------------------------------------------------------------------------------


def _plan_point(work: FileWork | FileProblem, point: Point) -> _PointPlan:
    if isinstance(work, FileProblem):
        status = Status.NOT_APPLICABLE if work.missing else Status.SKIPPED
        return _PointPlan(point, point_result(point, status, message=work.message))
    state = work.state(point)
    if state.complete:
        return _PointPlan(point, point_result(point, Status.PRESENT, line=state.line))
    if not state.untouched:
        message = drift_message(state) + "; left alone"
        return _PointPlan(point, point_result(point, Status.DRIFTED, line=state.line, message=message))
    placements = []
    for edit in point.edits:
        placed = work.locator.place(point, edit)
        if isinstance(placed, AnchorFailure):
            failure = point_result(
                point, placed.status, line=placed.line, message=placed.message, candidates=placed.candidates
            )
            return _PointPlan(point, failure)
        placements.append(placed)
    line = min(p.line for p in placements)
    return _PointPlan(point, point_result(point, Status.APPLIED, line=line), placements)


def _settle_dependencies(plans: dict[str, list[_PointPlan]]) -> None:
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
                why = "not selected" if other is None else other.result.status.value
                plan.result = point_result(
                    plan.point, Status.SKIPPED, line=plan.result.line, message=f"requires {required} ({why})"
                )
                plan.placements = []
                changed = True
                break


def _refuse_overlaps(plans: dict[str, list[_PointPlan]]) -> None:
    """Two edits that would rewrite the same statement: neither is made."""
    for items in plans.values():
        owner: dict[int, _PointPlan] = {}
        for plan in items:
            for placement in list(plan.placements):
                for stmt in placement.region:
                    other = owner.setdefault(id(stmt), plan)
                    if other is plan or not other.planned:
                        continue
                    line = getattr(stmt, "lineno", 0)
                    for victim, rival in ((plan, other), (other, plan)):
                        victim.result = point_result(
                            victim.point,
                            Status.AMBIGUOUS,
                            line=line,
                            message=f"its anchor overlaps point {rival.point.id} at line {line}; fix the anchor specs",
                        )
                        victim.placements = []


# -- editing ------------------------------------------------------------------------------------


class _NotRecognised(Exception):
    pass


def _edit_file(work: FileWork | FileProblem, plans: list[_PointPlan]) -> FileResult:
    if isinstance(work, FileProblem):
        return problem_results(work, [p.point for p in plans])
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
            point_result(p.point, Status.ERROR, line=p.result.line, message=f"not applied: {exc}")
            if p.planned
            else p.result
            for p in plans
        )
        return FileResult(work.path, results, original=original, error=f"edit failed: {exc}")
    return FileResult(work.path, tuple(p.result for p in plans), original=original, updated=updated)


def _check_result(work: FileWork, updated: str, planned: list[_PointPlan]) -> None:
    """The output must parse, and every point just applied must be recognised in it."""
    tree = ast.parse(updated, filename=work.path)
    locator = FileLocator(tree, work.points, work.locator.recognition.helper_names)
    for plan in planned:
        if not locator.state(plan.point).complete:
            raise _NotRecognised(f"point {plan.point.id} is not recognisable after insertion (catalog bug)")
