"""Proving: the overrides loaded and applied as a user would; a refusal's real cause."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from trace_instrument.engine.apply import apply
from trace_instrument.model import (
    Catalog,
    PointResult,
    PortCause,
    PortStatus,
    PortSuggestion,
    Reason,
    Selection,
    Status,
)
from trace_instrument.spec import SpecError

Reload = Callable[[Path], Catalog]  # the catalog with the override folder given added
from trace_instrument.engine.port.decide import _unbound
from trace_instrument.engine.port.writing import _override_files

# -- proving: the overrides loaded and applied as a user would -------------------------------------


def _proven(
    base: Path,
    folder: Path,
    catalog: Catalog,
    selection: Selection,
    reload: Reload,
    suggestions: list[PortSuggestion],
    files: set[str] | None = None,
) -> tuple[list[PortSuggestion], dict[str, PointResult]]:
    """The suggestions, those apply refuses at their new place marked refused, and apply's
    result for every point it refuses for names its code reads that are not defined there.
    `files`: prove the suggestions of these files alone (the others' overrides are loaded with
    them, their verdicts kept); None: every file a suggestion is written for."""
    ported = [s for s in suggestions if s.status is PortStatus.PORTED]
    files = {s.file for s in ported} if files is None else files
    if not ported or not files:
        return suggestions, {}
    with tempfile.TemporaryDirectory(prefix="trace-instrument-port-") as scratch:
        for name, text in _override_files(folder, catalog, ported).items():
            (Path(scratch) / name).write_text(text, encoding="utf-8")
        try:
            reloaded = reload(Path(scratch))
            planned = apply(base, reloaded, _around(reloaded, selection, files), write=False)
        except SpecError as exc:  # the overrides port wrote do not load: none is proven
            why = "; ".join(str(p) for p in exc.problems)
            message = f"the override does not load ({why})"
            refused = [
                replace(s, status=PortStatus.REFUSED, message=message) if s in ported else s for s in suggestions
            ]
            return refused, {}
    outcome = {r.point_id: r for r in planned.points}
    proven = []
    for suggestion in suggestions:
        result = outcome.get(suggestion.point_id)
        proving = suggestion.status is PortStatus.PORTED and suggestion.file in files
        if proving and (result is None or not result.status.in_place):
            suggestion = _refused_by_apply(suggestion, result, outcome, {p.id: p.requires for p in reloaded.points})
        proven.append(suggestion)
    return proven, {point_id: r for point_id, r in outcome.items() if _unbound(r)}


def _refused_by_apply(
    suggestion: PortSuggestion,
    result: PointResult | None,
    outcome: dict[str, PointResult],
    requires: dict[str, tuple[str, ...]],
) -> PortSuggestion:
    """A suggestion apply does not place: its real cause, following a chain of required points
    skipped to the one that is not placeable, and what a person does about it."""
    if result is None:
        return replace(suggestion, status=PortStatus.REFUSED, message="apply does not plan it", cause=PortCause.PROOFS)
    root = _root_requirement(result, outcome, requires)
    if root is None:
        message = f"apply refuses it at its new place ({result.status.value}: {result.message})"
        return replace(suggestion, status=PortStatus.REFUSED, message=message, cause=PortCause.PROOFS)
    why = f"{root.status.value}: {root.message}" if root.message else root.status.value
    message = (
        f"it requires {root.point_id}, which cannot go in this tree as it is ({why}): this point goes once"
        f" {root.point_id} does (an override of it by hand, then port again)"
    )
    return replace(
        suggestion, status=PortStatus.REFUSED, message=message, cause=PortCause.REQUIRED_POINT, blocked_by=root.point_id
    )


def _root_requirement(
    result: PointResult, outcome: dict[str, PointResult], requires: dict[str, tuple[str, ...]]
) -> PointResult | None:
    """The required point at the root of a chain of points skipped for one they require (None: not
    skipped for one)."""
    seen: set[str] = set()
    while result.status is Status.SKIPPED and result.reason is Reason.REQUIREMENT and result.point_id not in seen:
        seen.add(result.point_id)
        lacking = [outcome[r] for r in requires.get(result.point_id, ()) if r in outcome]
        required = next((r for r in lacking if not r.status.in_place), None)
        if required is None:
            return None
        result = required
    return result if seen else None


def _around(catalog: Catalog, selection: Selection, files: set[str]) -> Selection:
    """The selected points of the files the overrides touch, and every point they require: what
    proves the places (the other files' points are as apply found them; sparing them is speed)."""
    wanted = {p.id for p in catalog.points if p.file in files and selection.wants(p)}
    by_id = {p.id: p for p in catalog.points}
    pending = list(wanted)
    while pending:
        for required in by_id[pending.pop()].requires:
            if required not in wanted and required in by_id:
                wanted.add(required)
                pending.append(required)
    return replace(selection, only=frozenset(wanted))
