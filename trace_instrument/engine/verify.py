"""verify: prove the instrumented checkout is right.

The checks: call-site counts per file against the catalog's expectation for
this checkout, every point of each facility in place, imports (each tracing
name imported once, where used), names (every point's names resolve as its
template means, and no added import rebinds a name the business code binds),
every touched file and the runtime package compiles, the zero-intrusion proof
(business code unchanged since the baseline but for declared rewrites), and a
runtime self-check run in a subprocess that validates what lands on disk.
"""

from __future__ import annotations

import ast
import collections
import difflib
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from trace_instrument.engine import runtime
from trace_instrument.engine.analysis import FileProblem, FileWork, analyse
from trace_instrument.engine.assess import context_sentences, unanchored_sentence
from trace_instrument.engine.baseline import Baseline, added_imports, baseline_from
from trace_instrument.engine.files import CheckoutError, checkout_root
from trace_instrument.engine.manifest import Business, Manifest, sequence_digest
from trace_instrument.engine.ownership import OURS
from trace_instrument.locate import AnchorFailure
from trace_instrument.locate.business import business_fingerprints, declared_removals
from trace_instrument.locate.runnable import rebinding_issues
from trace_instrument.model import (
    TRACING_MODULE,
    TRACING_NAMES,
    CallCount,
    Catalog,
    Check,
    Finding,
    Point,
    RuntimeStatus,
    Selection,
    VerifyResult,
)
from trace_instrument.selfcheck import runtime_self_check

COUNTED_CALLS = ("trace_flow", "log_progress")


def verify(
    root: str | Path, catalog: Catalog, selection: Selection = Selection(), *, baseline: str | Path | None = None
) -> VerifyResult:
    """Every proof for the checkout; `baseline` is a folder or git ref to prove zero intrusion against.

    The point proofs (in place, counts, names, control context) are about the selected points
    and the extras apply placed: an opt-in extra neither selected nor placed is never counted or
    verified (verl's own code that equals its code fails nothing). Every point's code stays
    tracing code for the zero-intrusion proof, as for the baseline apply recorded.
    """
    try:
        base = checkout_root(root)
        manifest = Manifest.load(base)
        start = baseline_from(baseline, base, manifest)
    except CheckoutError as exc:
        return VerifyResult(str(root), (), error=exc.as_run_error())
    wanted = frozenset(p.id for p in catalog.points if _wanted(p, selection, manifest))
    findings: list[Finding] = []
    counts: list[CallCount] = []
    facilities: collections.Counter[tuple[str, str]] = collections.Counter()
    for relative in catalog.files:
        work = analyse(base, relative, catalog, manifest=manifest)
        if isinstance(work, FileProblem):
            if not work.missing:
                findings.append(Finding(Check.COMPILE, relative, False, work.message))
            continue
        expected_points = [p for p in work.points if p.id in wanted and _expected_here(work, p)]  # searched once
        file_counts = _counts(work, expected_points)
        counts.extend(file_counts)
        findings.extend(_count_findings(file_counts))
        findings.extend(_point_findings(work, wanted))
        facilities.update(_facility_tally(work, expected_points))
        findings.extend(_import_findings(work))
        findings.extend(_name_findings(work, catalog, manifest, wanted))
        findings.extend(_context_findings(work, wanted))
        findings.append(_compile_finding(relative, work.source.data))
        findings.extend(_intrusion_findings(work, catalog, start))
    findings.extend(_facility_findings(facilities))
    findings.extend(_runtime_compile_findings(base, catalog))
    placement = _runtime_place_findings(base, catalog, manifest)
    findings.extend(placement)
    if any(not f.ok for f in placement):
        # what is there is not the tool's (or not what Python would run): it is not run for a self-check
        message = "not run: the runtime package is not trace-instrument's as installed (see the findings above)"
        findings.append(Finding(Check.RUNTIME, "self-check", False, message))
    else:
        findings.extend(runtime_self_check(base, catalog))
    instrumented = any(c.actual for c in counts) or any(
        f.status is not RuntimeStatus.MISSING for f in runtime.inspect(base, catalog, manifest)
    )
    return VerifyResult(str(base), tuple(findings), tuple(counts), instrumented=instrumented)


# -- counts -------------------------------------------------------------------------------


def _calls(nodes: list[ast.AST]) -> collections.Counter[str]:
    found: collections.Counter[str] = collections.Counter()
    for top in nodes:
        for node in ast.walk(top):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in COUNTED_CALLS:
                found[node.func.id] += 1
    return found


def _counts(work: FileWork, expected_points: list[Point]) -> list[CallCount]:
    """Expected: from the points whose anchors this file has."""
    expected: collections.Counter[str] = collections.Counter()
    for point in expected_points:
        expected.update(_calls([s for e in point.edits for s in e.template.stmts]))
    actual = _calls([work.tree])
    return [
        CallCount(work.path, name, expected[name], actual[name])
        for name in COUNTED_CALLS
        if expected[name] or actual[name]
    ]


def _count_findings(counts: list[CallCount]) -> list[Finding]:
    return [
        Finding(
            Check.COUNTS,
            c.file,
            c.expected == c.actual,
            f"{c.call}: {c.actual} call sites, catalog expects {c.expected}",
        )
        for c in counts
    ]


def _wanted(point: Point, selection: Selection, manifest: Manifest) -> bool:
    """Is the point's code proven by this run? A selected point, or an extra apply placed whose
    facility and id the selection keeps."""
    if selection.wants(point):
        return True
    return point.extra is not None and point.id in manifest.points and selection.wants(replace(point, extra=None))


def _point_findings(work: FileWork, wanted: frozenset[str]) -> list[Finding]:
    findings = []
    for point in (p for p in work.points if p.id in wanted):
        state = work.state(point)
        if point.extra is not None and state.untouched:
            continue  # an extra not asked for
        if not state.complete:
            why = (
                "missing"
                if state.untouched
                else "partly missing"
                if not state.marker_nodes
                else "drifted (edited by hand)"
            )
            findings.append(Finding(Check.POINTS, work.path, False, f"{point.id} is {why}", line=state.line))
        findings.extend(_placement_findings(work, point))
        for departure in state.departures:
            message = (
                f"{point.id}: its anchor no longer holds (the business code its rewrite keeps was edited; "
                "`trace-instrument check` shows how)"
            )
            findings.append(Finding(Check.POINTS, work.path, False, message, line=departure.line))
    return findings


def _placement_findings(work: FileWork, point: Point) -> list[Finding]:
    """A block in place that its anchor puts elsewhere (it reads other values, or runs on other
    paths, there) or nowhere: what check calls moved or unanchored, in check's words."""
    state = work.state(point)
    if not state.complete:
        return []
    findings = []
    for block in state.blocks:
        found = work.locator.finder.misplaced(point, block)
        if found is None:
            continue
        if isinstance(found, AnchorFailure):
            message = f"{point.id}: {unanchored_sentence(block, found)}: nothing shows it belongs there"
        else:
            message = f"{point.id} is moved: {found.message}"
        findings.append(Finding(Check.POINTS, work.path, False, message, line=block.line))
    return findings


def _expected_here(work: FileWork, point: Point) -> bool:
    """Does the catalog expect this point in this checkout? (its anchors are here, or it is in place)"""
    state = work.state(point)
    if not state.untouched:
        return True
    anchored = not any(isinstance(work.locator.place(point, e), AnchorFailure) for e in point.edits)
    return anchored and point.extra is None


def _facility_tally(work: FileWork, expected_points: list[Point]) -> collections.Counter[tuple[str, str]]:
    tally: collections.Counter[tuple[str, str]] = collections.Counter()
    for point in expected_points:
        tally[(point.facility, "expected")] += 1
        tally[(point.facility, "in place")] += work.state(point).anchored
    return tally


def _facility_findings(tally: collections.Counter[tuple[str, str]]) -> list[Finding]:
    findings = []
    for facility in dict.fromkeys(f for f, _ in tally):
        expected, in_place = tally[(facility, "expected")], tally[(facility, "in place")]
        findings.append(
            Finding(Check.FACILITIES, facility, in_place == expected, f"{in_place} of {expected} points in place")
        )
    return findings


# -- imports, names and compilation ---------------------------------------------------------------


def _import_findings(work: FileWork) -> list[Finding]:
    imported: collections.Counter[str] = collections.Counter()
    for node in ast.walk(work.tree):
        if isinstance(node, ast.ImportFrom) and node.module == TRACING_MODULE:
            imported.update(alias.asname or alias.name for alias in node.names)
    used = {n.id for n in ast.walk(work.tree) if isinstance(n, ast.Name) and n.id in TRACING_NAMES}
    findings = []
    for name in sorted(used | set(imported)):
        if imported[name] == 1 and name in used:
            continue
        if name not in used:
            problem = f"{name} is imported from {TRACING_MODULE} but not used"
        elif imported[name] == 0:
            problem = f"{name} is used but not imported from {TRACING_MODULE}"
        else:
            problem = f"{name} is imported {imported[name]} times"
        findings.append(Finding(Check.IMPORTS, work.path, False, problem))
    if not findings and used:
        findings.append(Finding(Check.IMPORTS, work.path, True, f"{len(used)} tracing names, each imported once"))
    return findings


def _name_findings(work: FileWork, catalog: Catalog, manifest: Manifest, wanted: frozenset[str]) -> list[Finding]:
    """Every point in place can run (its names mean what its template means), and no import the
    tool adds rebinds a name the business code binds otherwise."""
    findings = []
    present = [p for p in work.points if p.id in wanted and work.state(p).complete]
    checks = work.names.checks(work.points)
    for point in present:
        for issue in work.names.issues(point) + checks.name_issues(point):
            findings.append(Finding(Check.NAMES, work.path, False, f"{point.id}: {issue}", line=issue.line))
    added = {*manifest.imports.get(work.path, ()), *(i for p in work.points for i in p.imports)}
    for issue in rebinding_issues(work.names.table, added):
        message = f"`{issue.expected}` (added by trace-instrument) rebinds '{issue.name}': {issue}"
        findings.append(Finding(Check.NAMES, work.path, False, message, line=issue.line))
    if present and not findings:
        findings.append(Finding(Check.NAMES, work.path, True, f"the names of {len(present)} points resolve as meant"))
    return findings


def _context_findings(work: FileWork, wanted: frozenset[str]) -> list[Finding]:
    """Every point in place runs where it must: what it sets up for other code, on every path to
    that code; what it reads of a block's result, after the block."""
    present = [p for p in work.points if p.id in wanted and work.state(p).complete]
    checks = work.names.checks(work.points)
    findings = []
    for point in present:
        issues = checks.context_issues(point)
        if issues:
            message = f"{point.id}: " + "; ".join(context_sentences(issues))
            findings.append(
                Finding(Check.CONTEXT, work.path, False, message, line=issues[0].statement_line or issues[0].line)
            )
    if present and not findings:
        message = f"the code of {len(present)} points runs where it must"
        findings.append(Finding(Check.CONTEXT, work.path, True, message))
    return findings


def _compile_finding(path: str, data: bytes) -> Finding:
    try:
        compile(data, path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", 0) or 0
        return Finding(Check.COMPILE, path, False, f"does not compile: {exc}", line=line)
    return Finding(Check.COMPILE, path, True, "compiles")


def _runtime_compile_findings(base: Path, catalog: Catalog) -> list[Finding]:
    findings = []
    for name, _ in catalog.runtime.files:
        relative = f"{catalog.runtime.target_dir}/{name}"
        path = base / relative
        if not path.exists():
            findings.append(Finding(Check.COMPILE, relative, False, "runtime file missing"))
            continue
        try:
            data = path.read_bytes()
        except OSError as exc:
            findings.append(Finding(Check.COMPILE, relative, False, f"runtime file cannot be read: {exc.strerror}"))
            continue
        findings.append(_compile_finding(relative, data))
    return findings


def _runtime_place_findings(base: Path, catalog: Catalog, manifest: Manifest) -> list[Finding]:
    """The runtime package is the tool's and imports as installed (engine.ownership): one failing
    finding per thing that is not, or one that passes when the package is installed."""
    items = runtime.inspect(base, catalog, manifest)
    problems = [Finding(Check.RUNTIME, f.path, False, f.detail) for f in items if f.status in runtime.BLOCKING]
    if problems or not any(f.status in OURS for f in items):
        return problems
    message = "the package is trace-instrument's and imports as installed: Python resolves every module to its file"
    return [Finding(Check.RUNTIME, catalog.runtime.target_dir, True, message)]


# -- zero intrusion -------------------------------------------------------------------------------


def _intrusion_findings(work: FileWork, catalog: Catalog, start: Baseline) -> list[Finding]:
    if all(work.state(p).untouched for p in work.points):
        return []
    original = start.business(work.path, catalog)
    if original is None:
        message = (
            f"no baseline for this file in {start.description}; run `apply` (it records one), "
            "or pass --baseline DIR|GIT-REF to compare"
        )
        return [Finding(Check.ZERO_INTRUSION, work.path, False, message)]
    current = business_fingerprints(work.locator.recognition, added_imports(catalog))
    declared = declared_removals(work.locator.recognition)
    if sequence_digest([f for f, _ in current]) == original.digest:
        return [_same_business(work, current, start)]
    # the digests differ: the marks (each a part of a fingerprint) tell where
    marks = [original.mark(f) for f, _ in current]
    matcher = difflib.SequenceMatcher(None, list(original.marks), marks, autojunk=False)
    opcodes = matcher.get_opcodes()
    findings = []
    for op, a1, a2, b1, b2 in opcodes:
        if op == "equal":
            continue
        missing = [m for m in original.marks[a1:a2] if not any(original.mark(d) == m for d in declared)]
        added = current[b1:b2]
        what = "changed from" if missing else "added to"
        for _, line in added:
            message = f"a statement {what} the business code of {start.description} (not tracing code)"
            findings.append(Finding(Check.ZERO_INTRUSION, work.path, False, message, line=line))
        if len(missing) > len(added):
            line = current[b1][1] if b1 < len(current) else (current[-1][1] if current else 0)
            lost = len(missing) - len(added)
            message = f"{lost} statement(s) of the business code of {start.description} missing here"
            findings.append(Finding(Check.ZERO_INTRUSION, work.path, False, message, line=line))
    if findings:
        if start.accepting:  # said once per file
            findings[0] = replace(findings[0], message=f"{findings[0].message}; {start.accepting}")
        return findings
    if _restored_digest(opcodes, original, current, declared) == original.digest:
        return [_same_business(work, current, start)]  # what differs is what the rewrites take away
    message = (
        f"the business code differs from {start.description} at a statement its record cannot place; "
        "compare with --baseline DIR|GIT-REF to see where"
    )
    if start.accepting:
        message = f"{message}; {start.accepting}"
    return [Finding(Check.ZERO_INTRUSION, work.path, False, message)]


def _same_business(work: FileWork, current: list[tuple[str, int]], start: Baseline) -> Finding:
    message = f"{len(current)} business statements as in {start.description}"
    return Finding(Check.ZERO_INTRUSION, work.path, True, message)


def _restored_digest(
    opcodes: Sequence[tuple[str, int, int, int, int]],
    original: Business,
    current: list[tuple[str, int]],
    declared: set[str],
) -> str | None:
    """The digest of today's statements with the ones the rewrites took away by design put back
    where the baseline has them (None: a mark no single declared statement explains)."""
    restored: list[str] = []
    for op, a1, a2, b1, b2 in opcodes:
        if op == "equal":
            restored.extend(f for f, _ in current[b1:b2])
            continue
        for mark in original.marks[a1:a2]:
            candidates = {d for d in declared if original.mark(d) == mark}
            if len(candidates) != 1:
                return None
            restored.extend(candidates)
    return sequence_digest(restored)
