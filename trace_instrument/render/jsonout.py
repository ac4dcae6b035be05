"""JSON renderings of every command's result; each shape has a JSON Schema in render/schemas/."""

from __future__ import annotations

import json
from importlib import resources
from typing import TYPE_CHECKING, Any

from trace_instrument.model import (
    Candidate,
    Catalog,
    CodeStyle,
    ContextIssue,
    EditOutcome,
    FileError,
    FormatterMismatch,
    NameIssue,
    Overridden,
    PointResult,
    PortResult,
    RunError,
    RunResult,
    RuntimeFile,
    VerifyResult,
)
from trace_instrument.render import exits
from trace_instrument.render.items import check_items, summarise
from trace_instrument.spec.project import Recorded

if TYPE_CHECKING:
    from trace_instrument.engine.report import Report


# The version of the check, verify and run (apply, remove) JSON shapes, as `analyze --format json` has
# one: raised when a key is renamed or removed or its meaning changes (new keys keep it).
SCHEMA_VERSION = 1


def schema(name: str) -> dict[str, Any]:
    """The JSON Schema of one output shape (run: apply and remove)."""
    # one name per step: Traversable.joinpath takes several only from Python 3.11
    text = (resources.files("trace_instrument.render") / "schemas" / f"{name}.schema.json").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def dumps(body: dict[str, Any]) -> str:
    """A JSON output as printed: indented, non-ASCII kept."""
    return json.dumps(body, indent=2, ensure_ascii=False)


def _error(error: RunError | None) -> dict[str, str | int] | None:
    if error is None:
        return None
    return {
        "kind": error.kind.value,
        "message": error.message,
        "path": error.path,
        "line": error.line,
        "install": error.install,
    }


def _style(style: CodeStyle | None, mismatch: FormatterMismatch | None) -> dict[str, object] | None:
    if style is None:
        return None
    differs = {"pinned": mismatch.style.pinned, "installed": mismatch.installed} if mismatch else None
    return {"formatter": style.formatter.value, "found_in": style.found_in, "mismatch": differs}


def _file_error(error: FileError | None) -> dict[str, str] | None:
    if error is None:
        return None
    return {"kind": error.kind.value, "message": error.message, "traceback": error.traceback}


def _name(issue: NameIssue) -> dict[str, Any]:
    return {
        "name": issue.name,
        "line": issue.line,
        "problem": issue.problem.value,
        "binding": issue.binding,
        "binding_line": issue.binding_line,
        "expected": issue.expected,
        "relation": issue.relation,
        "text": str(issue),
    }


def _context(issue: ContextIssue) -> dict[str, Any]:
    return {
        "subject": issue.subject,
        "line": issue.line,
        "problem": issue.problem.value,
        "statement": issue.statement,
        "statement_line": issue.statement_line,
        "why": issue.why,
        "reader": issue.reader,
        "reader_where": issue.reader_where,
        "text": str(issue),
    }


def _candidate(c: Candidate) -> dict[str, Any]:
    return {"line": c.line, "code": c.code, "score": c.score}


def _edit(e: EditOutcome) -> dict[str, Any]:
    return {
        "index": e.index,
        "of": e.of,
        "template": e.template,
        "status": e.status.value,
        "reason": e.reason.value,
        "message": e.message,
        "line": e.line,
        "candidates": [_candidate(c) for c in e.candidates],
    }


def point(p: PointResult) -> dict[str, Any]:
    """One point result, as every output that lists points shows it."""
    return {
        "id": p.point_id,
        "facility": p.facility,
        "file": p.file,
        "status": p.status.value,
        "line": p.line,
        "message": p.message,
        "reason": p.reason.value if p.reason is not None else None,
        "expected_line": p.expected_line,
        "names": [_name(n) for n in p.names],
        "context": [_context(c) for c in p.context],
        "candidates": [_candidate(c) for c in p.candidates],
        "diff": p.diff,
        "edits": [_edit(e) for e in p.edits],
        "override": _override(p.overridden),
        "insert_lines": list(p.insert_lines),
    }


def _override(mark: Overridden | None) -> dict[str, Any] | None:
    """The override that re-anchors a point: where it is, and port's grade and reason when port wrote it."""
    if mark is None:
        return None
    confidence = mark.confidence.value if mark.confidence is not None else None
    return {"file": mark.source.file, "line": mark.source.line, "confidence": confidence, "evidence": mark.evidence}


def _runtime(file: RuntimeFile) -> dict[str, Any]:
    return {"path": file.path, "status": file.status.value, "users": list(file.users), "detail": file.detail}


def run(command: str, result: RunResult, *, dry_run: bool, config: str | None = None) -> dict[str, Any]:
    """apply and remove; `config` names the project configuration read (None: none)."""
    code = exits.apply_exit(result) if command == "apply" else exits.remove_exit(result)
    return {
        "schema": SCHEMA_VERSION,
        "command": command,
        "root": result.root,
        "config": config,
        "style": _style(result.style, result.formatter_mismatch),
        "dry_run": dry_run,
        "written": result.written,
        "error": _error(result.error),
        "verl_version": result.verl_version,
        "validated": result.validated,
        "points": [point(p) for p in result.points],
        "files": [{"path": f.path, "changed": f.changed, "error": _file_error(f.error)} for f in result.files],
        "runtime": [_runtime(f) for f in result.runtime_files],
        "summary": {**_summary(result.points, False), "clean": code == exits.OK},
        "exit_code": code,
    }


def check(result: RunResult, *, config: str | None = None) -> dict[str, Any]:
    """check: every point and runtime file, file errors, the summary and the exit code."""
    items = check_items(result)
    return {
        "schema": SCHEMA_VERSION,
        "command": "check",
        "root": result.root,
        "config": config,
        "error": _error(result.error),
        "instrumented": result.instrumented,
        "verl_version": result.verl_version,
        "validated": result.validated,
        "points": [point(p) for p in items],
        "files": [{"path": f.path, "error": _file_error(f.error)} for f in result.files if f.error is not None],
        "summary": _summary(items, result.error is not None or any(f.error for f in result.files)),
        "exit_code": exits.check_exit(result),
    }


def _summary(items: list[PointResult] | tuple[PointResult, ...], has_error: bool) -> dict[str, Any]:
    summary = summarise(list(items), has_error)
    return {"total": summary.total, "clean": summary.clean, "by_status": summary.by_status}


def verify(result: VerifyResult, *, config: str | None = None) -> dict[str, Any]:
    """verify: every finding, the call counts per file and the exit code."""
    return {
        "schema": SCHEMA_VERSION,
        "command": "verify",
        "root": result.root,
        "config": config,
        "ok": result.ok,
        "instrumented": result.instrumented,
        "error": _error(result.error),
        "findings": [
            {"check": f.check.value, "subject": f.subject, "ok": f.ok, "message": f.message, "line": f.line}
            for f in result.findings
        ],
        "counts": [{"file": c.file, "call": c.call, "expected": c.expected, "actual": c.actual} for c in result.counts],
        "exit_code": exits.verify_exit(result),
    }


def report(rep: Report, outputs: tuple[tuple[str, str], ...], *, config: str | None = None) -> dict[str, Any]:
    """report: the report's sections, verify's output within it, and where the traces go (`outputs`)."""
    return {
        "command": "report",
        "root": rep.root,
        "config": config,
        "error": _error(rep.error),
        "ok": rep.ok,
        "verl_version": rep.verl_version,
        "validated_on": list(rep.validated_on),
        "validated": rep.validated,
        "runtime": [_runtime(f) for f in rep.runtime_files],
        "facilities": [
            {"facility": f.facility, "in_place": f.in_place, "applicable": f.applicable} for f in rep.facilities
        ],
        "calls": [{"call": c.call, "found": c.found, "expected": c.expected} for c in rep.calls],
        "stages": [{"stage": s.stage, "covered": s.covered} for s in rep.stages],
        "not_in_place": [point(p) for p in rep.not_in_place],
        "verify": verify(rep.verify, config=config),
        "outputs": [{"what": w, "where": p} for w, p in outputs],
        "exit_code": exits.report_exit(rep),
    }


def points(catalog: Catalog) -> dict[str, Any]:
    """points: the catalog's points and the releases it was validated on."""
    return {
        "command": "points",
        "validated_on": list(catalog.validated_on),
        "points": [
            {
                "id": p.id,
                "facility": p.facility,
                "file": p.file,
                "scope": p.scope,
                "title": p.title,
                "edits": len(p.edits),
                "extra": p.extra,
                "default": p.extra is None,
                "changes_behaviour": " ".join(p.changes_behaviour.split()),
                "requires": list(p.requires),
                "spec": str(p.source),
            }
            for p in catalog.points
        ],
    }


def port(
    result: PortResult, *, dry_run: bool, config: str | None = None, recorded: Recorded | None = None
) -> dict[str, Any]:
    """port: a suggestion per point that was not in place, the override files (those kept as a person
    edited them), where the configuration names their folder, and the exit code."""
    named = None
    if recorded is not None:
        file = str(recorded.file) if recorded.file is not None else None
        named = {"folder": recorded.folder, "file": file, "added": recorded.added, "problem": recorded.problem}
    return {
        "command": "port",
        "root": result.root,
        "config": config,
        "dry_run": dry_run,
        "error": _error(result.error),
        "out": result.out,
        "written": list(result.written),
        "kept": list(result.kept),
        "recorded": named,
        "points": [
            {
                "id": s.point_id,
                "file": s.file,
                "status": s.status.value,
                "old_scope": s.old_scope,
                "new_scope": s.new_scope,
                "anchors": list(s.anchors),
                "confidence": s.confidence.value if s.confidence is not None else None,
                "line": s.line,
                "evidence": s.evidence,
                "runners_up": list(s.runners_up),
                "message": s.message,
                "bind": dict(s.bindings),
                "insides": list(s.insides) or [""] * len(s.anchors),
                "candidates": [_candidate(c) for c in s.candidates],
                "cause": s.cause.value if s.cause is not None else None,
                "blocked_by": s.blocked_by,
            }
            for s in result.suggestions
        ],
        "exit_code": exits.port_exit(result),
    }
