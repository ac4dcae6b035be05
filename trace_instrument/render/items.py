"""The items a run reports, shared by every format so their counts agree."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from trace_instrument.model import PointResult, Reason, RunResult, RuntimeFile, RuntimeStatus, Status

# How a runtime file's state reads as a point status in check's outputs.
RUNTIME_AS_STATUS = {
    RuntimeStatus.PRESENT: Status.PRESENT,
    RuntimeStatus.MISSING: Status.MISSING,
    RuntimeStatus.OUTDATED: Status.STALE,
    RuntimeStatus.DRIFTED: Status.DRIFTED,
    RuntimeStatus.CREATED: Status.APPLIED,
    RuntimeStatus.UPDATED: Status.UPDATED,
    RuntimeStatus.REMOVED: Status.REMOVED,
    RuntimeStatus.KEPT_IN_USE: Status.KEPT,
    RuntimeStatus.KEPT_EDITED: Status.KEPT,
    RuntimeStatus.NOT_OURS: Status.REFUSED,  # apply refuses to install while it is there
    RuntimeStatus.STALE_BYTECODE: Status.BROKEN,  # the package would not run as installed
}
# The reason a runtime item carries, when its status alone does not say.
RUNTIME_REASONS = {RuntimeStatus.NOT_OURS: Reason.NOT_OURS, RuntimeStatus.STALE_BYTECODE: Reason.STALE_BYTECODE}
CLEAN = frozenset({Status.PRESENT, Status.NOT_APPLICABLE})
# a point of a checkout never instrumented that apply would simply place (or has nowhere to place)
NOT_YET = frozenset({Status.MISSING, Status.NOT_APPLICABLE, Status.SKIPPED})
# check's order of statuses in a line of counts
CHECK_ORDER = [Status.PRESENT, Status.NOT_APPLICABLE, Status.MISSING, Status.BROKEN, Status.MOVED, Status.DRIFTED]


@dataclass(frozen=True)
class Summary:
    """Counts of a list of items: how many, per status, and whether all are clean."""

    total: int
    by_status: dict[str, int]
    clean: bool


def runtime_item(file: RuntimeFile) -> PointResult:
    """A runtime file as a point result (id "runtime"), so it is listed and counted like one."""
    status = RUNTIME_AS_STATUS[file.status]
    message = "" if file.status is RuntimeStatus.PRESENT else runtime_message(file)
    return PointResult(
        "runtime", "runtime", file.path, status, message=message, reason=RUNTIME_REASONS.get(file.status)
    )


def runtime_message(file: RuntimeFile) -> str:
    """What a runtime file's state means and what to do about it (the state's name when nothing to do)."""
    messages = {
        RuntimeStatus.MISSING: "runtime file missing; `trace-instrument apply` puts it back",
        RuntimeStatus.OUTDATED: "runtime file from an older release of the tool; `trace-instrument apply` updates it",
        RuntimeStatus.DRIFTED: "runtime file edited by hand; delete it and `trace-instrument apply` puts ours back",
        RuntimeStatus.KEPT_IN_USE: "kept: still imported by " + ", ".join(file.users[:5]),
        RuntimeStatus.KEPT_EDITED: "kept: a file of the package was edited by hand (--force removes it)",
    }
    if file.detail:
        return file.detail  # not-ours, stale bytecode: the path, why, and the way out
    return messages.get(file.status, file.status.value)


def check_items(result: RunResult) -> list[PointResult]:
    """Every point, then every runtime file, then what a killed run left: what check reports, in
    every format."""
    return [*result.points, *(runtime_item(f) for f in result.runtime_files), *result.unfinished]


def not_instrumented_message(target: str) -> str:
    """What check, verify and report say first on a checkout that holds nothing of the tool's."""
    return f"not instrumented: run `trace-instrument apply {target}`"


def blocked_points(result: RunResult) -> list[PointResult]:
    """A checkout never instrumented: the points apply could not simply place (an anchor lost, say),
    each worth saying; a point merely absent is not."""
    return [p for p in result.points if p.status not in NOT_YET]


def summarise(items: list[PointResult], has_error: bool = False) -> Summary:
    """The items' counts; clean when there was no error and every item is present or not applicable."""
    counts = Counter(p.status.value for p in items)
    clean = not has_error and all(p.status in CLEAN for p in items)
    return Summary(len(items), dict(sorted(counts.items())), clean)


def counts_line(items: list[PointResult], order: list[Status]) -> str:
    """ "93 present, 1 broken": the statuses in `order` first, then the others."""
    counts = Counter(p.status for p in items)
    parts = [f"{counts[s]} {s.value}" for s in order if counts[s]]
    parts += [f"{n} {s.value}" for s, n in sorted(counts.items(), key=lambda kv: kv[0].value) if s not in order and n]
    return ", ".join(parts) if parts else "no points selected"


def remove_counts(items: list[PointResult]) -> str:
    """remove's summary: what it took out (or kept), then how many points had no code to take out,
    in words that are not a problem's ("94 removed; 4 not in the checkout"): remove leaves a point
    without code as it found it (never applied, an extra not selected, its file not in this verl)."""
    absent = [p for p in items if p.status in _NO_CODE]
    there = [p for p in items if p.status not in _NO_CODE]
    elsewhere = sum(1 for p in absent if p.status is Status.NOT_APPLICABLE)
    files = f" ({elsewhere} in files this verl does not have)" if elsewhere else ""
    if not items:
        return "no points selected"
    if not there:
        return f"none of the {len(absent)} points is in the checkout{files}"
    line = counts_line(there, [Status.REMOVED, Status.KEPT])
    return f"{line}; {len(absent)} {REMOVE_WORDS[Status.MISSING]}{files}" if absent else line


_NO_CODE = frozenset({Status.MISSING, Status.NOT_APPLICABLE})  # what remove finds no code of
REMOVE_WORDS = {Status.MISSING: "not in the checkout"}  # remove's word for a point it found no code of


def version_note(verl_version: str, validated_on: tuple[str, ...]) -> str:
    """One line when the checkout's verl is not a release the catalog was validated on ("" otherwise)."""
    if not verl_version or not validated_on or verl_version in validated_on:
        return ""
    return (
        f"verl {verl_version} is not a release this catalog was validated on ({', '.join(validated_on)}); "
        "anchors may match differently: read `check` and `verify` closely"
    )
