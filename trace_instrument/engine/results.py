"""Building the typed results every operation returns."""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from trace_instrument.model import FileError, FileProblemKind, FileResult, Point, PointResult, Reason, Status

R = TypeVar("R")

if TYPE_CHECKING:
    from trace_instrument.engine.analysis import FileProblem


def point_result(point: Point, status: Status, **details: Any) -> PointResult:
    return PointResult(point.id, point.facility, point.file, status, **details)


def problem_results(work: FileProblem, points: list[Point]) -> FileResult:
    """Every point of a file that cannot be worked on: not applicable (no file) or skipped."""
    if work.missing:
        results = tuple(point_result(p, Status.NOT_APPLICABLE, message=work.message) for p in points)
        return FileResult(work.path, results)
    results = tuple(
        point_result(p, Status.SKIPPED, line=work.line, message=work.message, reason=Reason.FILE_PROBLEM)
        for p in points
    )
    kind = work.kind or FileProblemKind.UNREADABLE
    return FileResult(work.path, results, error=FileError(kind, work.message))


def internal_error(path: str, points: list[Point], exc: BaseException) -> FileResult:
    """A failure of the tool itself on one file, reported as that file's error, with its traceback."""
    message = f"internal error ({type(exc).__name__}: {exc}); please report it"
    trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    results = tuple(point_result(p, Status.ERROR, message=message, reason=Reason.INTERNAL) for p in points)
    return FileResult(path, results, error=FileError(FileProblemKind.INTERNAL, message, trace))


def one_file(relative: str, points: list[Point], job: Callable[[], R], wrap: Callable[[FileResult], R]) -> R:
    """One file's job of a run (apply, check, remove): whatever goes wrong in it becomes that
    file's error (`wrap`ped as the job's own result), never the run's crash."""
    try:
        return job()
    except Exception as exc:  # noqa: BLE001 - contain it to the file
        return wrap(internal_error(relative, points, exc))


def excluded_reason(point: Point, selected: frozenset[str]) -> str:
    """Why a point that requires others is not placed (apply's and check's words for it)."""
    missing = [r for r in point.requires if r not in selected]
    if not missing:
        return f"requires {', '.join(point.requires)}, which is not in place"
    return f"requires {missing[0]} (not selected)"
