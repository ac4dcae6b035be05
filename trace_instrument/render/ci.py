"""check for CI systems: GitHub workflow annotations and a JUnit XML suite.

Both list the same items as the text and JSON outputs (render.items), so every
format counts alike.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from xml.etree import ElementTree

from trace_instrument.model import PointResult, RunResult, Status
from trace_instrument.render.items import (
    CHECK_ORDER,
    CLEAN,
    blocked_points,
    check_items,
    counts_line,
    not_instrumented_message,
    summarise,
    version_note,
)


def repository_prefix(root: str) -> str:
    """The checkout's path inside its git repository ("" at the top or outside git)."""
    try:
        top = subprocess.run(
            ["git", "-C", root, "rev-parse", "--show-toplevel"], check=True, capture_output=True, text=True, timeout=30
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""
    try:
        prefix = Path(root).resolve().relative_to(Path(top).resolve()).as_posix()
    except ValueError:
        return ""
    return "" if prefix == "." else prefix


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def not_instrumented(result: RunResult, target: str) -> str:
    """A checkout never instrumented, in one entry: what to run, and how many points are not there."""
    return f"{not_instrumented_message(target or result.root)} ({counts_line(list(result.points), CHECK_ORDER)})"


def _entries(result: RunResult, verbose: bool) -> list[PointResult]:
    """The items listed one entry each: every one, or (a checkout never instrumented, unless `verbose`)
    only the points apply could not simply place, after the one entry saying so."""
    if result.instrumented or verbose:
        return check_items(result)
    return blocked_points(result)


def github_annotations(result: RunResult, prefix: str = "", *, target: str = "", verbose: bool = False) -> str:
    """One `::error` per item that is not clean (each with a file and a line), then a `::notice` summary.
    A checkout never instrumented: one `::error` saying so, with the count (`verbose`: each point too)."""
    if result.error is not None:
        error = result.error
        where = ""
        if error.path:  # the file the run stopped on (the manifest): the annotation points at its line
            path = f"{prefix}/{error.path}" if prefix else error.path
            where = f"file={_escape_property(path)},line={max(error.line, 1)},"
        return f"::error {where}title=trace-instrument::{_escape_data(error.message)}"
    lines = []
    note = version_note(result.verl_version, result.validated_on)
    if note:
        lines.append(f"::warning title=trace-instrument::{_escape_data(note)}")
    if not result.instrumented and not verbose:
        lines.append(f"::error title=trace-instrument::{_escape_data(not_instrumented(result, target))}")
    for p in _entries(result, verbose):
        if p.status in CLEAN:
            continue
        path = f"{prefix}/{p.file}" if prefix else p.file
        title = _escape_property(f"{p.status.value}: {p.point_id}")
        where = f"file={_escape_property(path)},line={max(p.line, 1)}"
        lines.append(f"::error {where},title={title}::{_escape_data(_full_message(p))}")
    summary = summarise(check_items(result))
    counts = ", ".join(f"{n} {s}" for s, n in summary.by_status.items())
    lines.append(f"::notice title=trace-instrument check::{_escape_data(counts)}")
    return "\n".join(lines)


def _full_message(p: PointResult) -> str:
    message = p.message or p.status.value  # a moved point's says both lines: said once
    return message + ("\n" + p.diff if p.diff else "")


def junit_xml(result: RunResult, *, target: str = "", verbose: bool = False) -> str:
    """A JUnit suite: one test case per item; not-applicable ones are skipped, unclean ones fail.
    A checkout never instrumented: one failing case saying so, with the count (`verbose`: each point)."""
    items = _entries(result, verbose)
    whole = not result.instrumented and not verbose and result.error is None  # the one case for the checkout
    failures = [p for p in items if p.status not in CLEAN]
    suite = ElementTree.Element(
        "testsuite",
        name="trace-instrument check",
        tests=str(len(items) + (1 if result.error or whole else 0)),
        failures=str(len(failures) + (1 if whole else 0)),
        errors="1" if result.error else "0",
        skipped=str(sum(1 for p in items if p.status is Status.NOT_APPLICABLE)),
    )
    note = version_note(result.verl_version, result.validated_on)
    if note:
        properties = ElementTree.SubElement(suite, "properties")
        ElementTree.SubElement(properties, "property", name="warning", value=note)
    if result.error is not None:
        case = ElementTree.SubElement(suite, "testcase", classname="trace-instrument", name="checkout")
        if result.error.path:  # the file the run stopped on (the manifest), at its line
            case.set("file", result.error.path)
            case.set("line", str(max(result.error.line, 1)))
        ElementTree.SubElement(case, "error", message=result.error.message, type=result.error.kind.value)
    if whole:
        case = ElementTree.SubElement(suite, "testcase", classname="trace-instrument", name="checkout")
        ElementTree.SubElement(case, "failure", message=not_instrumented(result, target), type="not-instrumented")
    for p in items:
        case = ElementTree.SubElement(
            suite, "testcase", classname=p.facility or p.point_id, name=p.point_id, file=p.file, line=str(p.line)
        )
        if p.status is Status.NOT_APPLICABLE:
            ElementTree.SubElement(case, "skipped", message=p.message or "not applicable")
        elif p.status not in CLEAN:
            failure = ElementTree.SubElement(
                case, "failure", message=f"{p.status.value}: {p.message}", type=p.status.value
            )
            failure.text = p.diff or _full_message(p)
    return ElementTree.tostring(suite, encoding="unicode", xml_declaration=True)
