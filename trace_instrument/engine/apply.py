"""apply: put every selected point in place; a file that fails stops every write (unless keep_going)."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst

from trace_instrument import __version__
from trace_instrument.edit.cstmap import PairingError
from trace_instrument.edit.imports import ImportChanges
from trace_instrument.edit.transform import EditError, edit_module
from trace_instrument.engine import runtime
from trace_instrument.engine.analysis import FileProblem, FileWork, analyse, decode, encoding_of
from trace_instrument.engine.common import (
    added_imports,
    business_baseline,
    commit,
    drift_message,
    file_size,
    internal_error,
    is_stale,
    locked,
    point_result,
    problem_results,
)
from trace_instrument.engine.files import CheckoutError, PendingWrite, checkout_root
from trace_instrument.engine.manifest import Manifest
from trace_instrument.engine.parallel import SHARED, map_in_order
from trace_instrument.locate import AnchorFailure, FileLocator, Placement
from trace_instrument.locate.business import business_fingerprints, declared_removals
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
        with locked(base, write):
            return _apply(base, catalog, selection, write, keep_going)
    except CheckoutError as exc:
        return RunResult(str(root), (), error=str(exc))


def _apply(base: Path, catalog: Catalog, selection: Selection, write: bool, keep_going: bool) -> RunResult:
    selected = frozenset(p.id for p in catalog.points if selection.wants(p))
    jobs = [f for f in catalog.files if any(p.file == f and p.id in selected for p in catalog.points)]
    outcomes = _run_jobs(base, catalog, selected, {path: frozenset() for path in jobs})
    outcomes = _settle_across_files(base, catalog, selected, outcomes)
    files = [outcome.result for outcome in outcomes.values()]
    # the instrumented code imports the runtime package: it comes along with any point in place
    needs_runtime = selection.wants_runtime or any(p.status.in_place for f in files for p in f.points)
    runtime_plan = runtime.plan_install(base, catalog) if needs_runtime else []
    result = RunResult(str(base), tuple(files), runtime_files=tuple((w.path, status) for w, status in runtime_plan))
    if any(f.error for f in files) and not keep_going:
        return result
    writes = [PendingWrite(o.result.path, o.data, o.before) for o in outcomes.values() if o.data is not None]
    writes += [w for w, status in runtime_plan if status == "created"]
    in_place = [catalog.point(p.point_id) for f in files for p in f.points if p.status.in_place]
    if writes or in_place:  # a lost or outdated manifest is written again even when nothing else changes
        manifest = Manifest.load(base)
        baselines = {o.result.path: o.baseline for o in outcomes.values() if o.baseline is not None}
        imports = {o.result.path: o.added_imports for o in outcomes.values() if o.added_imports}
        updated = manifest.updated(in_place, gone=[], baselines=baselines, imports=imports)
        if updated != manifest:
            writes.append(updated.write(f"trace-instrument {__version__}"))
    return commit(base, result, writes, write=write)


@dataclass(frozen=True)
class _Outcome:
    result: FileResult
    data: bytes | None = None  # the new bytes, when the file changes
    before: bytes | None = None  # the bytes they replace (refused if the file changes meanwhile)
    baseline: tuple[str, ...] | None = None  # business fingerprints, for the manifest
    added_imports: tuple[str, ...] = ()  # plain imports this run added, for the manifest


def _run_jobs(
    base: Path, catalog: Catalog, selected: frozenset[str], jobs: dict[str, frozenset[str]]
) -> dict[str, _Outcome]:
    """Each file's apply, on several cores when there are enough files; in catalog order."""
    items = [(str(base), path, selected, excluded) for path, excluded in jobs.items()]
    weights = [file_size(base / path) for path in jobs]
    results = map_in_order(_file_job, items, weights, {"catalog": catalog, "manifest": Manifest.load(base)})
    return dict(zip(jobs, results))


def _file_job(item: tuple[str, str, frozenset[str], frozenset[str]]) -> _Outcome:
    """One file's apply; whatever goes wrong becomes that file's error, never the run's crash."""
    try:
        return _apply_to_file(*item)
    except Exception as exc:  # noqa: BLE001 - contain it to the file
        catalog: Catalog = SHARED["catalog"]
        points = [p for p in catalog.points if p.file == item[1] and p.id in item[2]]
        return _Outcome(internal_error(item[1], points, exc))


def _apply_to_file(root: str, relative: str, selected: frozenset[str], excluded: frozenset[str]) -> _Outcome:
    catalog: Catalog = SHARED["catalog"]
    base = Path(root)
    work = analyse(base, relative, catalog)
    points = [p for p in catalog.points if p.file == relative and p.id in selected]
    manifest: Manifest = SHARED["manifest"]
    plans = [_plan_point(work, point, manifest) for point in points]
    for plan in plans:
        if plan.point.id in excluded and plan.planned:
            message = excluded_reason(plan.point, selected)
            plan.result = point_result(plan.point, Status.SKIPPED, line=plan.result.line, message=message)
            plan.placements = []
    _refuse_overlaps({relative: plans})
    _settle_dependencies({relative: plans}, selected)
    result, baseline = _edit_file(work, plans, catalog)
    if isinstance(work, FileProblem) or result.error:
        return _Outcome(result)
    if not result.changed:
        # points already in place and no baseline recorded (manifest lost): record the business code as it is
        in_place = any(p.status.in_place for p in result.points)
        return _Outcome(
            result,
            baseline=business_baseline(work, catalog) if in_place and relative not in manifest.baselines else None,
        )
    try:
        data = result.updated.encode(encoding_of(work.source.data))
    except UnicodeEncodeError as exc:
        failed = FileResult(
            result.path,
            result.points,
            original=result.original,
            error=f"cannot encode the result in the file's declared encoding: {exc}",
        )
        return _Outcome(failed)
    return _Outcome(result, data, work.source.data, baseline, _new_imports(work, plans))


def _new_imports(work: FileWork, plans: list[_PointPlan]) -> tuple[str, ...]:
    """The plain imports the planned points need that the file did not have (so remove may take them)."""
    bound = set()
    for node in work.tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update(alias.asname or alias.name.split(".")[0] for alias in node.names)
    needed = dict.fromkeys(i for p in plans if p.planned for i in p.point.imports)
    return tuple(
        text
        for text in needed
        if not {a.asname or a.name.split(".")[0] for a in ast.parse(text).body[0].names} <= bound
    )


def excluded_reason(point: Point, selected: frozenset[str]) -> str:
    missing = [r for r in point.requires if r not in selected]
    return (
        f"requires {', '.join(point.requires)}, which is not in place"
        if not missing
        else f"requires {missing[0]} (not selected)"
    )


def _settle_across_files(
    base: Path, catalog: Catalog, selected: frozenset[str], outcomes: dict[str, _Outcome]
) -> dict[str, _Outcome]:
    """Redo the files whose points need a point another file could not place (rare)."""
    while True:
        status = {p.point_id: p.status for o in outcomes.values() for p in o.result.points}
        redo: dict[str, set[str]] = {}
        for outcome in outcomes.values():
            for result in outcome.result.points:
                point = catalog.point(result.point_id)
                if result.status is Status.APPLIED and any(
                    r in status and not status[r].in_place for r in point.requires
                ):
                    redo.setdefault(point.file, set()).add(point.id)
        if not redo:
            return outcomes
        for path, ids in redo.items():
            previous = {p.point_id for p in outcomes[path].result.points if p.status is Status.SKIPPED}
            outcomes[path] = _run_jobs(base, catalog, selected, {path: frozenset(ids | previous)})[path]


# -- planning ----------------------------------------------------------------------------------


def _plan_point(work: FileWork | FileProblem, point: Point, manifest: Manifest) -> _PointPlan:
    if isinstance(work, FileProblem):
        status = Status.NOT_APPLICABLE if work.missing else Status.SKIPPED
        return _PointPlan(point, point_result(point, status, message=work.message))
    state = work.state(point)
    if state.complete:
        return _PointPlan(point, point_result(point, Status.PRESENT, line=state.line))
    if not state.untouched:
        if is_stale(work, point, manifest):
            message = "applied with an older template; left alone (`remove` then `apply` updates it)"
            return _PointPlan(point, point_result(point, Status.STALE, line=state.line, message=message))
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


def _settle_dependencies(plans: dict[str, list[_PointPlan]], selected: frozenset[str]) -> None:
    """A point whose required point is not in place is not applied either.

    Requirements in other files count as met here when selected; the caller
    checks them once every file is done.
    """
    by_id = {plan.point.id: plan for items in plans.values() for plan in items}
    changed = True
    while changed:
        changed = False
        for plan in by_id.values():
            if not plan.planned:
                continue
            for required in plan.point.requires:
                other = by_id.get(required)
                if other is None and required in selected:
                    continue  # another file's point: settled by the caller
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


def _edit_file(
    work: FileWork | FileProblem, plans: list[_PointPlan], catalog: Catalog
) -> tuple[FileResult, tuple[str, ...] | None]:
    """The file with the planned points in place, and its business fingerprints (the baseline)."""
    if isinstance(work, FileProblem):
        return problem_results(work, [p.point for p in plans]), None
    original = decode(work.source.data)
    planned = [p for p in plans if p.planned]
    if not planned:
        return FileResult(work.path, tuple(p.result for p in plans), original=original), None
    placements = [pl for p in planned for pl in p.placements]
    names = frozenset(n for p in planned for n in p.point.tracing_names)
    extra_imports = tuple(dict.fromkeys(i for p in planned for i in p.point.imports))
    baseline = business_baseline(work, catalog)
    try:
        module = cst.parse_module(work.source.data)
        edited = edit_module(module, work.tree, placements, imports=ImportChanges(names, extra_imports))
        updated = edited.code
        _check_result(work, updated, planned, baseline, catalog)
    except (EditError, PairingError, cst.ParserSyntaxError, SyntaxError, _NotRecognised) as exc:
        results = tuple(
            point_result(p.point, Status.ERROR, line=p.result.line, message=f"not applied: {exc}")
            if p.planned
            else p.result
            for p in plans
        )
        return FileResult(work.path, results, original=original, error=f"edit failed: {exc}"), None
    return FileResult(work.path, tuple(p.result for p in plans), original=original, updated=updated), baseline


def _check_result(
    work: FileWork, updated: str, planned: list[_PointPlan], baseline: tuple[str, ...], catalog: Catalog
) -> None:
    """The output must parse, every point just applied must be recognised in it, and its
    business code must be the input's but for the rewrites the catalog declares."""
    tree = ast.parse(updated, filename=work.path)
    # only the points found edited by hand in the input can carry markers in the output
    touched = frozenset(p.id for p in work.points if work.state(p).marker_nodes)
    locator = FileLocator(tree, work.points, work.locator.recognition.helper_names, updated, markers_for=touched)
    for plan in planned:
        if not locator.state(plan.point).complete:
            raise _NotRecognised(f"point {plan.point.id} is not recognisable after insertion (catalog bug)")
    declared = declared_removals(locator.recognition)
    after = [f for f, _ in business_fingerprints(locator.recognition, added_imports(catalog)) if f not in declared]
    if after != [f for f in baseline if f not in declared]:
        raise _NotRecognised("the edit would change business code beyond the declared rewrites (catalog bug)")
