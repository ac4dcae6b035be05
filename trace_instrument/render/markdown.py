"""The hand-over report as Markdown (the terminal shows it rendered, a pipe gets the text)."""

from __future__ import annotations

from collections import Counter

from trace_instrument.engine.report import OUTPUTS, Report
from trace_instrument.render.items import version_note


def report(rep: Report, *, config: str | None = None) -> str:
    """The report as Markdown: the checkout, runtime, points per facility, call sites, stages, what is
    not in place, verify, and how to switch tracing on (only the error when there is one); `config`
    names the project configuration read."""
    lines = ["## verl trace instrumentation report", ""]
    if rep.error is not None:
        return "\n".join([*lines, f"error: {rep.error.message}"]) + "\n"
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
