"""check for CI systems: GitHub workflow annotations and a JUnit XML suite.

Both list the same items as the text and JSON outputs (render.items), so every
format counts alike.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from xml.etree import ElementTree

from trace_instrument.model import PointResult, RunResult, Status
from trace_instrument.render.items import CLEAN, check_items, summarise, version_note


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


def github_annotations(result: RunResult, prefix: str = "") -> str:
    """One `::error` per item that is not clean (each with a file and a line), then a `::notice` summary."""
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
    items = check_items(result)
    for p in items:
        if p.status in CLEAN:
            continue
        path = f"{prefix}/{p.file}" if prefix else p.file
        title = _escape_property(f"{p.status.value}: {p.point_id}")
        where = f"file={_escape_property(path)},line={max(p.line, 1)}"
        lines.append(f"::error {where},title={title}::{_escape_data(_full_message(p))}")
    summary = summarise(items)
    counts = ", ".join(f"{n} {s}" for s, n in summary.by_status.items())
    lines.append(f"::notice title=trace-instrument check::{_escape_data(counts)}")
    return "\n".join(lines)


def _full_message(p: PointResult) -> str:
    message = p.message or p.status.value  # a moved point's says both lines: said once
    return message + ("\n" + p.diff if p.diff else "")


def junit_xml(result: RunResult) -> str:
    """A JUnit suite: one test case per item; not-applicable ones are skipped, unclean ones fail."""
    items = check_items(result)
    failures = [p for p in items if p.status not in CLEAN]
    suite = ElementTree.Element(
        "testsuite",
        name="trace-instrument check",
        tests=str(len(items) + (1 if result.error else 0)),
        failures=str(len(failures)),
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
