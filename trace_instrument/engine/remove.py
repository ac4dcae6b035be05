"""remove: take every selected point out again, restoring the original bytes."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import libcst as cst

from trace_instrument import __version__
from trace_instrument.edit.cstmap import PairingError
from trace_instrument.edit.imports import ImportChanges, prune_imports
from trace_instrument.edit.transform import EditError, edit_module
from trace_instrument.engine import runtime
from trace_instrument.engine.analysis import FileProblem, FileWork, analyse, decode, encoding_of
from trace_instrument.engine.common import (
    commit,
    drift_message,
    file_size,
    internal_error,
    locked,
    names_used,
    point_result,
    problem_results,
)
from trace_instrument.engine.files import CheckoutError, PendingWrite, checkout_root
from trace_instrument.engine.manifest import MANIFEST_NAME, Manifest
from trace_instrument.engine.parallel import SHARED, map_in_order
from trace_instrument.locate import Block
from trace_instrument.model import Catalog, FileResult, Point, RunResult, Selection, Status


def remove(
    root: str | Path,
    catalog: Catalog,
    selection: Selection = Selection(),
    *,
    write: bool = True,
    force: bool = False,
) -> RunResult:
    try:
        base = checkout_root(root)
        with locked(base, write):
            return _remove(base, catalog, selection, write, force)
    except CheckoutError as exc:
        return RunResult(str(root), (), error=str(exc))


def _remove(base: Path, catalog: Catalog, selection: Selection, write: bool, force: bool) -> RunResult:
    selection = _with_all_extras(selection, catalog)
    selected = frozenset(p.id for p in catalog.points if selection.wants(p))
    paths = [f for f in catalog.files if any(p.file == f and p.id in selected for p in catalog.points)]
    manifest = Manifest.load(base)
    # the plain imports apply added, as the manifest recorded them (without one: the catalog's)
    added = {path: manifest.imports.get(path) for path in paths}
    items = [(str(base), path, selected, force, added[path]) for path in paths]
    weights = [file_size(base / path) for path in paths]
    outcomes: list[_Removal] = map_in_order(_file_job, items, weights, {"catalog": catalog})
    files = [o.result for o in outcomes]
    kept = [p for f in files for p in f.points if p.status is Status.DRIFTED]
    runtime_plan = []
    if selection.wants_runtime:
        runtime_plan = runtime.plan_remove(base, catalog, force=force)
        still_used = kept or any(o.others_remain for o in outcomes) or _imported_elsewhere(base, catalog, set(paths))
        edited = [w.path.rsplit("/", 1)[-1] for w, status in runtime_plan if status == "drifted"]
        if still_used:
            runtime_plan = [(w, "kept: instrumented code still imports it") for w, _ in runtime_plan]
        elif edited:
            # half a package is worse than none removed: keep it whole, and say why
            runtime_plan = [
                (w, f"kept: {', '.join(edited)} edited by hand (--force removes it)") for w, _ in runtime_plan
            ]
    result = RunResult(str(base), tuple(files), runtime_files=tuple((w.path, s) for w, s in runtime_plan))
    if any(f.error for f in files):
        return result
    writes = [PendingWrite(o.result.path, o.data, o.before) for o in outcomes if o.data is not None]
    writes += [w for w, status in runtime_plan if status == "removed"]
    gone = [p.point_id for f in files for p in f.points if p.status is Status.REMOVED]
    updated = manifest.updated([], gone=gone, baselines={})
    if updated != manifest or (not updated.points and (base / MANIFEST_NAME).exists()):
        writes.append(updated.write(f"trace-instrument {__version__}"))
    return commit(base, result, writes, write=write)


def _imported_elsewhere(base: Path, catalog: Catalog, handled: set[str]) -> bool:
    """Does a catalog file this run did not touch still import the runtime package?"""
    needle = catalog.runtime.target_dir.replace("/", ".").encode()
    for path in catalog.files:
        if path not in handled and (base / path).is_file() and needle in (base / path).read_bytes():
            return True
    return False


@dataclass(frozen=True)
class _Removal:
    result: FileResult
    data: bytes | None = None  # the new bytes, when the file changes
    before: bytes | None = None  # the bytes they replace
    others_remain: bool = False  # points outside the selection are still in this file


def _file_job(item: tuple[str, str, frozenset[str], bool, tuple[str, ...] | None]) -> _Removal:
    """One file's removal; whatever goes wrong becomes that file's error, never the run's crash."""
    try:
        return _remove_from_file(*item)
    except Exception as exc:  # noqa: BLE001 - contain it to the file
        catalog: Catalog = SHARED["catalog"]
        points = [p for p in catalog.points if p.file == item[1] and p.id in item[2]]
        return _Removal(internal_error(item[1], points, exc))


def _remove_from_file(
    root: str, relative: str, selected: frozenset[str], force: bool, added: tuple[str, ...] | None
) -> _Removal:
    catalog: Catalog = SHARED["catalog"]
    work = analyse(Path(root), relative, catalog)
    points = [p for p in catalog.points if p.file == relative and p.id in selected]
    if isinstance(work, FileProblem):
        return _Removal(problem_results(work, points))
    result = _remove_in_file(work, points, force, added)
    others = any(p.id not in selected and not work.state(p).untouched for p in work.points)
    if not result.changed or result.error:
        return _Removal(result, None, None, others)
    try:
        data = result.updated.encode(encoding_of(work.source.data))
    except UnicodeEncodeError as exc:
        failed = FileResult(
            result.path, result.points, original=result.original, error=f"cannot encode in the file's encoding: {exc}"
        )
        return _Removal(failed)
    return _Removal(result, data, work.source.data, others)


def _with_all_extras(selection: Selection, catalog: Catalog) -> Selection:
    """Removal covers the opt-in extras too: they were only ever there because someone asked."""
    from dataclasses import replace

    extras = frozenset(p.extra for p in catalog.points if p.extra)
    return replace(selection, extras=selection.extras | extras) if not selection.only else selection


def _remove_in_file(
    work: FileWork | FileProblem, points: list[Point], force: bool, added: tuple[str, ...] | None
) -> FileResult:
    if isinstance(work, FileProblem):
        return problem_results(work, points)
    original = decode(work.source.data)
    results = []
    blocks: list[Block] = []
    for point in points:
        state = work.state(point)
        if state.untouched:
            results.append(point_result(point, Status.MISSING, message="not present"))
        elif state.complete or force:
            blocks.extend(state.blocks)
            blocks.extend(_marker_blocks(point, state) if force else [])
            results.append(point_result(point, Status.REMOVED, line=state.line))
        else:
            message = drift_message(state) + "; left alone (--force removes what is recognised)"
            results.append(point_result(point, Status.DRIFTED, line=state.line, message=message))
    if not blocks:
        return FileResult(work.path, tuple(results), original=original)
    try:
        updated = _without(work, blocks, added)
    except (EditError, PairingError, cst.ParserSyntaxError, SyntaxError) as exc:
        by_id = {p.id: p for p in points}
        failed = tuple(
            point_result(by_id[r.point_id], Status.ERROR, line=r.line, message=f"not removed: {exc}")
            if r.status is Status.REMOVED
            else r
            for r in results
        )
        return FileResult(work.path, failed, original=original, error=f"removal failed: {exc}")
    return FileResult(work.path, tuple(results), original=original, updated=updated)


def _marker_blocks(point: Point, state) -> list[Block]:
    """With --force: the statements that still carry the point's markers."""
    insert_edit = next((e for e in point.edits if e.kind.inserts), None)
    if insert_edit is None:
        return []
    return [Block(point, insert_edit, [node], [node], exact=False) for node in state.marker_nodes]


def _without(work: FileWork, blocks: list[Block], added: tuple[str, ...] | None) -> str:
    module = cst.parse_module(work.source.data)
    edited = edit_module(module, work.tree, removals=blocks)
    code = edited.code
    tree = ast.parse(code, filename=work.path)  # must still be Python
    prunable = added if added is not None else tuple(dict.fromkeys(i for p in work.points for i in p.imports))
    changes = ImportChanges(prune=True, prunable=prunable, still_used=names_used(tree))
    return prune_imports(edited, changes).code
