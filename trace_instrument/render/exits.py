"""Exit codes, from the typed results alone."""

from __future__ import annotations

from typing import TYPE_CHECKING

from trace_instrument.model import PortResult, PortStatus, RunResult, RuntimeStatus, Status, VerifyResult
from trace_instrument.render.items import CLEAN, check_items

if TYPE_CHECKING:
    from trace_instrument.engine.report import Report

OK, FAILED, ERROR = 0, 1, 2
INTERRUPTED = {"SIGINT": 130, "SIGTERM": 143, "SIGHUP": 129}  # 128 + the signal, as a shell says

PLACED = frozenset({Status.APPLIED, Status.PRESENT, Status.REPAIRED, Status.UPDATED, Status.NOT_APPLICABLE})


def _errored(result: RunResult) -> bool:
    return result.error is not None or any(f.error is not None for f in result.files)


def apply_exit(result: RunResult) -> int:
    """0 every selected point in place, 1 some could not be placed, 2 an error."""
    if _errored(result):
        return ERROR
    runtime_ok = all(f.status.ok for f in result.runtime_files)
    return OK if runtime_ok and all(p.status in PLACED for p in result.points) else FAILED


def check_exit(result: RunResult) -> int:
    """0 clean, 1 drift (anything not present and runnable), 2 an error."""
    if _errored(result):
        return ERROR
    if result.unfinished:  # the points may all be present: a killed run's tree is not clean
        return FAILED
    return OK if all(p.status in CLEAN for p in check_items(result)) else FAILED


def remove_exit(result: RunResult) -> int:
    """0 all out, 1 something kept, 2 an error."""
    if _errored(result):
        return ERROR
    kept_points = any(p.status in (Status.KEPT, Status.ERROR, Status.UNEXPECTED) for p in result.points)
    kept_runtime = any(f.status in (RuntimeStatus.KEPT_EDITED, RuntimeStatus.KEPT_IN_USE) for f in result.runtime_files)
    return FAILED if kept_points or kept_runtime else OK


def verify_exit(result: VerifyResult) -> int:
    """0 every proof holds, 1 one fails, 2 an error."""
    if result.error is not None:
        return ERROR
    return OK if result.ok else FAILED


def report_exit(report: Report) -> int:
    """0 the report is ok (Report.ok), 1 it is not, 2 an error."""
    if report.error is not None:
        return ERROR
    return OK if report.ok else FAILED


def port_exit(result: PortResult) -> int:
    """0 every point that was not in place is ported, 1 some are left for a person, 2 an error."""
    if result.error is not None:
        return ERROR
    return OK if all(s.status is PortStatus.PORTED for s in result.suggestions) else FAILED
