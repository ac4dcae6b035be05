"""The hand-over report as Markdown (the terminal shows it rendered, a pipe gets the text)."""

from __future__ import annotations

from collections import Counter

from trace_instrument.engine.report import OUTPUTS, Report
from trace_instrument.render.items import not_instrumented_message, version_note


def report(rep: Report, *, config: str | None = None, verbose: bool = False, target: str = "") -> str:
    """The report as Markdown: the checkout, runtime, points per facility, call sites, stages, what is
    not in place, verify, and how to switch tracing on (only the error when there is one; on a
    checkout never instrumented, that and the counts unless `verbose`); `config` names the project
    configuration read, `target` the checkout as the user gave it."""
    lines = ["## verl trace instrumentation report", ""]
    if rep.error is not None:
        return "\n".join([*lines, f"error: {rep.error.message}"]) + "\n"
    if not rep.instrumented and not verbose:
        return "\n".join([*lines, *_not_instrumented(rep, target or rep.root, config)]) + "\n"
    note = version_note(rep.verl_version, rep.validated_on)
    if note:
        lines += [f"> note: {note}", ""]
    runtime = ", ".join(f"`{f.path}` ({f.status.value})" for f in rep.runtime_files) or "not installed"
    release = rep.verl_version or "unknown"
    lines.append(f"- checkout: `{rep.root}` (verl {release}; catalog validated on {', '.join(rep.validated_on)})")
    if config:
        lines.append(f"- config: {config}")
    lines.append(f"- runtime package: {runtime}")
    lines += [f"- {f.facility}: {f.in_place}/{f.applicable} points in place" for f in rep.facilities]
    lines += [f"- `{c.call}(` call sites: {c.found}/{c.expected}" for c in rep.calls]
    lines.append(_stages_line(rep))
    if rep.not_in_place:
        lines.append("- not in place:")
        lines += [f"  - `{p.point_id}` {p.status.value} at {p.file}:{p.line}: {p.message}" for p in rep.not_in_place]
    else:
        lines.append("- skipped: nothing; every applicable point is in place")
    by_check: Counter[tuple[str, bool]] = Counter((f.check.value, f.ok) for f in rep.verify.findings)
    checks = dict.fromkeys(f.check.value for f in rep.verify.findings)
    summary = ", ".join(f"{c} {by_check[(c, True)]}/{by_check[(c, True)] + by_check[(c, False)]}" for c in checks)
    lines.append(f"- verify: {'ok' if rep.verify.ok else 'NOT ok'} ({summary})")
    lines += ["", "Switch it on with `export VERL_TRACE_DIR=/path/to/traces` before training. Outputs:", ""]
    lines += [f"- {what}: `{where}`" for what, where in OUTPUTS]
    return "\n".join(lines) + "\n"


def _stages_line(rep: Report) -> str:
    covered = [s.stage for s in rep.stages if s.covered]
    missing = [s.stage for s in rep.stages if not s.covered]
    line = f"- progress stages covered: {len(covered)}/{len(rep.stages)}"
    if missing:
        why = " — no implementation in verl" if missing == ["update prompt2accs"] else ""
        line += f" (not covered: {', '.join(missing)}{why})"
    return line


def _not_instrumented(rep: Report, target: str, config: str | None) -> list[str]:
    """The report of a checkout that holds nothing of the tool's: that, and the counts."""
    lines = [not_instrumented_message(target), ""]
    if config:
        lines.append(f"- config: {config}")
    return [*lines, f"- {report_counts(rep)}; no runtime package (--verbose: the whole report)"]


def report_counts(rep: Report) -> str:
    """ "3/98 points in place, `trace_flow(` call sites 2/70, ...": the points and call sites, in one line."""
    in_place = sum(f.in_place for f in rep.facilities)
    applicable = sum(f.applicable for f in rep.facilities)
    counts = [f"{in_place}/{applicable} points in place"]
    counts += [f"`{c.call}(` call sites {c.found}/{c.expected}" for c in rep.calls if c.expected]
    return ", ".join(counts)
