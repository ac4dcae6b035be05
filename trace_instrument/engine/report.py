"""report: the final instrumentation report, generated from the checkout itself.

It combines check (what is in place, what is not and why) and verify (the
proofs) into the summary a person hands over after instrumenting: files
created, points per facility, progress stages covered, what was skipped, the
verify results, and how to switch tracing on.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from trace_instrument.engine.check import check
from trace_instrument.engine.files import CheckoutError, checkout_root
from trace_instrument.engine.verify import verify
from trace_instrument.model import FACILITIES, Catalog, PointResult, RunResult, Status, VerifyResult

# The training-stage panel's 11 stages and the progress line that marks each one.
PANEL_STAGES = (
    ("fetch batch", "load global batch"),
    ("compute reward", "start compute reward"),
    ("compute log prob", "start compute log prob"),
    ("compute ref log prob", "start compute ref log prob"),
    ("compute adv", "start compute adv"),
    ("update prompt2accs", "start update prompt2accs"),
    ("update actor", "start update actor"),
    ("record metrics", "start record metrics"),
    ("sync params", "start sync params"),
    ("eval", "start eval"),
    ("save checkpoint", "start save checkpoint"),
)
OUTPUTS = (
    ("sample flow CSV (no header)", "$VERL_TRACE_DIR/sample/{hostname}-pid{pid}.csv"),
    ("progress log (hourly)", "$VERL_TRACE_DIR/progress/{YYYYMMDD-HH}.log"),
    ("trajectory JSONL (100 MB rotation)", "$VERL_TRACE_DIR/trajectory/trajectory_{instance}_{ts}.jsonl"),
    ("stdout", "[FLOW_TRACE] lines (tracing on only) and the bare progress lines (always)"),
    (
        "discovery files",
        "/tmp/verl_trace_sample_path.txt, /tmp/verl_trace_trajectory_path.txt, /tmp/verl_progress_path.txt",
    ),
)


@dataclass(frozen=True)
class Report:
    root: str
    verl_version: str
    validated_on: tuple[str, ...]
    runtime_files: tuple[tuple[str, str], ...]
    facilities: tuple[tuple[str, int, int], ...]  # (facility, points in place, points applicable)
    calls: tuple[tuple[str, int, int], ...]  # (call, found, expected)
    stages: tuple[tuple[str, bool], ...]  # panel stage, covered
    not_in_place: tuple[PointResult, ...]
    verify: VerifyResult
    error: str = ""

    @property
    def ok(self) -> bool:
        runtime_ok = all(status == "present" for _, status in self.runtime_files)
        return not self.error and self.verify.ok and not self.not_in_place and runtime_ok


def report(root: str | Path, catalog: Catalog) -> Report:
    try:
        base = checkout_root(root)
    except CheckoutError as exc:
        empty = VerifyResult(str(root), ())
        return Report(str(root), "", catalog.validated_on, (), (), (), (), (), empty, error=str(exc))
    checked = check(base, catalog)
    proof = verify(base, catalog)
    return Report(
        root=str(base),
        verl_version=_verl_version(base),
        validated_on=catalog.validated_on,
        runtime_files=checked.runtime_files,
        facilities=_facilities(checked, catalog),
        calls=_calls(proof),
        stages=_stages(base, catalog),
        not_in_place=tuple(
            p
            for p in checked.points
            if p.status not in (Status.PRESENT, Status.NOT_APPLICABLE) and _is_core(p, catalog)
        ),
        verify=proof,
    )


def _is_core(result: PointResult, catalog: Catalog) -> bool:
    if result.point_id == "unexpected":
        return True
    point = catalog.point(result.point_id)
    return point.extra is None or result.status is not Status.MISSING


def _verl_version(root: Path) -> str:
    try:
        return (root / "verl" / "version" / "version").read_text(encoding="utf-8").strip()
    except OSError:
        return "unknown"


def _facilities(checked: RunResult, catalog: Catalog) -> tuple[tuple[str, int, int], ...]:
    counts: Counter = Counter()
    for result in checked.points:
        if result.point_id == "unexpected" or catalog.point(result.point_id).extra is not None:
            continue
        if result.status is not Status.NOT_APPLICABLE:
            counts[(result.facility, "applicable")] += 1
            counts[(result.facility, "in place")] += result.status is Status.PRESENT
    return tuple(
        (facility, counts[(facility, "in place")], counts[(facility, "applicable")])
        for facility in FACILITIES
        if counts[(facility, "applicable")]
    )


def _calls(proof: VerifyResult) -> tuple[tuple[str, int, int], ...]:
    totals: dict[str, list[int]] = {}
    for _, call, expected, actual in proof.counts:
        entry = totals.setdefault(call, [0, 0])
        entry[0] += actual
        entry[1] += expected
    return tuple((call, found, expected) for call, (found, expected) in totals.items())


def _stages(root: Path, catalog: Catalog) -> tuple[tuple[str, bool], ...]:
    text = "\n".join(
        (root / path).read_text(encoding="utf-8", errors="replace") for path in catalog.files if (root / path).exists()
    )
    return tuple((stage, marker in text) for stage, marker in PANEL_STAGES)


# -- renderings (pure text; the CLI prints them) ---------------------------------------------------------


def as_markdown(rep: Report) -> str:
    lines = ["## verl trace instrumentation report", ""]
    if rep.error:
        return "\n".join([*lines, f"error: {rep.error}"])
    lines += [
        f"- checkout: `{rep.root}` (verl {rep.verl_version}; catalog validated on {', '.join(rep.validated_on)})",
        "- runtime package: " + ", ".join(f"`{path}` ({status})" for path, status in rep.runtime_files),
    ]
    for facility, in_place, applicable in rep.facilities:
        lines.append(f"- {facility}: {in_place}/{applicable} points in place")
    for call, found, expected in rep.calls:
        lines.append(f"- `{call}(` call sites: {found}/{expected}")
    covered = [stage for stage, ok in rep.stages if ok]
    missing = [stage for stage, ok in rep.stages if not ok]
    lines.append(
        f"- progress stages covered: {len(covered)}/{len(rep.stages)}"
        + (
            f" (not covered: {', '.join(missing)}"
            + (" — no implementation in verl" if missing == ["update prompt2accs"] else "")
            + ")"
            if missing
            else ""
        )
    )
    if rep.not_in_place:
        lines.append("- not in place:")
        lines += [f"  - `{p.point_id}` {p.status.value} at {p.file}:{p.line}: {p.message}" for p in rep.not_in_place]
    else:
        lines.append("- skipped: nothing; every applicable point is in place")
    by_check: Counter = Counter((f.check, f.ok) for f in rep.verify.findings)
    checks = dict.fromkeys(f.check for f in rep.verify.findings)
    summary = ", ".join(f"{c} {by_check[(c, True)]}/{by_check[(c, True)] + by_check[(c, False)]}" for c in checks)
    lines.append(f"- verify: {'ok' if rep.verify.ok else 'NOT ok'} ({summary})")
    lines += ["", "Switch it on with `export VERL_TRACE_DIR=/path/to/traces` before training. Outputs:", ""]
    lines += [f"- {what}: `{where}`" for what, where in OUTPUTS]
    return "\n".join(lines) + "\n"


def as_dict(rep: Report) -> dict:
    return {
        "root": rep.root,
        "error": rep.error,
        "ok": rep.ok,
        "verl_version": rep.verl_version,
        "validated_on": list(rep.validated_on),
        "runtime": [{"path": p, "status": s} for p, s in rep.runtime_files],
        "facilities": [{"facility": f, "in_place": i, "applicable": a} for f, i, a in rep.facilities],
        "calls": [{"call": c, "found": f, "expected": e} for c, f, e in rep.calls],
        "stages": [{"stage": s, "covered": ok} for s, ok in rep.stages],
        "not_in_place": [
            {"id": p.point_id, "status": p.status.value, "file": p.file, "line": p.line, "message": p.message}
            for p in rep.not_in_place
        ],
        "verify": {
            "ok": rep.verify.ok,
            "findings": [
                {"check": f.check, "subject": f.subject, "ok": f.ok, "message": f.message, "line": f.line}
                for f in rep.verify.findings
            ],
        },
        "outputs": [{"what": w, "where": p} for w, p in OUTPUTS],
    }
