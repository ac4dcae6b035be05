"""Pieces every operation shares: selecting files, building results, writing all-or-nothing."""

from __future__ import annotations

import ast
import contextlib
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from trace_instrument.engine.analysis import FileProblem, FileWork, analyse
from trace_instrument.engine.files import CheckoutError, PendingWrite, checkout_lock, write_all
from trace_instrument.locate import FileLocator, PointState
from trace_instrument.locate.business import business_fingerprints
from trace_instrument.locate.match import canonical
from trace_instrument.model import Catalog, EditKind, FileResult, Point, PointResult, RunResult, Selection, Status
from trace_instrument.spec.code import CodeError, parse_template

if TYPE_CHECKING:
    from trace_instrument.engine.manifest import Manifest


def point_result(point: Point, status: Status, **details) -> PointResult:
    return PointResult(point.id, point.facility, point.file, status, **details)


def selected_files(
    root: Path, catalog: Catalog, selection: Selection
) -> Iterator[tuple[FileWork | FileProblem, list[Point]]]:
    """Each catalog file holding a selected point, analysed, with those points."""
    for relative in catalog.files:
        chosen = [p for p in catalog.points if p.file == relative and selection.wants(p)]
        if chosen:
            yield analyse(root, relative, catalog), chosen


def problem_results(work: FileProblem, points: list[Point]) -> FileResult:
    status = Status.NOT_APPLICABLE if work.missing else Status.SKIPPED
    results = tuple(point_result(p, status, message=work.message) for p in points)
    return FileResult(work.path, results, error="" if work.missing else work.message)


def internal_error(path: str, points: list[Point], exc: BaseException) -> FileResult:
    """A failure of the tool itself on one file, reported as that file's error."""
    message = f"internal error ({type(exc).__name__}: {exc}); please report it"
    return FileResult(path, tuple(point_result(p, Status.ERROR, message=message) for p in points), error=message)


def drift_message(state: PointState) -> str:
    present = len(state.blocks)
    total = present + len(state.absent)
    where = sorted({getattr(n, "lineno", 0) for n in state.marker_nodes} | {b.line for b in state.blocks})
    lines = ", ".join(str(line) for line in where if line)
    return f"present but edited by hand: {present} of {total} edits match the template (its code at lines {lines})"


def added_imports(catalog: Catalog) -> frozenset[str]:
    """Canonical forms of the plain imports catalog points add (instrumentation, not business)."""
    return frozenset(canonical(ast.parse(text).body[0]) for p in catalog.points for text in p.imports)


def business_baseline(work: FileWork, catalog: Catalog) -> tuple[str, ...]:
    """Fingerprints of a file's business code, for verify's zero-intrusion proof."""
    return tuple(f for f, _ in business_fingerprints(work.locator.recognition, added_imports(catalog)))


def file_size(path: Path) -> float:
    """Bytes in a file (0 when it cannot be read): how heavy its job is."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


def names_used(tree: ast.Module) -> frozenset[str]:
    """Names the code refers to outside import statements."""
    return frozenset(node.id for node in ast.walk(tree) if isinstance(node, ast.Name))


def other_changes(root: Path, writes: list[PendingWrite]) -> tuple[tuple[str, str | None, str | None], ...]:
    """(path, before, after) texts of writes that are not edits of target files."""
    changes = []
    for write in writes:
        target = root / write.path
        before = target.read_text(encoding="utf-8", errors="replace") if target.is_file() else None
        after = write.data.decode("utf-8", errors="replace") if write.data is not None else None
        if before != after:
            changes.append((write.path, before, after))
    return tuple(changes)


def commit(root: Path, result: RunResult, writes: list[PendingWrite], write: bool = True) -> RunResult:
    """Write the pending files (the caller holds the checkout lock); the result says what changed."""
    file_paths = {f.path for f in result.files}
    extra = other_changes(root, [w for w in writes if w.path not in file_paths])
    result = replace(result, other_changes=extra)
    if not write or not writes:
        return result
    try:
        write_all(root, writes)
    except (CheckoutError, OSError) as exc:
        return replace(result, written=False, error=f"nothing written: {exc}")
    return replace(result, written=True)


@contextlib.contextmanager
def locked(root: Path, write: bool) -> Iterator[None]:
    """Hold the checkout lock for a run that writes (a dry run needs none)."""
    if not write:
        yield
        return
    with checkout_lock(root):
        yield


def is_stale(work: FileWork, point: Point, manifest: Manifest) -> bool:
    """Is the point's code exactly what an older template of it produced (per the manifest)?"""
    texts = manifest.recorded(point)
    if texts is None or len(texts) != len(point.edits):
        return False
    try:
        edits = tuple(
            replace(
                edit, template=parse_template(edit.template.name, text, expression=edit.kind is EditKind.REPLACE_EXPR)
            )
            for edit, text in zip(point.edits, texts)
        )
    except CodeError:
        return False
    old = replace(point, edits=edits)
    others = [p for p in work.points if p.id != point.id]
    locator = FileLocator(work.tree, [*others, old], work.locator.recognition.helper_names)
    return locator.state(old).complete
