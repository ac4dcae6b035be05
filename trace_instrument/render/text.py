"""Terminal renderings (rich): what apply, check, remove, verify, points and demo print.

Functions return renderables; the CLI prints them. Nothing here is cut: table
cells fold instead of ending in an ellipsis, whatever the terminal's width.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, TypeVar

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from trace_instrument.engine.patch import changes, summary, unified_patch
from trace_instrument.model import (
    FACILITIES,
    Candidate,
    Catalog,
    ChangeKind,
    ChangeState,
    ChangeSummary,
    EditOutcome,
    FileProblemKind,
    Finding,
    PointResult,
    PortResult,
    PortStatus,
    PortSuggestion,
    Reason,
    RunResult,
    RuntimeStatus,
    Status,
    VerifyResult,
)
from trace_instrument.render.items import (
    CHECK_ORDER,
    CLEAN,
    blocked_points,
    check_items,
    counts_line,
    not_instrumented_message,
    runtime_item,
    runtime_message,
    version_note,
)
from trace_instrument.spec.project import Recorded

if TYPE_CHECKING:  # the report's engine loads verify's: only `report` needs it, and imports it itself
    from trace_instrument.engine.report import Report

T = TypeVar("T")

STATUS_STYLE = {
    Status.APPLIED: "green",
    Status.PRESENT: "green",
    Status.REPAIRED: "green",
    Status.UPDATED: "green",
    Status.REMOVED: "green",
    Status.MISSING: "yellow",
    Status.DRIFTED: "yellow",
    Status.MOVED: "yellow",
    Status.STALE: "yellow",
    Status.KEPT: "yellow",
    Status.NOT_APPLICABLE: "dim",
    Status.SKIPPED: "yellow",
    Status.BROKEN: "red",
    Status.CONTEXT_CHANGED: "red",
    Status.REFUSED: "red",
    Status.ANCHOR_LOST: "red",
    Status.AMBIGUOUS: "red",
    Status.UNEXPECTED: "red",
    Status.UNFINISHED: "red",
    Status.ERROR: "bold red",
}
OK_STATUSES = frozenset({Status.APPLIED, Status.PRESENT, Status.REMOVED, Status.REPAIRED, Status.UPDATED})
LABEL_WIDTH = max(len(s.value) for s in Status) + 1  # the status column: the longest status and a space


def diff(patch: str, indent: str = "") -> list[RenderableType]:
    """A unified diff, one line each, coloured by kind (headers, hunks, additions, removals)."""
    lines: list[RenderableType] = []
    for line in patch.splitlines():
        style = ""
        if line.startswith(("diff --git", "---", "+++", "new file", "deleted file")):
            style = "bold"
        elif line.startswith("@@"):
            style = "cyan"
        elif line.startswith("+"):
            style = "green"
        elif line.startswith("-"):
            style = "red"
        lines.append(Text(indent + line, style=style))
    return lines


def dry_run_lines(result: RunResult, *, full: bool) -> list[RenderableType]:
    """What a dry run would change: the edits of verl's files in full, then the tool's own files (the
    runtime package's, the manifest) one line each; with `full` their whole diff as well."""
    if full:
        return _marking_overrides(diff(unified_patch(result)), result)
    lines = _marking_overrides(diff(unified_patch(result, kinds=frozenset({ChangeKind.SOURCE}))), result)
    own = [summary(c) for c in changes(result) if c.kind is not ChangeKind.SOURCE]
    if own:
        lines.append(Text("the tool's own files, one line each (--full shows their text):", style="bold"))
        width = max(len(s.path) for s in own)
        lines += [change_line(s, width) for s in own]
    return lines


def _marking_overrides(lines: list[RenderableType], result: RunResult) -> list[RenderableType]:
    """The diff's lines, each hunk holding a point an override placed followed by a line naming it,
    port's grade of the place (or `by hand`) and the override's file and line."""
    overridden = [p for p in result.points if p.overridden is not None and p.insert_lines]
    if not overridden:
        return lines
    marked: list[RenderableType] = []
    path = ""
    for line in lines:
        marked.append(line)
        plain = line.plain if isinstance(line, Text) else str(line)
        if plain.startswith("diff --git a/"):
            path = plain.removeprefix("diff --git a/").split(" b/")[0]
        elif plain.startswith("@@ -"):
            first, _, count = plain.split()[1].removeprefix("-").partition(",")
            start, length = int(first), int(count or 1)
            marked += [_override_line(p) for p in overridden if p.file == path and _in_hunk(p, start, length)]
    return marked


def _in_hunk(p: PointResult, start: int, length: int) -> bool:
    """Does one of the point's edits go inside the hunk over lines start..start+length-1 of the file as read?"""
    return any(start - 1 <= line <= start + max(length, 1) - 1 for line in p.insert_lines)


def _override_line(p: PointResult) -> Text:
    mark = p.overridden
    grade = "written by hand"
    if mark is not None and mark.confidence is not None:
        grade = f"ported, {mark.confidence.value}"
    where = f" at {mark.source.file}:{mark.source.line}" if mark is not None else ""
    return Text(f"  hunk of {p.point_id}: from an override ({grade}){where}", style="yellow")


def change_line(s: ChangeSummary, width: int = 0) -> Text:
    """One file of the tool's own: what happens to it, its path (padded to `width`), its lines and
    digest and, for the manifest, the points it records."""
    line = Text("  ")
    line.append(f"{s.state.value:<8} ", style=_CHANGE_STYLE[s.state])
    line.append(f"{s.path:<{width}}", style="bold")
    line.append(f"  {s.lines:>5} lines  sha256 {s.digest}")
    if s.points is not None:
        line.append(f"  {s.points} points recorded")
    return line


_CHANGE_STYLE = {ChangeState.NEW: "green", ChangeState.UPDATED: "green", ChangeState.REMOVED: "red"}


def point_lines(p: PointResult, *, planned_only: bool = False, debug_trace: str = "") -> list[RenderableType]:
    """One point; with planned_only (a dry run, or a run that wrote nothing) "applied" reads "would apply"."""
    where = f"{p.file}:{p.line}" if p.line else p.file
    label = p.status.value
    if planned_only and p.status in (Status.APPLIED, Status.REMOVED, Status.REPAIRED, Status.UPDATED):
        label = "would " + {Status.APPLIED: "apply", Status.REMOVED: "remove"}.get(p.status, p.status.value[:-1])
    line = _point_head(p, label, where)
    lines: list[RenderableType] = [line]
    by_edit = any(e.of > 1 for e in p.edits)  # a point of several edits: each failing one under it
    if by_edit:
        lines += edit_lines(p.edits)
    elif p.message:
        lines.append(Text(f"      {p.message}"))
    if not by_edit:
        lines += candidate_lines(p.candidates, "      ")
    if p.diff:
        lines += diff(p.diff, indent="      ")
    if debug_trace:
        lines += [Text(f"      {row}", style="dim") for row in debug_trace.rstrip().splitlines()]
    return lines


def _point_head(p: PointResult, label: str, where: str) -> Text:
    line = Text("  ")
    line.append(f"{label:<{LABEL_WIDTH}}", style=STATUS_STYLE.get(p.status, ""))
    line.append(f"{p.point_id:<42} ", style="bold")
    line.append(where, style="cyan")
    return line


def candidate_lines(candidates: Iterable[Candidate], indent: str) -> list[RenderableType]:
    """The places that look like a lost anchor, most similar first."""
    return [Text(f"{indent}nearest: line {c.line}: {c.code}  (similarity {c.score})", style="dim") for c in candidates]


def edit_lines(edits: Iterable[EditOutcome]) -> list[RenderableType]:
    """Each failing edit of a point: which, its status and line, why, and its nearest candidates."""
    lines: list[RenderableType] = []
    for e in edits:
        head = Text(f"      edit {e.index} of {e.of}: ")
        head.append(e.status.value, style=STATUS_STYLE.get(e.status, ""))
        head.append(f" (line {e.line}): {e.message}" if e.line else f": {e.message}")
        lines.append(head)
        lines += candidate_lines(e.candidates, "        ")
    return lines


def points_lines(
    points: Iterable[PointResult], *, show_ok: bool, planned_only: bool = False, debug: dict[str, str] | None = None
) -> list[RenderableType]:
    """Every point (or only the problems); points broken only by the runtime package in one line."""
    lines: list[RenderableType] = []
    by_runtime = [p for p in points if p.status is Status.BROKEN and p.reason is Reason.RUNTIME_INCOMPLETE]
    for p in points:
        if p in by_runtime or (not show_ok and p.status in OK_STATUSES | CLEAN):
            continue
        lines += point_lines(p, planned_only=planned_only, debug_trace=(debug or {}).get(p.file, ""))
    if by_runtime:
        line = Text("  ")
        line.append(f"{'broken':<{LABEL_WIDTH}}", style=STATUS_STYLE[Status.BROKEN])
        line.append(f"{len(by_runtime)} points that import the runtime package", style="bold")
        lines += [line, Text(f"      {by_runtime[0].message}")]
    return lines


def read_only_files(result: RunResult) -> list[str]:
    """The files a run could not write because they (or their folders) are read-only, when there are
    several: said in one line (read_only_lines), not once per file and once per point."""
    paths = [f.path for f in result.files if f.error is not None and f.error.kind is FileProblemKind.READ_ONLY]
    return paths if len(paths) > 1 else []


def read_only_lines(result: RunResult, target: str) -> list[RenderableType]:
    """One line for the read-only files of read_only_files, naming the cause and the way out."""
    paths = read_only_files(result)
    if not paths:
        return []
    points = sum(len(f.points) for f in result.files if f.path in paths)
    every = " (every file to edit)" if len(paths) == sum(1 for f in result.files if f.changed or f.error) else ""
    shown = ", ".join(paths[:2]) + (", ..." if len(paths) > 2 else "")
    return [
        Text(
            f"read-only: {len(paths)} files{every}, {points} points ({shown}): make them writable "
            f"(chmod -R u+w {target}) or leave their points out with --skip",
            style="red",
        )
    ]


def files_table(
    result: RunResult, verb: str, words: Mapping[Status, str] | None = None, leave_out: Iterable[str] = ()
) -> list[RenderableType]:
    """One row per file (but those in `leave_out`, said elsewhere): its points, their statuses (a status
    in `words` said so), and `verb` (changed), "unchanged" or its error; nothing when no row is left."""
    left_out = set(leave_out)
    rows = [f for f in result.files if f.path not in left_out]
    if not rows and left_out:
        return []
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    table.add_column("file", overflow="fold")
    table.add_column("points", justify="right")
    table.add_column("result", overflow="fold")
    for f in rows:
        counts = Counter((words or {}).get(p.status, p.status.value) for p in f.points)
        detail = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
        state = Text(str(f.error), style="red") if f.error else Text(verb if f.changed else "unchanged")
        cell = Text(f"{detail} — ") + state if detail else state
        table.add_row(f.path, str(len(f.points)), cell)
    return [table]


def runtime_lines(result: RunResult, planned_only: bool = False) -> list[RenderableType]:
    """The runtime package's files counted by state, and what to do about those needing it."""
    if not result.runtime_files:
        return []
    would = {"created": "to create", "updated": "to update", "removed": "to remove"} if planned_only else {}
    counts = Counter(would.get(f.status.value, f.status.value) for f in result.runtime_files)
    # the package's folder, from its own files (an item of what is not the tool's may be anywhere)
    folders = [f.path.rsplit("/", 1)[0] + "/" for f in result.runtime_files if not f.detail]
    label = f"runtime package {folders[0]}" if folders else "runtime package"
    lines: list[RenderableType] = [Text(f"{label}: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))]
    shown: set[str] = set()
    for f in result.runtime_files:
        if f.status in (RuntimeStatus.PRESENT, RuntimeStatus.CREATED, RuntimeStatus.REMOVED, RuntimeStatus.UPDATED):
            continue
        message = runtime_message(f)
        if message not in shown:
            shown.add(message)
            lines.append(Text(f"      {message}", style="yellow"))
    return lines


def config_lines(config: str | None) -> list[RenderableType]:
    """The project configuration the command read (none without one)."""
    return [Text(f"config: {config}", style="dim")] if config else []


def style_lines(result: RunResult) -> list[RenderableType]:
    """The formatter that wrote the inserted code (none without the checkout configuring one), and
    one line when the version installed here is not the one the checkout pins."""
    style = result.style
    lines: list[RenderableType] = (
        [Text(f"style: {style.formatter.value} ({style.found_in})", style="dim")] if style else []
    )
    mismatch = result.formatter_mismatch
    if mismatch is not None:
        pinned, name = mismatch.style.pinned, mismatch.style.formatter.value
        lines.append(
            Text(
                f"note: {name} {mismatch.installed} wrote the inserted code, the checkout pins {pinned} "
                f"({mismatch.style.found_in}): versions may format it differently; {mismatch.style.install}",
                style="yellow",
            )
        )
    return lines


def note_lines(result: RunResult | Report) -> list[RenderableType]:
    """The note for a verl release the catalog was not validated on (none otherwise)."""
    note = version_note(result.verl_version, result.validated_on)
    return [Text(f"note: {note}", style="yellow")] if note else []


QUIET_LINES = 5  # the most lines --quiet prints, whatever the outcome
VERBOSE_HINT = "--verbose"


def not_instrumented_line(target: str) -> Text:
    """The first line of check, verify and report on a checkout that holds nothing of the tool's."""
    return Text(not_instrumented_message(target), style="yellow")


def at_most(lines: list[RenderableType], budget: int) -> list[RenderableType]:
    """The first lines, within `budget`, the last of them saying how many more --verbose shows."""
    if len(lines) <= budget:
        return lines
    shown = max(budget - 1, 0)
    return [*lines[:shown], Text(f"  and {len(lines) - shown} more ({VERBOSE_HINT})", style="dim")]


def check_lines(
    result: RunResult, *, quiet: bool, verdict: str, verbose: bool = False, target: str = ""
) -> list[RenderableType]:
    """check's output: the version note, the points (quiet: the problems only, one line each, at most
    QUIET_LINES lines in all unless `verbose`), the runtime package, and a line of counts ending in
    `verdict`. A checkout never instrumented: one line saying so and the counts (`verbose`: every point)."""
    items = check_items(result)
    runtime_items = items[len(result.points) : len(items) - len(result.unfinished)]
    summary = counts_line(list(result.points), CHECK_ORDER)
    if runtime_items:
        summary += f"; runtime: {counts_line(runtime_items, CHECK_ORDER)}"
    if result.unfinished:
        summary += f"; tree: {len(result.unfinished)} unfinished"
    if not result.instrumented and not verbose:
        blocked = _problem_heads(blocked_points(result))
        hint = f" ({VERBOSE_HINT} lists every point)"
        last = Text(f"check: {summary} — not instrumented{hint}")
        return [not_instrumented_line(target or result.root), *at_most(blocked, QUIET_LINES - 2), last]
    last = Text(f"check: {summary} — {verdict}")
    if quiet and not verbose:
        heads = _problem_heads([p for p in items if p.status not in CLEAN])
        return quiet_lines(heads, last, first=note_lines(result))
    lines = note_lines(result)
    lines += points_lines(result.points, show_ok=not quiet)
    runtime_problems = [p for p in runtime_items if p.status not in CLEAN]
    if not quiet or runtime_problems:
        lines += runtime_lines(result)
    lines += points_lines(result.unfinished, show_ok=False)
    lines.append(last)
    return lines


def quiet_lines(
    heads: list[RenderableType], last: RenderableType, *, first: list[RenderableType] | None = None
) -> list[RenderableType]:
    """--quiet's output of check, verify and report: `first` (a note), the problems' lines, then `last`
    (the summary), within QUIET_LINES in all: the problems cut to the first, then "and N more"."""
    first = first or []
    return [*first, *at_most(heads, QUIET_LINES - len(first) - 1), last]


def grouped(items: Iterable[T], key: Callable[[T], Hashable]) -> list[list[T]]:
    """The items of the same `key` together: the largest groups first, then in order."""
    groups: dict[Hashable, list[T]] = {}
    for item in items:
        groups.setdefault(key(item), []).append(item)
    return sorted(groups.values(), key=len, reverse=True)


def _problem_heads(problems: list[PointResult]) -> list[RenderableType]:
    """The problems one line each, those of the same status and message (one import deleted breaks
    every point of a file) in one line together: the largest groups first, then in order."""
    return [_problem_head(group) for group in grouped(problems, lambda p: (p.status, _first_line(p.message)))]


def _failure_heads(findings: Iterable[Finding]) -> list[RenderableType]:
    """verify's failures one line each, those of the same check and message in one line together
    (grouped as check's problems are)."""
    failed = [f for f in findings if not f.ok]
    return [_failure_head(group) for group in grouped(failed, lambda f: (f.check, _first_line(f.message)))]


def _failure_head(group: list[Finding]) -> Text:
    first = group[0]
    where = f"{first.subject}:{first.line}" if first.line else first.subject
    if len(group) > 1:
        where = f"{len(group)} subjects: {where}, ..."
    return Text(f"  FAIL {first.check.value}: {where}: {_first_line(first.message)}", style="red")


def _first_line(message: str) -> str:
    return message.splitlines()[0] if message else ""


def _problem_head(group: list[PointResult]) -> Text:
    """Problems of one status and message in one line: status, id (or how many and the first), where,
    and the first line of the message."""
    first = group[0]
    if len(group) == 1:
        line = _point_head(first, first.status.value, f"{first.file}:{first.line}" if first.line else first.file)
    else:
        files = sorted({p.file for p in group})
        where = files[0] if len(files) == 1 else f"{len(files)} files"
        named = replace(first, point_id=f"{len(group)} points: {first.point_id}, ...")
        line = _point_head(named, first.status.value, where)
    message = _first_line(first.message)
    if message:
        line.append(f"  {message}", style="dim")
    return line


def verify_lines(
    result: VerifyResult, *, verbose: bool = False, target: str = "", quiet: bool = False
) -> list[RenderableType]:
    """verify's output: call sites per file, each check's passes and failures, every failure, the verdict.
    A checkout never instrumented: one line saying so and the counts (`verbose`: all of it). `quiet`:
    the failures, one line per check and message, and the verdict, at most QUIET_LINES in all unless
    `verbose`."""
    if not result.instrumented and not verbose:
        failed = sum(1 for f in result.findings if not f.ok)
        sites = ", ".join(f"{t.found}/{t.expected} {t.call}" for t in result.call_totals())
        summary = f"verify: call sites {sites}, no runtime package; {failed} checks failed — not ok"
        return [not_instrumented_line(target or result.root), Text(f"{summary} ({VERBOSE_HINT} lists every check)")]
    if quiet:
        heads = _failure_heads(result.findings)
        return [*heads, _verify_verdict(result)] if verbose else quiet_lines(heads, _verify_verdict(result))
    table = Table(show_header=True, header_style="bold", box=None)
    for column in ("file", "trace_flow", "log_progress"):
        table.add_column(column, justify="left" if column == "file" else "right", overflow="fold")
    per_file: dict[str, dict[str, tuple[int, int]]] = {}
    for count in result.counts:
        per_file.setdefault(count.file, {})[count.call] = (count.expected, count.actual)
    totals = {"trace_flow": [0, 0], "log_progress": [0, 0]}
    for file, calls in per_file.items():
        cells = []
        for call in ("trace_flow", "log_progress"):
            expected, actual = calls.get(call, (0, 0))
            totals[call][0] += expected
            totals[call][1] += actual
            style = "" if expected == actual else "red"
            cells.append(Text(f"{actual}/{expected}", style=style) if expected or actual else Text("-", style="dim"))
        table.add_row(file, *cells)
    table.add_row(Text("total", style="bold"), *(Text(f"{a}/{e}", style="bold") for e, a in totals.values()))
    lines: list[RenderableType] = [
        Text("call sites found / expected by the catalog for this checkout:", style="bold"),
        table,
    ]
    by_check = Counter((f.check, f.ok) for f in result.findings)
    for check in dict.fromkeys(f.check for f in result.findings):
        passed, failed = by_check[(check, True)], by_check[(check, False)]
        style = "green" if not failed else "red"
        lines.append(Text(f"  {check.value:<15} {passed} passed, {failed} failed", style=style))
    for finding in result.findings:
        if finding.check.value == "runtime" and finding.ok:
            lines.append(Text(f"      runtime: {finding.subject}: {finding.message}", style="dim"))
    for finding in result.findings:
        if not finding.ok:
            where = f"{finding.subject}:{finding.line}" if finding.line else finding.subject
            lines.append(Text(f"  FAIL {finding.check.value}: {where}: {finding.message}", style="red"))
    lines.append(_verify_verdict(result))
    return lines


def _verify_verdict(result: VerifyResult) -> Text:
    failed = sum(1 for f in result.findings if not f.ok)
    verdict = "ok" if result.ok else "not ok"
    return Text(f"verify: {len(result.findings) - failed} checks passed, {failed} failed — {verdict}")


def report_quiet_lines(rep: Report, *, verbose: bool = False, target: str = "") -> list[RenderableType]:
    """report --quiet: what is not in place and what verify failed, one line per status (check) and
    message, then a line of counts and the verdict; at most QUIET_LINES in all unless `verbose`. A
    checkout never instrumented: one line saying so and the counts."""
    from trace_instrument.render.markdown import report_counts

    counts = report_counts(rep)
    if not rep.instrumented and not verbose:
        return [not_instrumented_line(target or rep.root), Text(f"report: {counts} — not instrumented")]
    runtime = [runtime_item(f) for f in rep.runtime_files if f.status is not RuntimeStatus.PRESENT]
    heads = [*_problem_heads([*rep.not_in_place, *runtime]), *_failure_heads(rep.verify.findings)]
    verified = "verify ok" if rep.verify.ok else "verify not ok"
    last = Text(f"report: {counts}, {verified} — {'ok' if rep.ok else 'not ok'}")
    return [*heads, last] if verbose else quiet_lines(heads, last, first=note_lines(rep))


def points_table(catalog: Catalog) -> list[RenderableType]:
    """The catalog's points, one row each, and a line counting them."""
    table = Table(show_header=True, header_style="bold", box=None)
    for column in ("id", "facility", "file", "scope", "what"):
        table.add_column(column, overflow="fold")
    for p in catalog.points:
        what = Text(p.title)
        if p.extra:
            what.append(f" (opt-in extra {p.extra}: changes verl's behaviour)", style="yellow")
        elif p.changes_behaviour:
            what.append(" (declared rewrite)", style="dim")
        table.add_row(p.id, p.facility, p.file.removeprefix("verl/"), p.scope, what)
    counts = Counter(p.facility for p in catalog.points if p.extra is None)
    summary = (
        f"{len(catalog.points)} points ({', '.join(f'{n} {f}' for f, n in counts.items())}, "
        f"{sum(1 for p in catalog.points if p.extra)} opt-in); validated on verl {', '.join(catalog.validated_on)}"
    )
    return [table, Text(summary)]


def facility_lines(result: RunResult) -> list[RenderableType]:
    """The points' statuses counted per facility."""
    by_facility = Counter((p.facility, p.status.value) for p in result.points)
    lines: list[RenderableType] = [Text("\npoints per facility:", style="bold")]
    for facility in FACILITIES:
        counts = {s: n for (f, s), n in by_facility.items() if f == facility}
        if counts:
            lines.append(Text(f"  {facility:<12} " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))))
    return lines


_PORT_STYLE = {"ported": "green", "unsure": "yellow", "tie": "yellow", "not-found": "red", "refused": "red"}


def port_lines(result: PortResult, *, written: bool) -> list[RenderableType]:
    """port: where each point it looked for goes and why (the points a scope's move takes along,
    together), and what was written."""
    lines: list[RenderableType] = []
    moves: dict[tuple[str, str, str], list[PortSuggestion]] = {}
    for s in result.suggestions:
        plain = not any(s.anchors) and not any(s.insides) and not s.bindings
        if s.status is PortStatus.PORTED and plain and s.confidence is not None:
            moves.setdefault((s.old_scope, s.new_scope, s.confidence.value), []).append(s)
    shown: set[str] = set()
    for (old, new, confidence), group in moves.items():
        if len(group) < 2:
            continue
        head = Text("  ported     ", style=_PORT_STYLE["ported"])
        head.append(f"{len(group)} points of {old} -> {new} ({confidence}), {group[0].file}")
        lines.append(head)
        lines.append(Text(f"      {group[0].evidence}", style="dim"))
        lines.append(Text("      " + ", ".join(f"{s.point_id}:{s.line}" for s in group)))
        shown.update(s.point_id for s in group)
    for s in result.suggestions:
        if s.point_id not in shown:
            lines += _suggestion_lines(s)
    counts: dict[str, int] = {}
    for s in result.suggestions:
        counts[s.status.value] = counts.get(s.status.value, 0) + 1
    summary = ", ".join(f"{n} {status}" for status, n in counts.items()) or "every selected point is in place"
    lines += kept_lines(result)
    if written and result.written:
        lines.append(Text(f"overrides written: {', '.join(result.written)}"))
        lines.append(Text(f"review: trace-instrument apply --dry-run --anchors {result.out} {result.root}"))
    elif not written and counts.get(PortStatus.PORTED.value):
        lines.append(Text(f"dry run: nothing written (the overrides would go in {result.out})"))
    lines.append(Text(f"port: {summary}"))
    return lines


def recorded_lines(recorded: Recorded | None) -> list[RenderableType]:
    """port: whether the checkout's configuration names the overrides' folder, so that every command
    reads them without a flag."""
    if recorded is None:
        return []
    if recorded.problem:
        return [Text(f"not recorded: {recorded.problem}", style="yellow")]
    done = "recorded" if recorded.added else "already named"
    return [
        Text(
            f'{done} in {recorded.file}: anchors = ["{recorded.folder}"] (commit it):'
            " plain apply, check, verify and remove read the overrides"
        )
    ]


def kept_lines(result: PortResult) -> list[RenderableType]:
    """port: the override files a person edited since port wrote them, left as they are."""
    return [
        Text(f"kept (edited by hand since port wrote it; move it away to have it rewritten): {file}", style="yellow")
        for file in result.kept
    ]


def _suggestion_lines(s: PortSuggestion) -> list[RenderableType]:
    where = f"{s.file}:{s.line}" if s.line else s.file
    head = Text(f"  {s.status.value:<10} ", style=_PORT_STYLE[s.status.value])
    head.append(f"{s.point_id:<42} {where}")
    lines: list[RenderableType] = [head]
    if s.new_scope:
        confidence = f" ({s.confidence.value})" if s.confidence is not None else ""
        lines.append(Text(f"      {s.old_scope} -> {s.new_scope}{confidence}"))
    for number, anchor in enumerate(s.anchors, 1):
        if anchor:
            lines.append(Text(f"      edit {number}: new anchor {anchor.splitlines()[0]!r}"))
    for number, inside in enumerate(s.insides, 1):
        if inside:
            lines.append(Text(f"      edit {number}: inside {inside.splitlines()[0]!r}"))
    for name, expression in s.bindings:
        lines.append(Text(f"      bind {name}: {expression}"))
    if s.evidence:
        lines.append(Text(f"      {s.evidence}", style="dim"))
    if s.message:
        lines.append(Text(f"      {s.message}"))
    if s.runners_up:
        lines.append(Text(f"      also fits: {', '.join(s.runners_up)}", style="dim"))
    return lines + candidate_lines(s.candidates, "      ")
