"""check: the CI gate. Reads, never writes; one status per point, plus the runtime package.

It fails whenever the instrumented code would fail or misbehave at run time: a
point counts as present only when its code is in place, where its anchor puts
it (business code that changes nothing it reads may stand between them), and
every name it uses means what it should (see engine.assess).
"""

from __future__ import annotations

import ast
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from trace_instrument.caches import PickleCache, digest, file_digest
from trace_instrument.engine import runtime, unfinished
from trace_instrument.engine.files import CheckoutError, checkout_root
from trace_instrument.engine.manifest import Manifest
from trace_instrument.engine.parallel import file_size, map_in_order
from trace_instrument.engine.results import excluded_reason, one_file, problem_results
from trace_instrument.engine.versions import verl_version
from trace_instrument.model import (
    CODE_ABSENT,
    TRACING_NAMES,
    Catalog,
    FileResult,
    Point,
    PointResult,
    Reason,
    RunResult,
    Selection,
    Status,
)
from trace_instrument.spec.signatures import signatures_in

if TYPE_CHECKING:
    from trace_instrument.engine.analysis import FileWork
    from trace_instrument.locate import PointState


def check(root: str | Path, catalog: Catalog, selection: Selection = Selection()) -> RunResult:
    """The state of every selected point and of the runtime package; nothing is written."""
    try:
        base = checkout_root(root)
        manifest = Manifest.load(base)
    except CheckoutError as exc:
        return RunResult(str(root), (), error=exc.as_run_error())
    runtime_files = runtime.inspect(base, catalog, manifest)
    runtime_state = runtime.state_for_points(runtime_files)
    selected = frozenset(p.id for p in catalog.points if selection.wants(p))
    paths = [f for f in catalog.files if any(p.file == f and p.id in selected for p in catalog.points)]
    context = _CheckRun(catalog, manifest, runtime_state, selected)
    elsewhere: list[FileResult] = []

    def search_elsewhere() -> None:  # while the catalog's files are analysed
        elsewhere.extend(unexpected_elsewhere(base, catalog, set(paths)))

    files = _file_results(context, base, paths, search_elsewhere)
    files = _requirements_met(files, catalog, selected) + elsewhere
    in_use = any(p.status is not Status.NOT_APPLICABLE and p.point_id != "unexpected" for f in files for p in f.points)
    shown = runtime_files if selection.wants_runtime or in_use else []
    return RunResult(
        str(base),
        tuple(files),
        runtime_files=tuple(shown),
        verl_version=verl_version(base),
        validated_on=catalog.validated_on,
        unfinished=unfinished.problems(base, catalog, files),
    )


@dataclass(frozen=True)
class _CheckRun:
    catalog: Catalog
    manifest: Manifest
    runtime: runtime.RuntimeState
    selected: frozenset[str]


_CACHE = PickleCache("check", limit=5000)


def _file_results(context: _CheckRun, base: Path, paths: list[str], meanwhile: Callable[[], None]) -> list[FileResult]:
    """Each file's result: from the cache when the file and all it is judged by are unchanged
    (a pre-commit run reads no more than that), the others analysed, in parallel, while this
    process runs `meanwhile`."""
    keys = [_cache_key(context, base, relative) for relative in paths]
    found = [_cached(base, key) for key in keys]
    misses = [i for i, result in enumerate(found) if not isinstance(result, FileResult)]
    if misses:
        _load_analysis()  # once, before the workers fork
        items = [(str(base), paths[i], keys[i]) for i in misses]
        weights = [file_size(base / paths[i]) for i in misses]
        fresh = map_in_order(_file_job, items, weights, context, meanwhile)
        for index, result in zip(misses, fresh):
            found[index] = result
    else:
        meanwhile()
    return [result for result in found if isinstance(result, FileResult)]


def _cache_key(context: _CheckRun, base: Path, relative: str) -> str | None:
    try:
        data = (base / relative).read_bytes()
    except OSError:
        return None
    if not context.catalog.digest:
        return None
    return _key(context, relative, _points_of(context, relative), data)


def _points_of(context: _CheckRun, relative: str) -> list[Point]:
    return [p for p in context.catalog.points if p.file == relative and p.id in context.selected]


def _load_analysis() -> None:
    """The analysis code (ast walks, anchors, names) loads only when some file needs it."""
    import trace_instrument.engine.assess  # noqa: F401


@dataclass(frozen=True)
class _Entry:
    """A file's cached result, and the other files it was judged with (relative path -> digest,
    "" for absent): the checkout modules holding the bases of its classes."""

    result: FileResult
    others: tuple[tuple[str, str], ...]


def _cached(base: Path, key: str | None) -> FileResult | None:
    """The cached result, while the other files it was judged with are as they were."""
    entry = _CACHE.get(key) if key is not None else None
    if not isinstance(entry, _Entry):
        return None
    for relative, digest_then in entry.others:
        try:
            now = file_digest((base / relative).read_bytes())
        except OSError:
            now = ""
        if now != digest_then:
            return None
    return entry.result


def _file_job(context: _CheckRun, item: tuple[str, str, str | None]) -> FileResult:
    """One file's check, put in the cache unless it failed."""
    root, relative, key = item
    points = _points_of(context, relative)
    failed: dict[str, str] = {}  # a failed file's result is never cached: it reads nothing else
    result, others = one_file(
        relative, points, lambda: _check_file(context, Path(root), relative, points), lambda r: (r, failed)
    )
    if key is not None and result.error is None and others is not failed:
        _CACHE.put(key, _Entry(result, tuple(sorted(others.items()))))
    return result


def _key(context: _CheckRun, relative: str, points: list[Point], data: bytes) -> str:
    """Everything a file's check depends on: its bytes, the catalog, the selection, what the
    manifest recorded for its points (stale detection) and the runtime package's state."""
    recorded = [repr(context.manifest.points.get(p.id)) for p in points]
    runtime_state = repr((context.runtime.complete, context.runtime.problem, context.runtime.repairable))
    return digest(context.catalog.digest, relative, data, *(p.id for p in points), *recorded, runtime_state)


def _check_file(
    context: _CheckRun, root: Path, relative: str, points: list[Point]
) -> tuple[FileResult, dict[str, str]]:
    """The file's result, and the other files read to judge it (path -> digest)."""
    from trace_instrument.engine.analysis import FileProblem, analyse
    from trace_instrument.engine.assess import FileAssessor, overlaps

    work = analyse(root, relative, context.catalog, manifest=context.manifest)
    if isinstance(work, FileProblem):
        return problem_results(work, points), {}
    assessor = FileAssessor(work, context.manifest, context.runtime)
    assessments = [assessor.assess(point) for point in points]
    # what apply would refuse among the points it would add: two rewriting the same statement
    clashing = overlaps(a for a in assessments if a.status is Status.MISSING)
    results = [_refused_overlap(a.result, clashing) for a in assessments]
    results += unexpected_calls(work, context.catalog, [a.stale for a in assessments if a.stale is not None])
    return FileResult(work.path, tuple(results)), dict(work.modules.read)


def _refused_overlap(result: PointResult, clashing: dict[str, tuple[str, int]]) -> PointResult:
    if result.point_id not in clashing:
        return result
    from trace_instrument.engine.assess import overlap_message

    message = overlap_message(*clashing[result.point_id])
    return replace(result, status=Status.AMBIGUOUS, reason=Reason.OVERLAP, message=message)


# -- requirements ----------------------------------------------------------------------

# A required point in one of these states is not put in place by apply either.
_NOT_PLACEABLE = frozenset(
    {
        Status.REFUSED,
        Status.CONTEXT_CHANGED,
        Status.ANCHOR_LOST,
        Status.AMBIGUOUS,
        Status.NOT_APPLICABLE,
        Status.SKIPPED,
        Status.ERROR,
    }
)

# A required point with no code in the checkout (CODE_ABSENT), or with code that may not run
# before the code that needs it
_NOT_RUNNING = CODE_ABSENT | {Status.CONTEXT_CHANGED}
# ... or has code that raises when it runs (an attribute nothing sets: apply cannot add it, and the
# code that requires it runs it, say a loop over a method the point defines)
_RAISES = frozenset({Reason.UNSET_ATTRIBUTE})


def _requirements_met(files: list[FileResult], catalog: Catalog, selected: frozenset[str]) -> list[FileResult]:
    """A present point whose required point has no code cannot run (C1 calls the tracker C0 sets
    up, in another method): it is broken, naming the requirement and how to put it back. A missing
    point whose required point apply cannot place is skipped, as apply reports it (chains too)."""
    requires = {p.id: p.requires for p in catalog.points}
    while True:
        settled = _skip_unplaceable(files, catalog, selected)
        if settled == files:
            break
        files = settled
    status = {p.point_id: p.status for f in files for p in f.points}
    failing = {p.point_id for f in files for p in f.points if p.status is Status.BROKEN and p.reason in _RAISES}

    def unmet(result: PointResult) -> PointResult:
        gone = [r for r in requires.get(result.point_id, ()) if status.get(r) in _NOT_RUNNING or r in failing]
        if result.status not in (Status.PRESENT, Status.BROKEN) or not gone:
            return result
        what = ", ".join(f"{r} ({status[r].value})" for r in gone)
        if all(status[r] is Status.CONTEXT_CHANGED for r in gone):
            why = "whose code may not run before this point's (see its status)"
        elif all(r in failing for r in gone):
            why = "whose code raises when it runs (see its status)"
        else:
            why = "whose code is not here; `trace-instrument apply` puts it back"
        if result.status is Status.BROKEN:  # already, by its names: say where they would come from
            return replace(result, message=f"{result.message}; it requires {what}, {why}")
        message = f"requires {what}, {why}"
        return replace(result, status=Status.BROKEN, message=message, reason=Reason.REQUIREMENT)

    return [replace(f, points=tuple(unmet(p) for p in f.points)) for f in files]


def _skip_unplaceable(files: list[FileResult], catalog: Catalog, selected: frozenset[str]) -> list[FileResult]:
    """One round: a missing point whose required point (in any file) apply cannot place is skipped."""
    status = {p.point_id: p.status for f in files for p in f.points}

    def skipped(result: PointResult) -> PointResult:
        if result.status is not Status.MISSING:
            return result
        point = catalog.point(result.point_id)
        if not any(status.get(r) in _NOT_PLACEABLE for r in point.requires):
            return result
        message = excluded_reason(point, selected)
        return replace(result, status=Status.SKIPPED, message=message, reason=Reason.REQUIREMENT)

    return [replace(f, points=tuple(skipped(p) for p in f.points)) for f in files]


# -- tracing code nobody accounts for ---------------------------------------------------


def unexpected_calls(work: FileWork, catalog: Catalog, stale: list[PointState]) -> list[PointResult]:
    """Tracing calls outside every point's code (an older template's code, `stale`, is a point's).
    A call belongs to the statement whose own lines hold it: it is accounted for when that
    statement, or one around it, is a point's."""
    accounted = {id(stmt) for state in stale for block in state.blocks for stmt in block.instrumentation or block.top}
    for point in work.points:
        state = work.state(point)
        for block in state.blocks:
            accounted.update(id(stmt) for stmt in block.instrumentation or block.top)
        if state.complete:
            continue  # its blocks hold all its code: a second copy of a marker is unexpected
        accounted.update(id(node) for node in state.marker_nodes)
        accounted.update(id(stmt) for run in state.edited for stmt in run.stmts)
    return [
        _unexpected_result(work.path, node, signature)
        for signature, node, site in work.locator.recognition.tracing_calls()
        if not any(id(s) in accounted for s in (site.node, *site.ancestors))
    ]


def unexpected_elsewhere(root: Path, catalog: Catalog, seen: set[str]) -> list[FileResult]:
    """Tracing calls in files no point targets (the runtime package itself excepted)."""
    # most of verl never names a tracing function: a few substring searches per file (a
    # regex alternation of the names is four times slower) decide which files are parsed
    needles = [f"{name}(".encode() for name in sorted(TRACING_NAMES)]
    files = []
    skip = {*seen, *catalog.files}
    runtime_dir = os.path.join(root, catalog.runtime.target_dir)
    for folder, subfolders, names in os.walk(root / "verl"):
        subfolders[:] = sorted(d for d in subfolders if os.path.join(folder, d) != runtime_dir)
        for name in sorted(n for n in names if n.endswith(".py")):
            path = os.path.join(folder, name)
            relative = os.path.relpath(path, root).replace(os.sep, "/")
            if relative in skip:
                continue
            try:
                with open(path, "rb") as handle:
                    data = handle.read()
                if not any(needle in data for needle in needles):
                    continue
                tree = ast.parse(data)
                found = [_unexpected_result(relative, n, s) for s, n in signatures_in(tree.body, catalog.helpers)]
            except (OSError, SyntaxError, ValueError, RecursionError):
                continue  # not a file of the catalog's: what cannot be read or walked is not searched
            if found:
                files.append(FileResult(relative, tuple(found)))
    return sorted(files, key=lambda f: f.path)


def _unexpected_result(path: str, node: ast.AST, signature: str) -> PointResult:
    return PointResult(
        "unexpected",
        "",
        path,
        Status.UNEXPECTED,
        line=getattr(node, "lineno", 0),
        message=f"tracing code no catalog point accounts for: {signature}",
    )
