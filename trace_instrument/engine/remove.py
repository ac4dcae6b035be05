"""remove: take the selected points out again, restoring the original bytes; never break the code.

A point edited by hand is kept (and reported) unless `force`, which takes out
whole hand-edited blocks or nothing. A removal that would leave a name the
remaining code reads unbound is refused for the points whose code binds it.
The runtime package goes only when no Python file in the checkout imports it
any more; points the manifest records but the catalog does not know are
reported with the command that removes them, and kept.
"""

from __future__ import annotations

import ast
import bisect
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

import libcst as cst

from trace_instrument import __version__
from trace_instrument.edit import chunks
from trace_instrument.edit.cstmap import PairingError
from trace_instrument.edit.imports import ImportChanges, prune_imports
from trace_instrument.edit.modules import parse_file
from trace_instrument.edit.regions import Original
from trace_instrument.edit.transform import EditError, edit_module
from trace_instrument.engine import releases, runtime, unfinished
from trace_instrument.engine.analysis import FileProblem, FileWork, analyse, encoding_of
from trace_instrument.engine.assess import drift_message, stale_state, unbounded_message
from trace_instrument.engine.check import unexpected_calls, unexpected_elsewhere
from trace_instrument.engine.files import CheckoutError, PendingWrite, checkout_root, commit, locked
from trace_instrument.engine.manifest import MANIFEST_NAME, Manifest, Replacements
from trace_instrument.engine.originals import FileText, before_apply, for_removal, records_edit, refreshed
from trace_instrument.engine.ownership import OURS
from trace_instrument.engine.parallel import file_size, map_in_order
from trace_instrument.engine.results import one_file, point_result, problem_results
from trace_instrument.engine.versions import verl_version
from trace_instrument.locate import Block, FileLocator, PointState
from trace_instrument.locate.handedits import nested_in_template, whole_block
from trace_instrument.locate.names import BUILTINS, NameTable, one_line
from trace_instrument.model import (
    TRACING_MODULE,
    Catalog,
    ChangeKind,
    FileError,
    FileProblemKind,
    FileResult,
    Point,
    PointResult,
    Reason,
    RunResult,
    RuntimeStatus,
    Selection,
    Status,
)
from trace_instrument.spec.code import first_line


def remove(
    root: str | Path,
    catalog: Catalog,
    selection: Selection = Selection(),
    *,
    write: bool = True,
    force: bool = False,
    keep_going: bool = False,
) -> RunResult:
    """Take the selected points (and, when nothing imports it any more, the runtime package) out.

    A file that fails stops every write, unless `keep_going`: then the other files are written
    (the runtime package stays while a failed file may still import it).
    """
    try:
        base = checkout_root(root)
        with locked(base, write):
            return _remove(base, catalog, selection, write, force, keep_going)
    except CheckoutError as exc:
        return RunResult(str(root), (), error=exc.as_run_error())


@dataclass(frozen=True)
class _RemoveRun:
    catalog: Catalog
    manifest: Manifest
    force: bool


def _remove(
    base: Path, catalog: Catalog, selection: Selection, write: bool, force: bool, keep_going: bool
) -> RunResult:
    selection = _with_all_extras(selection, catalog)
    selected = frozenset(p.id for p in catalog.points if selection.wants(p))
    paths = [f for f in catalog.files if any(p.file == f and p.id in selected for p in catalog.points)]
    manifest = Manifest.load(base)
    newer = releases.newer_writer(base, catalog, manifest)
    if newer is not None:  # its points and runtime may be ones this release does not know
        return RunResult(str(base), (), error=newer, verl_version=verl_version(base))
    context = _RemoveRun(catalog, manifest, force)
    items = [(str(base), path, selected, ()) for path in paths]
    outcomes: list[_Removal] = map_in_order(_file_job, items, [file_size(base / p) for p in paths], context)
    outcomes = _held_for_dependants(base, context, selected, paths, outcomes)
    files = [o.result for o in outcomes]
    unknown = _unknown_points(manifest, catalog, selection)
    if unknown:
        files.append(FileResult(MANIFEST_NAME, tuple(unknown)))
    runtime_plan: list[runtime.RuntimePlan] = []
    if selection.wants_runtime:
        leaving = {o.result.path: o.result.updated for o in outcomes if o.data is not None}
        found = runtime.inspect(base, catalog, manifest)
        ours = frozenset(f.path for f in found if f.status in OURS)
        users = runtime.importers(base, catalog, leaving, ours)
        runtime_plan = runtime.plan_remove(catalog, found, users, force)
        elsewhere = unexpected_elsewhere(base, catalog, set(paths))
        files += [
            replace(f, points=tuple(replace(p, message=p.message + LEFT_BEHIND) for p in f.points)) for f in elsewhere
        ]
    result = RunResult(
        str(base),
        tuple(files),
        runtime_files=tuple(p.file for p in runtime_plan),
        verl_version=verl_version(base),
        validated_on=catalog.validated_on,
    )
    if any(f.error for f in files) and not keep_going:
        return result
    # the code first, the package it imports last: never code importing a package already gone
    writes = [PendingWrite(o.result.path, o.data, o.before) for o in outcomes if o.data is not None]
    writes += [p.write for p in runtime_plan if p.write is not None]
    # a point found absent goes out of the manifest too (an earlier run was killed after its renames)
    gone = [p.point_id for f in files for p in f.points if p.status in (Status.REMOVED, Status.MISSING)]
    runtime_gone = any(p.file.status is RuntimeStatus.REMOVED for p in runtime_plan)
    replaced = {point: records for o in outcomes if o.data is not None for point, records in o.replaced.items()}
    updated = manifest.updated([], gone=gone, baselines={}, runtime={} if runtime_gone else None, replaced=replaced)
    if updated != manifest or (not updated.points and (base / MANIFEST_NAME).exists()):
        writes.append(updated.write(f"trace-instrument {__version__}"))
    # a killed run's staged copies go too (those next to a file written now went when it was staged)
    writes += [PendingWrite(path, None, kind=ChangeKind.LEFTOVER) for path in unfinished.leftovers(base, catalog)]
    return commit(base, result, writes, write=write)


def _held_for_dependants(
    base: Path, context: _RemoveRun, selected: frozenset[str], paths: list[str], outcomes: list[_Removal]
) -> list[_Removal]:
    """A point whose code a point that stays requires (C1 calls the tracker C0 sets up) stays too:
    its files are done again with it kept, naming who needs it, until nothing more is held."""
    held: dict[str, str] = {}
    by_path = dict(zip(paths, outcomes))
    while True:
        status = {p.point_id: p.status for o in by_path.values() for p in o.result.points}
        newly = {
            required: _held_message(point, context.catalog.point(required), status.get(point.id))
            for point in context.catalog.points
            if _stays(point, selected, status, context.manifest)
            for required in point.requires
            if required not in held and status.get(required) is Status.REMOVED
        }
        if not newly:
            return [by_path[p] for p in paths]
        held.update(newly)
        redo = sorted({context.catalog.point(i).file for i in newly})
        pairs = tuple(sorted(held.items()))
        items = [(str(base), path, selected, pairs) for path in redo]
        for path, outcome in zip(redo, map_in_order(_file_job, items, [file_size(base / p) for p in redo], context)):
            by_path[path] = outcome


def _stays(point: Point, selected: frozenset[str], status: dict[str, Status], manifest: Manifest) -> bool:
    """Does the point's code stay in the checkout after this run? (kept or failed, or placed and
    not selected)"""
    if point.id in selected:
        return status.get(point.id) in (Status.KEPT, Status.ERROR)
    return point.id in manifest.points


def _held_message(dependant: Point, point: Point, state: Status | None) -> str:
    reads = "its code reads what this point sets up"
    if state in (Status.KEPT, Status.ERROR):
        return f"kept: {dependant.id} stays ({state.value}) and requires it ({reads}); it goes when that point goes"
    together = f"--only {point.id} --only {dependant.id}"
    return f"kept: {dependant.id} stays (not selected) and requires it ({reads}); remove them together: {together}"


def _unknown_points(manifest: Manifest, catalog: Catalog, selection: Selection) -> list[PointResult]:
    """Points the manifest says apply placed that this catalog does not know (say, user anchors)."""
    if selection.only:
        return []
    known = {p.id for p in catalog.points}
    results = []
    for point_id, (file, _templates) in sorted(manifest.points.items()):
        if point_id in known:
            continue
        message = (
            "applied with anchors this run was not given; kept. "
            "`trace-instrument remove --anchors DIR` with the folder of its spec removes it"
        )
        results.append(PointResult(point_id, "", file, Status.KEPT, message=message, reason=Reason.UNKNOWN_POINT))
    return results


def _with_all_extras(selection: Selection, catalog: Catalog) -> Selection:
    """Removal covers the opt-in extras too: they were only ever there because someone asked."""
    extras = frozenset(p.extra for p in catalog.points if p.extra)
    return replace(selection, extras=selection.extras | extras) if not selection.only else selection


# -- one file ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Removal:
    result: FileResult
    data: bytes | None = None  # the new bytes, when the file changes
    before: bytes | None = None  # the bytes they replace
    replaced: dict[str, Replacements] = field(default_factory=dict)  # records of the points left, brought up to date


def _file_job(context: _RemoveRun, item: tuple[str, str, frozenset[str], tuple[tuple[str, str], ...]]) -> _Removal:
    """One file's removal; whatever goes wrong becomes that file's error, never the run's crash.
    (`held`: points kept for a point that stays, with the reason.)"""
    root, relative, selected, held = item
    points = [p for p in context.catalog.points if p.file == relative and p.id in selected]
    return one_file(
        relative, points, lambda: _remove_from_file(context, Path(root), relative, selected, dict(held)), _Removal
    )


def _remove_from_file(
    context: _RemoveRun, base: Path, relative: str, selected: frozenset[str], held: dict[str, str]
) -> _Removal:
    work = analyse(base, relative, context.catalog, manifest=context.manifest)
    points = [p for p in context.catalog.points if p.file == relative and p.id in selected]
    if isinstance(work, FileProblem):
        return _Removal(problem_results(work, points))
    plans = {point.id: _plan(work, point, context) for point in points}
    for point_id, message in held.items():
        if point_id in plans and plans[point_id].blocks:
            plans[point_id].keep(Reason.REQUIRED_BY, message)
    added = context.manifest.imports.get(relative)
    in_place = {p for p, (f, _) in context.manifest.points.items() if f == relative}
    in_place |= {p.id for p in work.points if work.state(p).blocks}
    while True:
        taking = [p for p in plans.values() if p.blocks]
        if not taking:
            results = (*(p.result for p in plans.values()), *_left_behind(work, context, plans))
            return _Removal(FileResult(work.path, results, original=work.text))
        blocks = [b for p in taking for b in p.blocks]
        originals = for_removal(context.manifest, blocks, in_place, {p.point.id for p in taking})
        try:
            output = _without(work, blocks, added, originals, before_apply(context.manifest, blocks))
        except (EditError, PairingError, cst.ParserSyntaxError, SyntaxError) as exc:
            return _Removal(_failed(work, plans, exc))
        breaking = _would_break(work, output, taking)
        for plan, lost in breaking.items():
            plan.keep(Reason.WOULD_BREAK, _breaking_message(plan, lost))
        moving = [] if breaking else _would_move(work, output, taking, context.manifest)
        for plan, moved in moving:
            together = " ".join(f"--only {i}" for i in [plan.point.id, *moved])
            message = (
                f"kept: taking its rewrite out would leave {', '.join(moved)} out of place (their code sits "
                f"next to the code it replaced); remove them together: {together}"
            )
            plan.keep(Reason.WOULD_BREAK, message)
        if not breaking and not moving:
            break
    results = (*(p.result for p in plans.values()), *_left_behind(work, context, plans))
    updated = output.text
    try:
        data = updated.encode(encoding_of(work.source.data))
    except UnicodeEncodeError as exc:
        error = FileError(FileProblemKind.ENCODING, f"cannot encode in the file's encoding: {exc}")
        return _Removal(FileResult(work.path, results, original=work.text, error=error))
    leaving = {p.point.id for p in plans.values() if p.blocks}
    replaced = _records_left(work, output, leaving, context.manifest)
    result = FileResult(work.path, results, original=work.text, updated=updated)
    return _Removal(result, data, work.source.data, replaced)


def _records_left(work: FileWork, output: _Output, leaving: set[str], manifest: Manifest) -> dict[str, Replacements]:
    """The records of the points that stay, brought up to date where their region changed."""
    kept = [p for p in work.points if p.id not in leaving and p.id in manifest.replaced]
    if not kept:
        return {}
    tree, updated = output.tree, output.text
    helpers = work.locator.recognition.helper_names
    before = FileText(parse_file(work.source.data), work.tree, work.locator, work.text)
    locator = FileLocator(
        tree,
        work.points,
        helpers,
        updated,
        extents=manifest.extents,
        unrecognisable=work.locator.recognition.unrecognisable,
    )
    after = FileText(parse_file(updated), tree, locator, updated)
    return refreshed(before, after, kept, work.points, manifest)


@dataclass(eq=False)
class _PointRemoval:
    point: Point
    result: PointResult
    blocks: list[Block]
    stale: PointState | None = None  # its code as an older template made it, when that is what is there

    def keep(self, reason: Reason, message: str) -> None:
        self.result = point_result(self.point, Status.KEPT, line=self.result.line, message=message, reason=reason)
        self.blocks = []


def _plan(work: FileWork, point: Point, context: _RemoveRun) -> _PointRemoval:
    state = work.state(point)
    unbounded = next((b for b in state.blocks if b.unbounded), None)
    if unbounded is not None:  # putting the block back would guess which statements go inside it
        message = (
            f"{unbounded_message(unbounded)}; kept (even with --force): put the body's statements back "
            "as apply left them, or take the point out by hand"
        )
        result = point_result(point, Status.KEPT, line=unbounded.line, message=message, reason=Reason.EDITED_BY_HAND)
        return _PointRemoval(point, result, [])
    if state.complete:
        return _PointRemoval(point, point_result(point, Status.REMOVED, line=state.line), list(state.blocks))
    stale = stale_state(work, point, context.manifest)  # (a reworded one-line point is all stale)
    if stale is not None:
        return _PointRemoval(point, point_result(point, Status.REMOVED, line=stale.line), list(stale.blocks), stale)
    if state.untouched:
        return _PointRemoval(point, point_result(point, Status.MISSING, message="not present"), [])
    if not state.marker_nodes:
        # partly there (the other edits lost, say in a merge) but nothing edited by hand: its exact blocks go
        return _PointRemoval(point, point_result(point, Status.REMOVED, line=state.line), list(state.blocks))
    if context.force:
        rewrites = [run for run in state.edited if records_edit(run.edit)]
        if not rewrites:
            forced = _forced_blocks(work, point)
            if isinstance(forced, str):
                message = f"{drift_message(state)}; kept: {forced}"
                result = point_result(
                    point, Status.KEPT, line=state.line, message=message, reason=Reason.EDITED_BY_HAND
                )
                return _PointRemoval(point, result, [])
            return _PointRemoval(point, point_result(point, Status.REMOVED, line=state.line), forced)
        first = min(s.lineno for run in rewrites for s in run.stmts)
        last = max(s.end_lineno or s.lineno for run in rewrites for s in run.stmts)
        message = (
            f"{drift_message(state)}; kept: --force takes hand-edited inserted code out whole, not a hand-edited "
            f"{rewrites[0].edit.kind.value} (lines {first}-{last}): where its region begins and ends is not known; "
            "put the template's code back there (or the code it replaced) and run remove again"
        )
        result = point_result(point, Status.KEPT, line=state.line, message=message, reason=Reason.EDITED_BY_HAND)
        return _PointRemoval(point, result, [])
    message = drift_message(state) + "; kept (--force removes its hand-edited blocks whole)"
    result = point_result(point, Status.KEPT, line=state.line, message=message, reason=Reason.EDITED_BY_HAND)
    return _PointRemoval(point, result, [])


LEFT_BEHIND = (
    "; remove leaves it (no point's code): take it out by hand, or anchor a point on it with an "
    "override (`docs/anchors.md`) so that remove takes it out"
)


def _left_behind(work: FileWork, context: _RemoveRun, plans: dict[str, _PointRemoval]) -> list[PointResult]:
    """Tracing calls no point accounts for (say, a block the fork moved into a helper of its own):
    remove cannot take them out, and says where they are. (An older template's code is its point's.)"""
    stale = [
        s
        for p in work.points
        if (s := plans[p.id].stale if p.id in plans else stale_state(work, p, context.manifest)) is not None
    ]
    return [replace(r, message=r.message + LEFT_BEHIND) for r in unexpected_calls(work, context.catalog, stale)]


def _forced_blocks(work: FileWork, point: Point) -> list[Block] | str:
    """The point's blocks found intact, and each hand-edited block whole; the fork's lines inside
    a block stay where they stand (inside one of the template's own blocks, an `if` or a loop:
    where that block stood). Or why not (a hand-edited run inside a block of the template that is
    not the template's any more: taking the run alone out would leave the rest of its code)."""
    state = work.state(point)
    blocks = list(state.blocks)
    others = _others_code(work, point)
    for edited in state.edited:
        if nested_in_template(edited):
            whole = whole_block(work.locator.index, edited, others)
            if whole is None:
                return (
                    f"--force would take out lines {edited.first_line}-{edited.last_line} of its code alone: the "
                    "block around them is not the template's any more (its header or shape edited); put it back "
                    "as the template has it, or take the point's code out by hand"
                )
            blocks.append(Block(point, edited.edit, [whole.top], [whole.top], exact=False, kept=whole.foreign))
            continue
        for stmts in edited.fragments:  # the fork's lines inside a block stay
            blocks.append(Block(point, edited.edit, stmts, stmts, exact=False))
    return blocks


def _others_code(work: FileWork, point: Point) -> frozenset[int]:
    """Ids of the statements of the file's other points (found intact or edited by hand)."""
    found: set[int] = set()
    for other in work.points:
        if other.id == point.id:
            continue
        state = work.state(other)
        found.update(id(s) for block in state.blocks for s in (*block.top, *block.instrumentation))
        found.update(id(s) for run in state.edited for s in run.own)
    return frozenset(found)


def _failed(work: FileWork, plans: dict[str, _PointRemoval], exc: Exception) -> FileResult:
    results = tuple(
        point_result(p.point, Status.ERROR, line=p.result.line, message=f"not removed: {exc}")
        if p.result.status is Status.REMOVED
        else p.result
        for p in plans.values()
    )
    return FileResult(
        work.path, results, original=work.text, error=FileError(FileProblemKind.EDIT_FAILED, f"removal failed: {exc}")
    )


@dataclass
class _Output:
    """The text a removal gives, its ast parsed only when asked for (a long file's second ast is
    most of the memory a removal would need), and which of some names its code still reads."""

    text: str
    path: str
    _tree: ast.Module | None = None

    @property
    def tree(self) -> ast.Module:
        if self._tree is None:
            self._tree = ast.parse(self.text, filename=self.path)
        return self._tree


def _without(
    work: FileWork,
    blocks: list[Block],
    added: tuple[str, ...] | None,
    originals: dict[Block, Original],
    headers: dict[Block, str] | None = None,
) -> _Output:
    """The file's text with the blocks taken out (the originals recorded for them put back where
    the file still holds what apply made) and the imports only they needed pruned.

    Only the statements around the blocks, and the import block, are parsed and printed with
    LibCST when the file allows it (`edit/chunks.py`); else the whole module is, with the same result.
    """
    prunable = added if added is not None else tuple(dict.fromkeys(i for p in work.points for i in p.imports))
    chunked = (
        chunks.edit_by_chunks(
            work.text,
            work.tree,
            work.locator.index,
            (),
            ImportChanges(),
            removals=blocks,
            originals=originals,
            headers=headers,
        )
        if chunks.ENABLED
        else None
    )
    if chunked is None:
        module = edit_module(
            parse_file(work.source.data),
            work.tree,
            removals=blocks,
            originals=originals,
            text=work.text,
            headers=headers,
        )
        output = _Output(module.code, work.path)
        used = frozenset(node.id for node in ast.walk(output.tree) if isinstance(node, ast.Name))  # must parse
        used |= _exported(work.tree)
        return _pruned(output, ImportChanges(prune=True, prunable=prunable, still_used=used), module)
    output = _Output(chunked.text, work.path)
    candidates = _import_names(work.tree, prunable)
    used = _still_read(work, chunked.pieces, candidates) | (_exported(work.tree) & candidates)
    changes = ImportChanges(prune=True, prunable=prunable, still_used=used)
    touched_first = min((piece.span[0] for piece in chunked.pieces), default=len(work.text))
    pruned = chunks.prune_by_head(output.text, work.tree, changes, before_line=touched_first)
    if pruned is None:
        return _pruned(output, changes, None)
    return _Output(pruned, work.path)


def _pruned(output: _Output, changes: ImportChanges, module: cst.Module | None) -> _Output:
    """The output with the imports pruned, the whole module parsed with LibCST."""
    pruned = prune_imports(module if module is not None else parse_file(output.text), changes).code
    return output if pruned == output.text else _Output(pruned, output.path)


def _exported(tree: ast.Module) -> frozenset[str]:
    """The names the module's `__all__` lists: `from module import *` needs them bound (an import
    of one is still used)."""
    names: set[str] = set()
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        value = getattr(node, "value", None)
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets) and isinstance(
            value, (ast.List, ast.Tuple)
        ):
            names.update(e.value for e in value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str))
    return frozenset(names)


def _import_names(tree: ast.Module, prunable: tuple[str, ...]) -> frozenset[str]:
    """The names that pruning could take imports of away: the tracing names the module imports,
    and those of the imports apply added."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == TRACING_MODULE:
            names.update(alias.asname or alias.name for alias in node.names)
    for text in prunable:
        for node in ast.parse(text).body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names.update(alias.asname or alias.name.split(".")[0] for alias in node.names)
    return frozenset(names)


def _still_read(work: FileWork, pieces: list[chunks.Piece], names: frozenset[str]) -> frozenset[str]:
    """Which of `names` the code after a chunked removal still names: in the chunks as edited
    (parsed, which also proves they are still Python), and elsewhere on the input's lines that
    say them (those lines are unchanged, so the input's ast tells)."""
    read: set[str] = set()
    for piece in pieces:
        tree = ast.parse(piece.prefix + piece.text, filename=work.path)
        read.update(n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id in names)
    spans = [piece.span for piece in pieces]
    for name in names - read:
        lines = [
            line
            for line in work.locator.index.lines_with((name,))
            if not any(start <= line <= end for start, end in spans)
        ]
        if lines and _read_on(work.tree, name, lines):
            read.add(name)
    return frozenset(read)


def _read_on(tree: ast.Module, name: str, lines: list[int]) -> bool:
    """Is `name` there as a name (not an import's, an attribute's or a keyword's) on one of the
    (sorted) lines? Only the nodes around those lines are visited."""
    wanted = frozenset(lines)
    pending: list[ast.AST] = list(tree.body)
    while pending:
        node = pending.pop()
        first = getattr(node, "lineno", None)
        if first is not None and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            first = first_line(node)  # its decorators are above its `def` line
        if first is not None:
            at = bisect.bisect_left(lines, first)
            if at == len(lines) or lines[at] > (getattr(node, "end_lineno", None) or first):
                continue  # none of the lines is in it
        if isinstance(node, ast.Name) and node.id == name and node.lineno in wanted:
            return True
        pending.extend(ast.iter_child_nodes(node))
    return False


def _would_move(
    work: FileWork, output: _Output, taking: list[_PointRemoval], manifest: Manifest
) -> list[tuple[_PointRemoval, list[str]]]:
    """The plans taking out a rewrite after which points that stay, in place before, would not be
    where their anchors put them (code of theirs next to the rewritten region stays outside the
    block the removal rebuilds), with those points."""
    rewriting = [plan for plan in taking if any(records_edit(b.edit) for b in plan.blocks)]
    leaving = {plan.point.id for plan in taking}
    staying = [p for p in work.points if p.id not in leaving and _in_place(work.locator, p)]
    if not rewriting or not staying:
        return []
    recognition = work.locator.recognition
    after = FileLocator(
        output.tree,
        work.points,
        recognition.helper_names,
        output.text,
        extents=manifest.extents,
        unrecognisable=recognition.unrecognisable,
    )
    moved = [p.id for p in staying if not _in_place(after, p)]
    return [(plan, moved) for plan in rewriting] if moved else []


def _in_place(locator: FileLocator, point: Point) -> bool:
    """Is all the point's code there, and where its anchors put it?"""
    state = locator.state(point)
    return state.complete and all(locator.finder.misplaced(point, block) is None for block in state.blocks)


def _would_break(work: FileWork, output: _Output, taking: list[_PointRemoval]) -> dict[_PointRemoval, set[str]]:
    """The plans whose removal takes away the binding of a name the remaining code still reads,
    with those names."""
    updated = output.text
    bound = {plan.point.id: _bound_by(plan) for plan in taking}
    # a name read after the removal is in its text: one the blocks bind and the text never says is lost to none
    said = {name for names in bound.values() for name in names if re.search(rf"\b{re.escape(name)}\b", updated)}
    if not said:
        return {}
    before = _unbound_reads(NameTable(work.tree, source=work.text))
    after = _unbound_reads(NameTable(output.tree, source=updated))
    lost = {name for name, _scope in after - before}
    return {plan: bound[plan.point.id] & lost for plan in taking if bound[plan.point.id] & lost}


def _breaking_message(plan: _PointRemoval, lost: set[str]) -> str:
    """Why a removal is refused: the code that stays reads what only the point binds; the fork's
    lines inside a block taken out by force, named when they are that code."""
    readers = [
        stmt
        for block in plan.blocks
        for stmt in block.kept
        if any(isinstance(n, ast.Name) and n.id in lost for n in ast.walk(stmt))
    ]
    if not readers:
        return "kept: the code that stays reads names only this point's code binds"
    lines = ", ".join(f"{s.lineno} (`{one_line(s, 60)}`)" for s in readers)
    names = ", ".join(f"'{n}'" for n in sorted(lost))
    which, reads, them = ("line", "reads", "it") if len(readers) == 1 else ("lines", "read", "them")
    return (
        f"kept: the fork's {which} {lines} inside its block {reads} {names}, which only the block binds; "
        f"move {them} out of the block (or delete {them}) and remove again"
    )


def _bound_by(plan: _PointRemoval) -> set[str]:
    """Names the plan's blocks bind in their scope and take away with them (assignments, loop
    targets, definitions, imports, match captures, `except ... as`): not the business code a rewrite keeps (its captured statements and
    bodies stay bound), nor names local to a comprehension, lambda or def inside the blocks."""
    names: set[str] = set()
    for block in plan.blocks:
        caps = block.captures
        kept = {id(s) for s in caps.statements.values()} if caps is not None else set()
        if caps is not None:
            kept.update(id(s) for body in caps.bodies.values() for s in body)
        kept.update(id(s) for s in block.kept)  # the fork's lines it leaves where it stood
        for stmt in block.top:
            if id(stmt) not in kept:
                names.update(_scope_bindings(stmt, kept))
    return names


def _scope_bindings(node: ast.AST, kept: set[int]) -> set[str]:
    """The names a statement binds in the scope it runs in (statements in `kept` left out)."""
    names: set[str] = set()
    pending: list[ast.AST] = [node]
    while pending:
        current = pending.pop()
        if isinstance(current, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(current.name)
            pending.extend([*current.decorator_list, *getattr(current, "bases", [])])
            continue  # what its body binds is its own
        if isinstance(current, ast.Lambda):
            continue  # what it binds is its own
        if isinstance(current, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            # its loop variables are its own; a walrus in it binds in the scope around it
            walrus = (n.target for n in ast.walk(current) if isinstance(n, ast.NamedExpr))
            names.update(t.id for t in walrus if isinstance(t, ast.Name))
            continue
        if isinstance(current, ast.Name) and not isinstance(current.ctx, ast.Load):
            names.add(current.id)
        elif isinstance(current, (ast.Import, ast.ImportFrom)):
            names.update(alias.asname or alias.name.split(".")[0] for alias in current.names if alias.name != "*")
        elif isinstance(current, (ast.MatchAs, ast.MatchStar)) and current.name is not None:
            names.add(current.name)
        elif isinstance(current, ast.MatchMapping) and current.rest is not None:
            names.add(current.rest)
        elif isinstance(current, ast.ExceptHandler) and current.name is not None:
            names.add(current.name)
        pending.extend(child for child in ast.iter_child_nodes(current) if id(child) not in kept)
    return names


def _unbound_reads(table: NameTable) -> set[tuple[str, str]]:
    """(name, scope) of every read that resolves to nothing (not even a builtin)."""
    unbound = set()
    for name, uses in table.uses.items():
        if name in BUILTINS:
            continue
        for use in uses:
            if not table.bindings_of(name, use.scope):
                unbound.add((name, use.scope.name))
    return unbound
