"""apply: put every selected point in place, repair what present points need, refresh stale ones.

A file that fails stops every write (unless keep_going). What apply writes is
checked before anything is written: the output parses, every point it placed is
recognised in it, its business code is the input's but for declared rewrites,
and every point in place can run (its names resolve as the template means).
"""

from __future__ import annotations

import ast
import shutil
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

import libcst as cst

from trace_instrument import __version__
from trace_instrument.edit import chunks, formatting
from trace_instrument.edit.cstmap import PairingError
from trace_instrument.edit.imports import ImportChanges, render_from_import
from trace_instrument.edit.modules import parse_file
from trace_instrument.edit.regions import split_lines
from trace_instrument.edit.transform import EditError, edit_module, templates_at
from trace_instrument.engine import releases, runtime, unfinished
from trace_instrument.engine.analysis import FileProblem, FileWork, analyse, encoding_of
from trace_instrument.engine.assess import (
    Assessment,
    FileAssessor,
    context_changed,
    may_be_repaired,
    overlap_message,
    overlaps,
)
from trace_instrument.engine.baseline import added_imports, business_baseline, business_record, recorded_business
from trace_instrument.engine.files import (
    CheckoutError,
    PendingWrite,
    checkout_root,
    commit,
    locked,
    unwritable,
    unwritable_folder,
)
from trace_instrument.engine.manifest import MANIFEST_NAME, Business, Manifest, Replacements
from trace_instrument.engine.originals import FileText, for_removal, placed_extents, recorded, records_edit
from trace_instrument.engine.parallel import file_size, map_in_order
from trace_instrument.engine.remove import remove
from trace_instrument.engine.results import excluded_reason, one_file, point_result, problem_results
from trace_instrument.engine.versions import verl_version
from trace_instrument.locate import FileLocator, Placement
from trace_instrument.locate.business import business_fingerprints, declared_removals
from trace_instrument.locate.names import NameTable
from trace_instrument.locate.runnable import PointNames
from trace_instrument.model import (
    TRACING_MODULE,
    Catalog,
    ChangeKind,
    CodeStyle,
    ContextIssue,
    Extents,
    FileError,
    FileProblemKind,
    FileResult,
    NameIssue,
    Point,
    PointResult,
    Reason,
    RunError,
    RunErrorKind,
    RunResult,
    RuntimeStatus,
    Selection,
    Status,
)
from trace_instrument.spec.style import find_style


@dataclass(frozen=True)
class ApplyOptions:
    """How apply runs: write or only report, keep going past failed files, update older templates."""

    write: bool = True
    keep_going: bool = False  # write the files that worked even if others failed
    update: bool = False  # refresh points applied with an older template
    plan_only: bool = False  # the plan's statuses alone: no file is edited (nor its output checked)


FROM_CHECKOUT = "checkout"  # apply's `styling`: the formatter the checkout's configuration names


def apply(
    root: str | Path,
    catalog: Catalog,
    selection: Selection = Selection(),
    *,
    write: bool = True,
    keep_going: bool = False,
    update: bool = False,
    styling: formatting.Styling | None | str = FROM_CHECKOUT,
    plan_only: bool = False,
) -> RunResult:
    """Put the selected points in place (or, with write=False, say what would change).

    The inserted code is written as the checkout's formatter writes it (`spec/style.py` finds
    it; `styling` None: the templates as they are, or another checkout's formatting); a
    formatter configured but not installed stops the run (error formatter-missing, with the
    command that installs it), nothing written. With `plan_only` (nothing written), each point's
    status as planned, before any file is edited: the checks of the edited output (names, control
    context) are not made, so a point they would refuse reads `applied`; port starts from it and
    proves its places with a full apply.
    """
    options = ApplyOptions(write and not plan_only, keep_going, update, plan_only)
    try:
        base = checkout_root(root)
        with locked(base, write):
            chosen = _styling(base) if styling == FROM_CHECKOUT else styling
            if isinstance(chosen, RunError):
                return RunResult(str(base), (), error=chosen, verl_version=verl_version(base))
            assert not isinstance(chosen, str)  # FROM_CHECKOUT is the only word it takes
            return _apply(base, catalog, selection, options, chosen)
    except CheckoutError as exc:
        return RunResult(str(root), (), error=exc.as_run_error())


def _styling(base: Path) -> formatting.Styling | RunError | None:
    """The checkout's formatting, None without one, or the error of a formatter not installed here."""
    style = find_style(base)
    if style is None:
        return None
    if not formatting.installed(style):
        return _missing(style)
    return formatting.Styling(style, str(base))


def _missing(style: CodeStyle) -> RunError:
    message = (
        f"the checkout formats its code with {style.formatter.value} ({style.found_in}), which is not "
        f"installed here: {style.install}, then run apply again (the inserted code is written its way)"
    )
    return RunError(RunErrorKind.FORMATTER_MISSING, message, path=style.config_file, install=style.install)


def _apply(
    base: Path, catalog: Catalog, selection: Selection, options: ApplyOptions, styling: formatting.Styling | None
) -> RunResult:
    selected = frozenset(p.id for p in catalog.points if selection.wants(p))
    jobs = [f for f in catalog.files if any(p.file == f and p.id in selected for p in catalog.points)]
    manifest = Manifest.load(base)
    newer = releases.newer_writer(base, catalog, manifest)
    if newer is not None:  # nothing is analysed: this release's view of the tree is out of date
        return RunResult(str(base), (), error=newer, verl_version=verl_version(base))
    found = runtime.inspect(base, catalog, manifest)
    refused = runtime.refusal(found)
    if refused is not None:
        # not the tool's place to install into: nothing is analysed, nothing written
        return RunResult(
            str(base),
            (),
            runtime_files=tuple(found),
            error=refused,
            verl_version=verl_version(base),
            validated_on=catalog.validated_on,
        )
    runtime_plan = runtime.plan_install(base, catalog, found)
    state = runtime.state_for_points([p.file for p in runtime_plan])
    context = _ApplyRun(catalog, manifest, state, options.update, styling, options.plan_only)
    outcomes = _run_jobs(base, context, selected, {path: frozenset() for path in jobs})
    outcomes = _settle_across_files(base, context, selected, outcomes)
    outcomes = {path: _refuse_unwritable(base, outcome) for path, outcome in outcomes.items()}
    files = _marked(_requirements_put_back([outcome.result for outcome in outcomes.values()], catalog), catalog)
    # the instrumented code imports the runtime package: it comes along with any point in place; asked
    # for alone (its facility) only when no file failed, so that --keep-going never leaves a package
    # without the points that need it (a read-only tree: nothing at all)
    placed = any(p.status.in_place for f in files for p in f.points)
    needs_runtime = placed or (selection.wants_runtime and not any(f.error for f in files))
    runtime_plan = runtime_plan if needs_runtime else []
    result = RunResult(
        str(base),
        tuple(files),
        runtime_files=tuple(p.file for p in runtime_plan),
        verl_version=verl_version(base),
        validated_on=catalog.validated_on,
        style=styling.style if styling is not None else None,
        formatter_mismatch=formatting.mismatch(styling.style) if styling is not None else None,
    )
    if options.plan_only or (any(f.error for f in files) and not options.keep_going):
        return result
    blocked = _runtime_place_unwritable(base, catalog, runtime_plan) if options.write else None
    if blocked is not None:  # the points would import a package that cannot be installed: write nothing
        return replace(result, error=blocked)
    # the runtime package first: never an instrumented file importing a package not there yet
    writes = [p.write for p in runtime_plan if p.write is not None]
    writes += [PendingWrite(o.result.path, o.data, o.before) for o in outcomes.values() if o.data is not None]
    manifest_write = _manifest_write(base, catalog, manifest, outcomes, runtime_plan, writes)
    if manifest_write is not None and unfinished.manifest_lost(base) and unfinished.instrumented(result.points):
        manifest_write = _as_clean_apply(base, catalog, selection, manifest_write, outcomes, runtime_plan, styling)
    if manifest_write is not None:
        writes.append(manifest_write)
    # a killed run's staged copies go last (those next to a file written now went when it was staged)
    writes += [PendingWrite(path, None, kind=ChangeKind.LEFTOVER) for path in unfinished.leftovers(base, catalog)]
    return commit(base, result, writes, write=options.write)


def _as_clean_apply(
    base: Path,
    catalog: Catalog,
    selection: Selection,
    planned: PendingWrite,
    outcomes: dict[str, _Outcome],
    runtime_plan: list[runtime.RuntimePlan],
    styling: formatting.Styling | None = None,
) -> PendingWrite:
    """A lost manifest of an instrumented tree (a run killed before writing it): what a clean apply
    records for the tree this run leaves, when one gives it back exactly; else the `planned` one
    (what can be told from the tree: no originals of the rewrites, no imports apply added)."""
    after: dict[str, bytes | None] = {}
    for path, outcome in outcomes.items():
        after[path] = outcome.data if outcome.data is not None else _bytes(base / path)
    for plan in runtime_plan:
        write = plan.write
        after[plan.file.path] = write.data if write is not None else _bytes(base / plan.file.path)
    clean = clean_manifest(base, catalog, selection, after, styling)
    return planned if clean is None else replace(planned, data=clean)


def _bytes(path: Path) -> bytes | None:
    return path.read_bytes() if path.is_file() else None


def _manifest_write(
    base: Path,
    catalog: Catalog,
    manifest: Manifest,
    outcomes: dict[str, _Outcome],
    runtime_plan: list[runtime.RuntimePlan],
    writes: list[PendingWrite],
) -> PendingWrite | None:
    """The manifest after this run, when it differs (a lost or outdated one is written again)."""
    ok = [o for o in outcomes.values() if o.result.error is None]
    in_place = [catalog.point(p.point_id) for o in ok for p in o.result.points if p.status.in_place]
    if not writes and not in_place:
        return None
    baselines = {o.result.path: o.baseline for o in ok if o.baseline is not None}
    imports = {o.result.path: o.added_imports for o in ok if o.added_imports}
    replaced = {point: records for o in ok for point, records in o.replaced.items()}
    installed = _runtime_record(catalog, manifest, runtime_plan) or None
    updated = manifest.updated(
        in_place, gone=[], baselines=baselines, imports=imports, runtime=installed, replaced=replaced
    )
    tool = f"trace-instrument {__version__}"
    # an older release's manifest is written again, to say which release the tree now holds
    return updated.write(tool) if updated != manifest or manifest.outdated(tool) else None


def _runtime_record(catalog: Catalog, manifest: Manifest, plans: list[runtime.RuntimePlan]) -> dict[str, str]:
    """The manifest's record of the runtime files apply installed: each file as shipped after this run,
    and, for one edited by hand since, the record of what apply installed (it stays the tool's)."""
    states = {plan.file.path: plan.file.status for plan in plans}
    record = {}
    for name, content in catalog.runtime.files:
        status = states.get(f"{catalog.runtime.target_dir}/{name}")
        if status is not None and status.ok:
            record[name] = runtime.digest(content)
        elif status is RuntimeStatus.DRIFTED and name in manifest.runtime:
            record[name] = manifest.runtime[name]
    return record


def _marked(files: list[FileResult], catalog: Catalog) -> list[FileResult]:
    """Each result of a point an override re-anchors marked with that override (and port's grade,
    when port wrote it): a dry run's review shows which hunks come from overrides."""
    overridden = {p.id: p.overridden for p in catalog.points if p.overridden is not None}
    if not overridden:
        return files
    return [
        replace(f, points=tuple(replace(p, overridden=overridden.get(p.point_id)) for p in f.points)) for f in files
    ]


def _requirements_put_back(files: list[FileResult], catalog: Catalog) -> list[FileResult]:
    """A point in place whose required point this run placed could not run before (check called it
    broken): it is reported repaired, naming the requirement."""
    placed = {p.point_id for f in files for p in f.points if p.status is Status.APPLIED}
    requires = {p.id: p.requires for p in catalog.points}

    def mark(result: PointResult) -> PointResult:
        back = [r for r in requires.get(result.point_id, ()) if r in placed]
        if result.status is not Status.PRESENT or not back:
            return result
        message = f"runs again: {', '.join(back)} put back in this run"
        return replace(result, status=Status.REPAIRED, message=message, reason=Reason.REQUIREMENT)

    return [replace(f, points=tuple(mark(p) for p in f.points)) for f in files]


@dataclass(frozen=True)
class _ApplyRun:
    """What every file job needs (inherited by forked workers)."""

    catalog: Catalog
    manifest: Manifest
    runtime: runtime.RuntimeState  # the package as it will be after this run
    update: bool
    styling: formatting.Styling | None = None  # the checkout's formatter writes the inserted code
    plan_only: bool = False  # ApplyOptions.plan_only


@dataclass(frozen=True)
class _Outcome:
    result: FileResult
    data: bytes | None = None  # the new bytes, when the file changes
    before: bytes | None = None  # the bytes they replace (refused if the file changes meanwhile)
    baseline: Business | None = None  # the file's business code, for the manifest
    added_imports: tuple[str, ...] = ()  # plain imports this run added, for the manifest
    replaced: dict[str, Replacements] = field(default_factory=dict)  # originals of the rewrites, for the manifest


def _run_jobs(
    base: Path, context: _ApplyRun, selected: frozenset[str], jobs: dict[str, frozenset[str]]
) -> dict[str, _Outcome]:
    """Each file's apply, on several cores when there are enough files; in catalog order."""
    items = [(str(base), path, selected, excluded) for path, excluded in jobs.items()]
    weights = [file_size(base / path) for path in jobs]
    results = map_in_order(_file_job, items, weights, context)
    return dict(zip(jobs, results))


def _file_job(context: _ApplyRun, item: tuple[str, str, frozenset[str], frozenset[str]]) -> _Outcome:
    """One file's apply; whatever goes wrong becomes that file's error, never the run's crash."""
    root, relative, selected, excluded = item
    points = [p for p in context.catalog.points if p.file == relative and p.id in selected]
    return one_file(
        relative, points, lambda: _apply_to_file(context, Path(root), relative, selected, excluded), _Outcome
    )


def _runtime_place_unwritable(base: Path, catalog: Catalog, plans: list[runtime.RuntimePlan]) -> RunError | None:
    """The run's error when the runtime package has files to create where nothing can be created."""
    if not any(plan.write is not None for plan in plans):
        return None
    why = unwritable_folder(base, catalog.runtime.target_dir)
    return RunError(RunErrorKind.WRITE_FAILED, f"nothing written: {why}") if why else None


def _refuse_unwritable(base: Path, outcome: _Outcome) -> _Outcome:
    """A file that would change but cannot be written is that file's error, found before writing."""
    if outcome.data is None:
        return outcome
    why = unwritable(base, outcome.result.path)
    if why is None:
        return outcome
    results = tuple(
        replace(p, status=Status.SKIPPED, message=why, reason=Reason.FILE_PROBLEM) if p.status is Status.APPLIED else p
        for p in outcome.result.points
    )
    error = FileError(FileProblemKind.READ_ONLY, why)
    return _Outcome(replace(outcome.result, points=results, updated=None, error=error))


# -- one file ----------------------------------------------------------------------------------------


@dataclass(eq=False)
class _PointPlan:
    """What this run does to one point."""

    assessment: Assessment
    status: Status  # what it will be after the run
    message: str = ""
    reason: Reason | None = None
    context: tuple[ContextIssue, ...] = ()  # CONTEXT_CHANGED found in the output

    @property
    def point(self) -> Point:
        return self.assessment.point

    @property
    def inserts(self) -> bool:
        return self.status in (Status.APPLIED, Status.UPDATED)


def _apply_to_file(
    context: _ApplyRun, base: Path, relative: str, selected: frozenset[str], excluded: frozenset[str]
) -> _Outcome:
    disk = analyse(base, relative, context.catalog, manifest=context.manifest)
    points = [p for p in context.catalog.points if p.file == relative and p.id in selected]
    if isinstance(disk, FileProblem):
        return _Outcome(problem_results(disk, points))
    work, updating = (disk, set()) if not context.update else _without_stale(base, disk, points, context)
    plans = _plan_file(work, points, context, updating, excluded, selected)
    if context.plan_only:
        return _Outcome(FileResult(work.path, tuple(_result(p) for p in plans), original=disk.text))
    return _edit_file(work, plans, context, disk)


def _without_stale(base: Path, disk: FileWork, points: list[Point], context: _ApplyRun) -> tuple[FileWork, set[str]]:
    """The file with the code of stale points taken out, in memory (apply --update puts today's in)."""
    assessor = FileAssessor(disk, context.manifest, context.runtime)
    stale = [a for a in (assessor.assess(p) for p in points) if a.status is Status.STALE and a.stale is not None]
    if not stale:
        return disk, set()
    blocks = [block for a in stale if a.stale is not None for block in a.stale.blocks]
    in_place = {*context.manifest.points, *(p.id for p in disk.points if disk.state(p).blocks)}
    originals = for_removal(context.manifest, blocks, in_place, {a.point.id for a in stale})
    module = edit_module(parse_file(disk.source.data), disk.tree, removals=blocks, originals=originals)
    data = module.code.encode(encoding_of(disk.source.data))
    fresh = analyse(base, disk.path, context.catalog, data, manifest=context.manifest)
    if isinstance(fresh, FileProblem):
        raise EditError(f"taking out the older code left a file that does not parse: {fresh.message}")
    return fresh, {a.point.id for a in stale}


def _plan_file(
    work: FileWork,
    points: list[Point],
    context: _ApplyRun,
    updating: set[str],
    excluded: frozenset[str],
    selected: frozenset[str],
) -> list[_PointPlan]:
    assessor = FileAssessor(work, context.manifest, context.runtime)
    plans = [_plan_point(assessor.assess(point), updating) for point in points]
    for plan in plans:
        if plan.point.id in excluded and plan.inserts:
            _skip(plan, excluded_reason(plan.point, selected), Reason.REQUIREMENT)
    _refuse_overlaps(plans)
    _settle_dependencies(plans, selected)
    return plans


def _plan_point(assessment: Assessment, updating: set[str]) -> _PointPlan:
    result = assessment.result
    if result.status is Status.MISSING:
        status = Status.UPDATED if assessment.point.id in updating else Status.APPLIED
        return _PointPlan(assessment, status)
    if result.status is Status.BROKEN and may_be_repaired(assessment):
        # tried: the edit adds the missing imports, and the output's names are checked again; a point
        # whose names still do not resolve (none of this run's points binds them) goes back to broken
        imports = ", ".join(f"`{i.expected}`" for i in _import_repairs(assessment))
        unbound = ", ".join(f"'{i.name}'" for i in result.names if i.problem is Reason.UNBOUND_NAME)
        message = "; ".join(
            part
            for part in (f"added {imports}" if imports else "", f"{unbound} defined again" if unbound else "")
            if part
        )
        return _PointPlan(
            assessment, Status.REPAIRED, message, Reason.MISSING_IMPORT if imports else Reason.REQUIREMENT
        )
    if result.status is Status.STALE:
        message = "applied with an older template; left alone (`trace-instrument apply --update` refreshes it)"
        return _PointPlan(assessment, Status.STALE, message, result.reason)
    if result.status in (Status.DRIFTED, Status.MOVED):
        return _PointPlan(assessment, result.status, result.message + "; left alone", result.reason)
    return _PointPlan(assessment, result.status, result.message, result.reason)


def _import_repairs(assessment: Assessment) -> list[NameIssue]:
    return [i for i in assessment.result.names if i.problem is Reason.MISSING_IMPORT]


def _skip(plan: _PointPlan, message: str, reason: Reason) -> None:
    plan.status, plan.message, plan.reason = Status.SKIPPED, message, reason


def _settle_dependencies(plans: list[_PointPlan], selected: frozenset[str]) -> None:
    """A point whose required point is not in place is not applied either.

    Requirements in other files count as met here when selected; the caller
    checks them once every file is done.
    """
    by_id = {plan.point.id: plan for plan in plans}
    changed = True
    while changed:
        changed = False
        for plan in by_id.values():
            if not plan.inserts:
                continue
            for required in plan.point.requires:
                other = by_id.get(required)
                if other is None and required in selected:
                    continue  # another file's point: settled by the caller
                if other is not None and (other.status.in_place or other.inserts):
                    continue
                why = "not selected" if other is None else other.status.value
                reason = Reason.NOT_SELECTED if other is None else Reason.REQUIREMENT
                _skip(plan, f"requires {required} ({why})", reason)
                changed = True
                break


def _refuse_overlaps(plans: list[_PointPlan]) -> None:
    """Two edits that would rewrite the same statement: neither is made."""
    inserting = {plan.point.id: plan for plan in plans if plan.inserts}
    for point_id, (rival, line) in overlaps(plan.assessment for plan in inserting.values()).items():
        plan = inserting[point_id]
        plan.status, plan.reason, plan.message = Status.AMBIGUOUS, Reason.OVERLAP, overlap_message(rival, line)


# -- editing ------------------------------------------------------------------------------------------


class _NotRunnable(Exception):
    """Points placed in the output whose names do not resolve as they should, or whose code may not
    run where it must (`contexts`)."""

    def __init__(self, offenders: dict[str, list[NameIssue]], contexts: dict[str, list[ContextIssue]]):
        super().__init__(", ".join([*offenders, *contexts]))
        self.offenders = offenders
        self.contexts = contexts


class _UnrecognisableEdit(Exception):
    """The edited file does not read back as what was put in (a catalog bug, never the user's)."""


def _edit_file(work: FileWork, plans: list[_PointPlan], context: _ApplyRun, disk: FileWork) -> _Outcome:
    """The file with the planned points in place (refusing any whose names would not resolve).

    `work` is what the edits are made on: the file on disk (`disk`), or it with stale code taken out.
    """
    while True:
        try:
            return _edit_once(work, plans, context, disk)
        except _NotRunnable as exc:
            for plan in plans:
                issues = exc.offenders.get(plan.point.id)
                contexts = exc.contexts.get(plan.point.id)
                if (issues or contexts) and plan.status is Status.REPAIRED:
                    plan.status, plan.message, plan.reason = Status.BROKEN, "", None  # as found: broken
                if issues and plan.inserts:
                    plan.status, plan.reason = Status.REFUSED, issues[0].problem
                    plan.message = f"{issues[0].problem.value}: " + "; ".join(dict.fromkeys(str(i) for i in issues))
                elif contexts and plan.inserts:
                    refused = context_changed(plan.point, contexts, placed=False)
                    plan.status, plan.reason, plan.message = refused.status, refused.reason, refused.message
                    plan.context = refused.context


def _edit_once(work: FileWork, plans: list[_PointPlan], context: _ApplyRun, disk: FileWork) -> _Outcome:
    catalog = context.catalog
    original = disk.text
    inserting = [p for p in plans if p.inserts]
    repairing = [p for p in plans if p.status is Status.REPAIRED]
    if not inserting and not repairing and work is disk:
        results = tuple(_result(p) for p in plans)
        in_place = any(r.status.in_place for r in results)
        baseline = business_record(work.locator.recognition, work.tree, catalog) if in_place else None
        return _Outcome(FileResult(work.path, results, original=original), baseline=baseline)
    placements = [pl for p in inserting for pl in p.assessment.placements]
    names = frozenset(n for p in inserting for n in p.point.tracing_names)
    names |= frozenset(
        i.name for p in repairing for i in _import_repairs(p.assessment) if i.expected.startswith("from verl")
    )
    extra_imports = tuple(dict.fromkeys([*(i for p in inserting for i in p.point.imports), *_plain_repairs(repairing)]))
    try:
        layout = context.styling.layout(work.path) if context.styling is not None else None
        imports = ImportChanges(names, extra_imports, restyle=formatting.import_restyler(layout))
        updated, measures = _edited_text(work, placements, imports, context.manifest, layout)
        extents = {**context.manifest.extents, **placed_extents(placements, work.locator)}
        checked = _check_output(work, updated, inserting, repairing, business_baseline(work, catalog), catalog, extents)
        baseline, tree, locator = checked
        replaced = _records(work, measures, updated, tree, locator, placements) if measures else {}
    except (EditError, PairingError, cst.ParserSyntaxError, SyntaxError, _UnrecognisableEdit) as exc:
        results = tuple(
            point_result(p.point, Status.ERROR, line=p.assessment.result.line, message=f"not applied: {exc}")
            if p.inserts or p.status is Status.REPAIRED
            else _result(p)
            for p in plans
        )
        error = FileError(FileProblemKind.EDIT_FAILED, f"edit failed: {exc}")
        return _Outcome(FileResult(work.path, results, original=original, error=error))
    results = tuple(_result(p) for p in plans)
    try:
        data = updated.encode(encoding_of(work.source.data))
    except UnicodeEncodeError as exc:
        error = FileError(FileProblemKind.ENCODING, f"cannot encode the result in the file's declared encoding: {exc}")
        return _Outcome(FileResult(work.path, results, original=original, error=error))
    result = FileResult(work.path, results, original=original, updated=updated)
    return _Outcome(result, data, disk.source.data, baseline, _new_imports(disk, extra_imports), replaced)


def _edited_text(
    work: FileWork,
    placements: list[Placement],
    imports: ImportChanges,
    manifest: Manifest,
    layout: formatting.Layout | None = None,
) -> tuple[str, _Measures | None]:
    """The file's text with the placements made and the imports added, and (when the manifest is
    to record replaced regions) what measuring them needs.

    Only the statements the placements touch are parsed and printed when the file allows it;
    the whole module is when it does not, or when records of regions this run leaves in place
    are to be brought up to date.
    """
    _format_at_once(layout, work, placements, imports)
    refresh = any(p.id in manifest.replaced for p in work.points)
    records = refresh or any(records_edit(p.edit) for p in placements)
    if not refresh and chunks.ENABLED:
        index = work.locator.index
        edit = chunks.edit_by_chunks(work.text, work.tree, index, placements, imports, measured=records, layout=layout)
        if edit is not None:
            measured = edit.module()  # the chunks' indentation and line break: what regions are measured with
            return edit.text, _Measures(manifest, measured, measured, edit) if records else None
    module = parse_file(work.source.data)
    edited = edit_module(module, work.tree, placements, imports=imports, layout=layout)
    return edited.code, _Measures(manifest, module, edited) if records else None


def _format_at_once(
    layout: formatting.Layout | None, work: FileWork, placements: list[Placement], imports: ImportChanges
) -> None:
    """Every template the file's placements put in, and its new tracing import line, through the
    checkout's formatter in one run (the chunks then find them formatted)."""
    if layout is None:
        return
    lines = split_lines(work.text)
    try:
        unit = chunks.file_indent(work.tree, lines)
    except chunks.Unsuitable:
        unit = chunks.LIBCST_DEFAULT_INDENT  # (tabs: nothing is formatted at those places)
    wanted = templates_at(placements, lines)
    if imports.tracing_names:
        wanted.append((formatting.import_template(render_from_import(TRACING_MODULE, imports.tracing_names)), ""))
    formatting.prepare(layout, wanted, unit)


@dataclass(frozen=True)
class _Measures:
    """What the records of replaced regions are measured with: the whole file before and after
    the edit as LibCST parsed and changed it, or the chunks it was edited in."""

    manifest: Manifest
    before: cst.Module
    after: cst.Module
    chunked: chunks.ChunkedEdit | None = None


def _records(
    work: FileWork,
    measures: _Measures,
    updated: str,
    tree: ast.Module,
    locator: FileLocator,
    placements: list[Placement],
) -> dict[str, Replacements]:
    """What the manifest records of the regions this run replaced (and of those it changed)."""
    chunked = measures.chunked
    before_pairs = chunked.before if chunked is not None else None
    after_pairs = chunked.after_mapping(tree) if chunked is not None else None
    # (LibCST prints the source back as it was: the text is the module's)
    before = FileText(measures.before, work.tree, work.locator, work.text, before_pairs)
    after = FileText(measures.after, tree, locator, updated, after_pairs)
    return recorded(before, after, work.points, placements, measures.manifest)


def _plain_repairs(repairing: list[_PointPlan]) -> list[str]:
    return [
        i.expected for p in repairing for i in _import_repairs(p.assessment) if not i.expected.startswith("from verl.")
    ]


def _result(plan: _PointPlan) -> PointResult:
    base = plan.assessment.result
    if plan.status is base.status and not plan.message:
        return base
    line = base.line
    inserted: tuple[int, ...] = ()
    if plan.inserts and plan.assessment.placements:
        line = min(p.line for p in plan.assessment.placements)
        inserted = tuple(_follows(p) for p in plan.assessment.placements)
    # what the assessment found stays (names, candidates, the failing edits ...); the run decides the rest
    return replace(
        base,
        status=plan.status,
        line=line,
        message=plan.message,
        reason=plan.reason,
        context=plan.context or base.context,
        insert_lines=inserted,
    )


def _follows(placement: Placement) -> int:
    """The line of the file as read that an edit's code follows (a diff's hunk holds it as context)."""
    neighbor = placement.neighbor
    if placement.region:
        return placement.region[0].lineno - 1
    if neighbor is None:
        return max(placement.line - 1, 0)
    return (neighbor.end_lineno or neighbor.lineno) if placement.after else neighbor.lineno - 1


def _new_imports(work: FileWork, wanted: tuple[str, ...]) -> tuple[str, ...]:
    """The plain imports this run needs that the file did not have (so remove may take them)."""
    bound: set[str] = set()
    for node in work.tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update(alias.asname or alias.name.split(".")[0] for alias in node.names)
    new = []
    for text in wanted:
        stmt = ast.parse(text).body[0]
        assert isinstance(stmt, (ast.Import, ast.ImportFrom))
        if not {a.asname or a.name.split(".")[0] for a in stmt.names} <= bound:
            new.append(text)
    return tuple(new)


def _check_output(
    work: FileWork,
    updated: str,
    inserting: list[_PointPlan],
    repairing: list[_PointPlan],
    before: tuple[str, ...],
    catalog: Catalog,
    extents: Extents,
) -> tuple[Business, ast.Module, FileLocator]:
    """The output must parse, every point placed or repaired must be recognised in it and able to run,
    and its business code must be the input's but for the rewrites the catalog declares.

    Returns the record of the output's business code (the baseline a later verify compares with), its
    ast and its points as recognised (the bodies rewrites captured where `extents` says).
    """
    tree = ast.parse(updated, filename=work.path)
    # only the points found edited by hand in the input can carry markers in the output
    touched = frozenset(p.id for p in work.points if work.state(p).marker_nodes)
    helpers = work.locator.recognition.helper_names
    # what apply placed now is the tool's code, whatever the manifest said before
    placed = frozenset(p.point.id for p in [*inserting, *repairing])
    unrecognisable = work.locator.recognition.unrecognisable - placed
    locator = FileLocator(
        tree, work.points, helpers, updated, markers_for=touched, extents=extents, unrecognisable=unrecognisable
    )
    for plan in inserting:
        if not locator.state(plan.point).complete:
            raise _UnrecognisableEdit(f"point {plan.point.id} is not recognisable after insertion (catalog bug)")
    # (the attributes the classes set are the input's: judged when the points were planned)
    names = PointNames(NameTable(tree, source=updated), locator.recognition, work.relations, None)
    running = [p.point for p in [*inserting, *repairing]]
    checks = names.checks(work.points, focus=frozenset(p.id for p in running))
    offenders = {p.id: names.issues(p) + checks.name_issues(p) for p in running}
    offenders = {point_id: issues for point_id, issues in offenders.items() if issues}
    contexts = {p.id: checks.context_issues(p) for p in running}
    contexts = {point_id: issues for point_id, issues in contexts.items() if issues}
    if offenders or contexts:
        raise _NotRunnable(offenders, contexts)
    declared = declared_removals(locator.recognition)
    found = business_fingerprints(locator.recognition, added_imports(catalog))
    after = tuple(f for f, _ in found)
    if [f for f in after if f not in declared] != [f for f in before if f not in declared]:
        raise _UnrecognisableEdit("the edit would change business code beyond the declared rewrites (catalog bug)")
    return recorded_business(found, tree), tree, locator


# -- across files -----------------------------------------------------------------------------------------


def _settle_across_files(
    base: Path, context: _ApplyRun, selected: frozenset[str], outcomes: dict[str, _Outcome]
) -> dict[str, _Outcome]:
    """Redo the files whose points need a point another file could not place (rare)."""
    catalog = context.catalog
    while True:
        status = {p.point_id: p.status for o in outcomes.values() for p in o.result.points}
        redo: dict[str, set[str]] = {}
        for outcome in outcomes.values():
            for result in outcome.result.points:
                point = catalog.point(result.point_id)
                inserted = result.status in (Status.APPLIED, Status.UPDATED)
                if inserted and any(r in status and not status[r].in_place for r in point.requires):
                    redo.setdefault(point.file, set()).add(point.id)
        if not redo:
            return outcomes
        for path, ids in redo.items():
            previous = {p.point_id for p in outcomes[path].result.points if p.status is Status.SKIPPED}
            outcomes[path] = _run_jobs(base, context, selected, {path: frozenset(ids | previous)})[path]


def clean_manifest(
    base: Path,
    catalog: Catalog,
    selection: Selection,
    after: dict[str, bytes | None],
    styling: formatting.Styling | None = None,
) -> bytes | None:
    """The manifest a clean apply of `selection` records for the tree a run leaves (`after`: the
    bytes of each file it may write once it is done; None: absent), or None when no clean apply
    gives back exactly that tree (a hand edit remove keeps, a point outside the selection).
    `styling`: the checkout's formatting (the scratch copy holds no configuration of its own)."""
    with tempfile.TemporaryDirectory(prefix="trace-instrument-recover-") as scratch:
        root = Path(scratch)
        shutil.copytree(base / "verl", root / "verl", symlinks=True, ignore=_not_code)
        removed = remove(root, catalog)
        if removed.error is not None or any(p.status is Status.KEPT for p in removed.points):
            return None
        applied = apply(root, catalog, selection, styling=styling)
        if applied.error is not None or not (root / MANIFEST_NAME).is_file():
            return None
        for relative, data in after.items():
            path = root / relative
            if (path.read_bytes() if path.is_file() else None) != data:
                return None
        return (root / MANIFEST_NAME).read_bytes()


def _not_code(folder: str, names: list[str]) -> set[str]:
    """What the scratch copy leaves out: all but Python sources, folders and verl's version file."""
    here = Path(folder)
    return {
        name
        for name in names
        if not name.endswith(".py")
        and not (here / name).is_dir()
        and not (here.name == "version" and name == "version")
    }
