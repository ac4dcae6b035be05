"""verify: prove the instrumented checkout is right.

Five checks: call-site counts per file against the catalog's expectation for
this checkout, imports (each tracing name imported once, where used), every
touched file and the runtime package compiles, the zero-intrusion proof
(business code unchanged but for declared rewrites), and a runtime self-check
run in a subprocess that validates what lands on disk.
"""

from __future__ import annotations

import ast
import collections
import difflib
from pathlib import Path

from trace_instrument.engine.analysis import FileProblem, FileWork, analyse
from trace_instrument.engine.common import added_imports
from trace_instrument.engine.files import CheckoutError, checkout_root
from trace_instrument.engine.manifest import Manifest
from trace_instrument.engine.selfcheck import runtime_self_check
from trace_instrument.locate import AnchorFailure
from trace_instrument.locate.business import business_fingerprints, declared_removals
from trace_instrument.model import TRACING_MODULE, TRACING_NAMES, Catalog, Finding, VerifyResult

COUNTED_CALLS = ("trace_flow", "log_progress")


def verify(root: str | Path, catalog: Catalog, *, baseline: str | Path | None = None) -> VerifyResult:
    try:
        base = checkout_root(root)
        baseline_root = checkout_root(baseline) if baseline is not None else None
    except CheckoutError as exc:
        return VerifyResult(str(root), (), error=str(exc))
    manifest = Manifest.load(base)
    findings: list[Finding] = []
    counts: list[tuple[str, str, int, int]] = []
    facilities: collections.Counter = collections.Counter()
    for relative in catalog.files:
        work = analyse(base, relative, catalog)
        if isinstance(work, FileProblem):
            if not work.missing:
                findings.append(Finding("compile", relative, False, work.message))
            continue
        expected_points = [p for p in work.points if _expected_here(work, p)]  # anchor search once per point
        file_counts = _counts(work, expected_points)
        counts.extend(file_counts)
        findings.extend(_count_findings(relative, file_counts))
        findings.extend(_point_findings(work))
        facilities.update(_facility_tally(work, expected_points))
        findings.extend(_import_findings(work))
        findings.append(_compile_finding(relative, work.source.data))
        findings.extend(_intrusion_findings(work, catalog, manifest, baseline_root))
    findings.extend(_facility_findings(facilities))
    findings.extend(_runtime_compile_findings(base, catalog))
    findings.extend(runtime_self_check(base, catalog))
    return VerifyResult(str(base), tuple(findings), tuple(counts))


# -- counts -------------------------------------------------------------------------------


def _calls(nodes, names=COUNTED_CALLS) -> collections.Counter:
    found = collections.Counter()
    for top in nodes:
        for node in ast.walk(top):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in names:
                found[node.func.id] += 1
    return found


def _counts(work: FileWork, expected_points) -> list[tuple[str, str, int, int]]:
    """(file, call, expected, actual): expected from the points whose anchors this file has."""
    expected = collections.Counter()
    for point in expected_points:
        expected.update(_calls(s for e in point.edits for s in e.template.stmts))
    actual = _calls([work.tree])
    return [(work.path, name, expected[name], actual[name]) for name in COUNTED_CALLS if expected[name] or actual[name]]


def _count_findings(path: str, counts) -> list[Finding]:
    return [
        Finding("counts", path, expected == actual, f"{name}: {actual} call sites, catalog expects {expected}")
        for _, name, expected, actual in counts
    ]


def _point_findings(work: FileWork) -> list[Finding]:
    findings = []
    for point in work.points:
        state = work.state(point)
        if point.extra is not None and state.untouched:
            continue  # an extra not asked for
        if not state.complete:
            why = "missing" if state.untouched else "drifted (edited by hand)"
            findings.append(Finding("points", work.path, False, f"{point.id} is {why}", line=state.line))
    return findings


def _expected_here(work: FileWork, point) -> bool:
    """Does the catalog expect this point in this checkout? (its anchors are here, or it is in place)"""
    state = work.state(point)
    if not state.untouched:
        return True
    anchored = not any(isinstance(work.locator.place(point, e), AnchorFailure) for e in point.edits)
    return anchored and point.extra is None


def _facility_tally(work: FileWork, expected_points) -> collections.Counter:
    tally: collections.Counter = collections.Counter()
    for point in expected_points:
        tally[(point.facility, "expected")] += 1
        tally[(point.facility, "in place")] += work.state(point).complete
    return tally


def _facility_findings(tally: collections.Counter) -> list[Finding]:
    findings = []
    for facility in dict.fromkeys(f for f, _ in tally):
        expected, in_place = tally[(facility, "expected")], tally[(facility, "in place")]
        findings.append(
            Finding("facilities", facility, in_place == expected, f"{in_place} of {expected} points in place")
        )
    return findings


# -- imports and compilation ---------------------------------------------------------------------


def _import_findings(work: FileWork) -> list[Finding]:
    imported = collections.Counter()
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
        findings.append(Finding("imports", work.path, False, problem))
    if not findings and used:
        findings.append(Finding("imports", work.path, True, f"{len(used)} tracing names, each imported once"))
    return findings


def _compile_finding(path: str, data: bytes) -> Finding:
    try:
        compile(data, path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        return Finding("compile", path, False, f"does not compile: {exc}", line=getattr(exc, "lineno", 0) or 0)
    return Finding("compile", path, True, "compiles")


def _runtime_compile_findings(base: Path, catalog: Catalog) -> list[Finding]:
    findings = []
    for name, _ in catalog.runtime.files:
        relative = f"{catalog.runtime.target_dir}/{name}"
        path = base / relative
        if not path.exists():
            findings.append(Finding("compile", relative, False, "runtime file missing"))
        else:
            findings.append(_compile_finding(relative, path.read_bytes()))
    return findings


# -- zero intrusion -------------------------------------------------------------------------------


def _intrusion_findings(
    work: FileWork, catalog: Catalog, manifest: Manifest, baseline_root: Path | None
) -> list[Finding]:
    if all(work.state(p).untouched for p in work.points):
        return []
    original = _baseline(work, catalog, manifest, baseline_root)
    if original is None:
        return [
            Finding(
                "zero-intrusion",
                work.path,
                False,
                "no baseline: the manifest has none for this file; pass --baseline DIR (a pristine tree) to compare",
            )
        ]
    current = business_fingerprints(work.locator.recognition, added_imports(catalog))
    declared = declared_removals(work.locator.recognition)
    matcher = difflib.SequenceMatcher(None, list(original), [f for f, _ in current], autojunk=False)
    findings = []
    for op, a1, a2, b1, b2 in matcher.get_opcodes():
        if op == "equal":
            continue
        missing = [f for f in original[a1:a2] if f not in declared]
        added = current[b1:b2]
        what = "changed from the original" if missing else "added to the business code"
        for _, line in added:
            findings.append(
                Finding("zero-intrusion", work.path, False, f"a statement {what} (not tracing code)", line=line)
            )
        if len(missing) > len(added):
            line = current[b1][1] if b1 < len(current) else (current[-1][1] if current else 0)
            lost = len(missing) - len(added)
            findings.append(
                Finding("zero-intrusion", work.path, False, f"{lost} original statement(s) missing here", line=line)
            )
    if not findings:
        findings.append(
            Finding("zero-intrusion", work.path, True, f"{len(current)} business statements as in the original")
        )
    return findings


def _baseline(
    work: FileWork, catalog: Catalog, manifest: Manifest, baseline_root: Path | None
) -> tuple[str, ...] | None:
    if baseline_root is not None:
        pristine = analyse(baseline_root, work.path, catalog)
        if isinstance(pristine, FileProblem):
            return None
        return tuple(f for f, _ in business_fingerprints(pristine.locator.recognition, added_imports(catalog)))
    return manifest.baselines.get(work.path)
