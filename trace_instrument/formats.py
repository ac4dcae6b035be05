"""Machine-readable renderings of a check result: JSON, GitHub annotations, JUnit XML.

Part of the command-line layer (pure text out of results; no printing here).
"""

from __future__ import annotations

import json
from collections import Counter
from xml.etree import ElementTree

from trace_instrument.model import PointResult, RunResult, Status

CLEAN = (Status.PRESENT, Status.NOT_APPLICABLE)


def _runtime_points(result: RunResult) -> list[PointResult]:
    return [
        PointResult(
            "runtime",
            "runtime",
            path,
            Status.PRESENT if status == "present" else (Status.MISSING if status == "missing" else Status.DRIFTED),
            message="" if status == "present" else f"runtime file {status}",
        )
        for path, status in result.runtime_files
    ]


def check_points(result: RunResult) -> list[PointResult]:
    return [*result.points, *_runtime_points(result)]


def check_json(result: RunResult) -> str:
    points = check_points(result)
    body = {
        "points": [
            {
                "id": p.point_id,
                "facility": p.facility,
                "status": p.status.value,
                "file": p.file,
                "line": p.line,
                "message": p.message,
                **({"diff": p.diff} if p.diff else {}),
                **(
                    {"candidates": [{"line": c.line, "code": c.code, "score": c.score} for c in p.candidates]}
                    if p.candidates
                    else {}
                ),
            }
            for p in points
        ],
        "summary": {
            "total": len(points),
            "clean": all(p.status in CLEAN for p in points) and not result.error,
            "error": result.error,
            "by_status": dict(Counter(p.status.value for p in points)),
        },
    }
    return json.dumps(body, indent=2)


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def github_annotations(result: RunResult) -> str:
    if result.error:
        return f"::error title=trace-instrument::{_escape_data(result.error)}"
    lines = []
    for p in check_points(result):
        if p.status in CLEAN:
            continue
        title = _escape_property(f"{p.status.value}: {p.point_id}")
        where = f"file={_escape_property(p.file)}" + (f",line={p.line}" if p.line else "")
        message = p.message or p.status.value
        if p.diff:
            message += "\n" + p.diff
        lines.append(f"::error {where},title={title}::{_escape_data(message)}")
    counts = Counter(p.status.value for p in check_points(result))
    lines.append(
        f"::notice title=trace-instrument check::{_escape_data(', '.join(f'{n} {s}' for s, n in sorted(counts.items())))}"
    )
    return "\n".join(lines)


def junit_xml(result: RunResult) -> str:
    points = check_points(result)
    failures = [p for p in points if p.status not in CLEAN]
    suite = ElementTree.Element(
        "testsuite",
        name="trace-instrument check",
        tests=str(len(points) + (1 if result.error else 0)),
        failures=str(len(failures)),
        errors="1" if result.error else "0",
        skipped=str(sum(1 for p in points if p.status is Status.NOT_APPLICABLE)),
    )
    if result.error:
        case = ElementTree.SubElement(suite, "testcase", classname="trace-instrument", name="checkout")
        ElementTree.SubElement(case, "error", message=result.error)
    for p in points:
        case = ElementTree.SubElement(
            suite, "testcase", classname=p.facility or "unexpected", name=p.point_id, file=p.file, line=str(p.line)
        )
        if p.status is Status.NOT_APPLICABLE:
            ElementTree.SubElement(case, "skipped", message=p.message or "not applicable")
        elif p.status not in CLEAN:
            failure = ElementTree.SubElement(
                case, "failure", message=f"{p.status.value}: {p.message}", type=p.status.value
            )
            failure.text = p.diff or p.message
    return ElementTree.tostring(suite, encoding="unicode", xml_declaration=True)
