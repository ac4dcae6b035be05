"""Where the points of one file fit: each kind of fit tried in turn, the scope's points deciding together."""

from __future__ import annotations

from dataclasses import replace

from trace_instrument.engine.analysis import FileWork
from trace_instrument.engine.port.decide import (
    _consensus,
    _decide,
    _in_moved_class,
    _kept_scope,
    _moved_scopes,
)
from trace_instrument.engine.port.evidence import _Fit, _Spellings

# -- where a point fits --------------------------------------------------------------------------
from trace_instrument.engine.port.match import _block_header, _fits, _placed_all
from trace_instrument.engine.port.place import (
    _aligned_fit,
    _at_the_end,
    _beside_its_edits,
    _branch_fit,
    _condition_fit,
    _counterpart_fit,
    _header_fit,
    _inlined_fit,
    _nearest_fit,
    _neighbour_fit,
    _new_attribute,
    _renames,
    _retimed_fit,
    _return_fit,
    _top_level,
    _without_validation,
)
from trace_instrument.model import (
    Point,
    PointResult,
    PortCause,
    PortStatus,
    PortSuggestion,
    Status,
)


def _suggest(
    work: FileWork, points: list[Point], results: list[PointResult], known: _Spellings
) -> list[PortSuggestion]:
    """A suggestion per point of one file (each in the order given); the spellings its aligned
    anchors show are learnt into `known`."""
    fits, renames = _verbatim_fits(work, points, results)
    consensus = _consensus(points, fits)
    moved = _moved_scopes(work, consensus)
    for point in points:
        if not fits[point.id]:
            scope = (
                renames.get(point.scope)
                or moved.get(point.scope)
                or _in_moved_class(point.scope, moved, work)
                or point.scope
            )
            near = _near_fit(work, point, scope, moved)
            fits[point.id] = [near] if near is not None else []
    _retimed_all(work, points, fits, {**moved, **renames})
    decided = []
    for point, result in zip(points, results):
        suggestion = _decide(point, result, fits[point.id], consensus.get(point.scope), _kept_scope(work, point.scope))
        scope = renames.get(point.scope) or moved.get(point.scope) or point.scope
        decided.append(_with_cause(work, point, suggestion, scope))
        spelled = [f for f in fits[point.id] if f.spelled]
        if spelled and decided[-1].confidence is not None:
            known.learn(point, spelled[0], decided[-1].confidence)
    return decided


def _verbatim_fits(
    work: FileWork, points: list[Point], results: list[PointResult]
) -> tuple[dict[str, list[_Fit]], dict[str, str]]:
    """Where each point's anchors are found verbatim (a def its scope's points show was renamed
    renaming them, a header followed through its rename), validation code set aside; and the renames."""
    fits = {p.id: _fits(work, p, {}) for p in points}
    for point, result in zip(points, results):
        # found in its own scope but for an edit that matches in several of its methods: kept
        # there, that edit told by its neighbours, rather than moved into one method
        beside = _beside_its_edits(work, point, point.scope) if result.status is Status.AMBIGUOUS else None
        if beside is not None:
            fits[point.id] = [beside]
    renames = _renames(work, points, fits)
    for point in points:
        if not fits[point.id] and renames:
            fits[point.id] = _fits(work, point, renames)
        if not fits[point.id] and point.scope in renames:
            header = _header_fit(work, point, renames[point.scope])
            fits[point.id] = [header] if header is not None else []
    return {p.id: _without_validation(work, p, fits[p.id]) for p in points}, renames


def _near_fit(work: FileWork, point: Point, scope: str, moved: dict[str, str]) -> _Fit | None:
    """The first kind of fit that places the point in `scope` though its statements are not there
    word for word (or, its def gone, in the method it was inlined into)."""
    near = None
    if work.locator.index.scope_nodes(scope):
        near = (
            _condition_fit(work, point, scope)
            or _counterpart_fit(work, point, scope)
            or _neighbour_fit(work, point, scope)
            or _branch_fit(work, point, scope)
            or _return_fit(work, point, scope)
            or _aligned_fit(work, point, scope)
            or _nearest_fit(work, point, scope)
        )
    else:
        near = _inlined_fit(work, point, scope, moved)
    free = _new_attribute(work, point, scope)
    if free and (near is None or _top_level(work, near, scope)):
        near = replace(near, free=free) if near is not None else _at_the_end(work, point, scope, free)
    return near


def _retimed_all(work: FileWork, points: list[Point], fits: dict[str, list[_Fit]], moved: dict[str, str]) -> None:
    """A timer one point showed named otherwise here renames the anchors of the scope's other points
    that name it, stronger evidence than statements only alike (a nearest fit, a guess): in place."""
    timers = {
        old: (new, point.id)
        for point in points
        for fit in fits[point.id][:1]
        if len(fits[point.id]) == 1
        for old, new in fit.retimed
    }
    for point in points:
        if timers and all(f.nearest for f in fits[point.id]):
            retimed = _retimed_fit(work, point, moved.get(point.scope) or point.scope, timers)
            fits[point.id] = [retimed] if retimed is not None else fits[point.id]


def _with_cause(work: FileWork, point: Point, suggestion: PortSuggestion, scope: str) -> PortSuggestion:
    """A point found nowhere whose anchors' statements are in `scope` but in another block than
    the edit's `inside`: its message says so, naming the block they are in here."""
    if suggestion.status is not PortStatus.NOT_FOUND or not work.locator.index.scope_nodes(scope):
        return suggestion
    loose = [replace(e, anchors=(replace(e.anchors[0], inside=None),)) for e in point.edits]
    placements = _placed_all(work, replace(point, scope=scope, edits=tuple(loose)))
    if placements is None:
        return suggestion
    for edit, placement in zip(point.edits, placements):
        inside = edit.anchors[0].inside
        stmt = placement.neighbor if placement.neighbor is not None else next(iter(placement.region), None)
        if inside is None or stmt is None:
            continue
        here = _block_header(work, stmt) or f"the top level of {scope}"
        why = (
            f"its anchor's statements are in {scope} (line {placement.line}), but the block around them differs:"
            f" `{here.splitlines()[0]}` here, `{inside.text.splitlines()[0]}` in the validated release;"
            " an override whose `inside` is the block here places it (for a person: is it the same block?)"
        )
        return replace(suggestion, message=why, cause=PortCause.ENCLOSING_BLOCK)
    return suggestion
