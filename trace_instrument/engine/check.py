"""check: the CI drift check. Reads, never writes; one status per point."""

from __future__ import annotations

import ast
import difflib
import textwrap
from pathlib import Path

from trace_instrument.engine import runtime
from trace_instrument.engine.analysis import FileProblem, FileWork
from trace_instrument.engine.common import drift_message, is_stale, point_result, problem_results, selected_files
from trace_instrument.engine.files import CheckoutError, checkout_root
from trace_instrument.engine.manifest import Manifest
from trace_instrument.locate import AnchorFailure
from trace_instrument.model import Catalog, FileResult, Point, PointResult, RunResult, Selection, Status
from trace_instrument.spec.signatures import signatures_in

TRACING_WORDS = (b"trace_flow(", b"log_progress(", b"log_step_window(", b"TurnRecord(", b"log_gen_throughput")


def check(root: str | Path, catalog: Catalog, selection: Selection = Selection()) -> RunResult:
    try:
        base = checkout_root(root)
    except CheckoutError as exc:
        return RunResult(str(root), (), error=str(exc))
    manifest = Manifest.load(base)
    files: list[FileResult] = []
    seen: set[str] = set()
    for work, points in selected_files(base, catalog, selection):
        seen.add(work.path)
        if isinstance(work, FileProblem):
            files.append(problem_results(work, points))
            continue
        results = [_status(work, point, manifest) for point in points]
        results += _unexpected(work, catalog)
        files.append(FileResult(work.path, tuple(results)))
    files += _unexpected_elsewhere(base, catalog, seen)
    needs_runtime = selection.wants_runtime or any(p.status is Status.PRESENT for f in files for p in f.points)
    runtime_status = runtime.plan_install(base, catalog) if needs_runtime else []
    runtime_files = tuple((w.path, "missing" if s == "created" else s) for w, s in runtime_status)
    return RunResult(str(base), tuple(files), runtime_files=runtime_files)


def _status(work: FileWork, point: Point, manifest: Manifest) -> PointResult:
    state = work.state(point)
    if state.complete:
        return point_result(point, Status.PRESENT, line=state.line)
    if state.untouched:
        failures = [work.locator.place(point, edit) for edit in point.edits]
        failure = next((f for f in failures if isinstance(f, AnchorFailure)), None)
        if failure is not None:
            return point_result(
                point, failure.status, line=failure.line, message=failure.message, candidates=failure.candidates
            )
        line = min(f.line for f in failures)
        return point_result(point, Status.MISSING, line=line, message="not applied; `apply` would add it here")
    if is_stale(work, point, manifest):
        return point_result(
            point,
            Status.STALE,
            line=state.line,
            message="applied with an older template; `remove` then `apply` to update",
        )
    return point_result(
        point, Status.DRIFTED, line=state.line, message=drift_message(state), diff=_drift_diff(work, point, state)
    )


def _drift_diff(work: FileWork, point: Point, state) -> str:
    """Template against what stands in the file where the point's code is."""
    nodes = [n for n in state.marker_nodes if hasattr(n, "lineno")]
    if not nodes:
        return ""
    source = work.source.data.decode("utf-8", errors="replace").splitlines()
    first = min(n.lineno for n in nodes)
    last = max(getattr(n, "end_lineno", n.lineno) for n in nodes)
    actual = textwrap.dedent("\n".join(source[first - 1 : last])).splitlines()
    expected = "\n".join(edit.template.text.rstrip() for edit in point.edits).splitlines()
    diff = difflib.unified_diff(expected, actual, f"template ({point.id})", f"{work.path}:{first}", lineterm="")
    return "\n".join(diff)


# -- tracing code nobody accounts for ---------------------------------------------------


def _unexpected(work: FileWork, catalog: Catalog) -> list[PointResult]:
    accounted: set[int] = set()
    for point in work.points:
        state = work.state(point)
        for block in state.blocks:
            for stmt in block.instrumentation or block.top:
                accounted.update(id(n) for n in ast.walk(stmt))
        for node in state.marker_nodes:
            accounted.update(id(n) for n in ast.walk(node))
    results = []
    for signature, node in signatures_in(work.tree.body, catalog.helpers):
        if id(node) not in accounted and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            results.append(_unexpected_result(work.path, node, signature))
    return results


def _unexpected_elsewhere(root: Path, catalog: Catalog, seen: set[str]) -> list[FileResult]:
    """Tracing calls in files no point targets (the runtime package itself excepted)."""
    files = []
    skip = {*seen, *catalog.files}
    runtime_dir = root / catalog.runtime.target_dir
    for path in sorted((root / "verl").rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        if relative in skip or path.is_relative_to(runtime_dir):
            continue
        try:
            data = path.read_bytes()
            if not any(word in data for word in TRACING_WORDS):
                continue
            tree = ast.parse(data)
        except (OSError, SyntaxError, ValueError):
            continue
        found = [_unexpected_result(relative, n, s) for s, n in signatures_in(tree.body, catalog.helpers)]
        if found:
            files.append(FileResult(relative, tuple(found)))
    return files


def _unexpected_result(path: str, node: ast.AST, signature: str) -> PointResult:
    return PointResult(
        "unexpected",
        "",
        path,
        Status.UNEXPECTED,
        line=getattr(node, "lineno", 0),
        message=f"tracing code no catalog point accounts for: {signature}",
    )
