"""Overrides: a fork re-anchors a point declared elsewhere (usually a shipped one).

An override names the point by id and says only where it goes now: its
anchors (one per edit, each with optional alternatives), its scope, and the
file (the `file:` of the spec file the override sits in). Everything else is
the declared point's: id, facility, title, templates, markers, requires,
imports, extra, and so the manifest entry and the recognition of code already
in place. check, verify and remove work by id and template, so they follow.
An override may also `bind` a name the point's code reads to the expression
this tree computes it with (spec/binding.py); the code read so is recorded and
recognised as the point's.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, replace

from trace_instrument.model import Anchor, Confidence, Edit, Overridden, Point, SpecSource
from trace_instrument.spec.binding import bind_point, read_bind
from trace_instrument.spec.reading import (
    PLACE_KEYS,
    Context,
    mapping,
    point_id,
    read_places,
    same_kind_of_edit,
    scope,
    string,
    template_fits,
)
from trace_instrument.spec.yamlnodes import Node

OVERRIDE_KEYS = PLACE_KEYS | {"overrides", "scope", "edits", "description", "bind", "ported"}
PORTED_KEYS = ("confidence", "evidence")  # `ported:`, what port wrote of how sure it was and why
_CODE_STAYS = (
    "an override keeps the point's template and code (that is how check, verify and remove recognise it); "
    "it changes only where the point goes. To insert other code, declare a point of your own"
)
_KEPT = "an override changes only where the point goes; {key!r} stays the overridden point's"
REFUSED_IN_OVERRIDE = {
    "template": _CODE_STAYS,
    "code": _CODE_STAYS,
    **{
        key: _KEPT.format(key=key)
        for key in (
            "id",
            "facility",
            "title",
            "marker",
            "requires",
            "imports",
            "extra",
            "changes_behaviour",
            "must_run",
            "after_block",
        )
    },
}
REFUSED_IN_OVERRIDE_EDIT = {"template": _CODE_STAYS, "code": _CODE_STAYS}


@dataclass(frozen=True, eq=False)
class PlacedEdit:
    """The new anchors of one edit of the overridden point, in the order of its edits."""

    anchors: tuple[Anchor, ...]
    source: SpecSource


@dataclass(frozen=True, eq=False)
class Override:
    """`overrides: ID` with where the point goes now (None: as declared)."""

    target: str
    file: str
    scope: str | None
    places: tuple[PlacedEdit, ...] | None
    source: SpecSource
    bindings: dict[str, str] | None = None  # `bind`: names its code reads as this tree spells them
    bind_source: SpecSource | None = None
    marked: Overridden | None = None  # what a point it re-anchors carries: its source, `ported:`'s grade and reason


def is_override(node: Node) -> bool:
    """Is this entry of `points:` an override (it has an `overrides` key)?"""
    return node.is_mapping and any(key == "overrides" for key, _ in node.items())


def read_override(ctx: Context, node: Node, file: str) -> Override | None:
    """One override entry, checked on its own (the point it names is checked later)."""
    data = mapping(ctx, node, OVERRIDE_KEYS, required=("overrides",), refused=REFUSED_IN_OVERRIDE)
    if "overrides" not in data:
        return None
    target = point_id(ctx, data["overrides"], "overrides")
    where_in = scope(ctx, data["scope"]) if "scope" in data else None
    if "description" in data:
        string(ctx, data["description"], "description")
    places = _read_edit_places(ctx, node, data)
    bindings = read_bind(ctx, data["bind"]) if "bind" in data else None
    if places == () and "scope" not in data and "bind" not in data:
        ctx.problem(
            node.where("overrides"),
            "changes nothing: give the new anchors ('after', ... or 'edits'), 'scope', 'bind', or several",
        )
        return None
    if target is None or ("scope" in data and where_in is None) or places is None:
        return None
    if "bind" in data and bindings is None:
        return None
    ported = _read_ported(ctx, data["ported"]) if "ported" in data else (None, "")
    if ported is None:
        return None
    bind_source = data["bind"].where("bind") if "bind" in data else None
    source = data["overrides"].where("overrides")
    marked = Overridden(source, *ported)
    return Override(target, file, where_in, places or None, source, bindings, bind_source, marked)


def _read_ported(ctx: Context, node: Node) -> tuple[Confidence, str] | None:
    """`ported: {confidence: likely, evidence: ...}`: how sure port was of the place and why
    (apply --dry-run shows it beside the point's hunk); None after a problem."""
    data = mapping(ctx, node, PORTED_KEYS, required=("confidence",))
    if "confidence" not in data:
        return None
    grade = string(ctx, data["confidence"], "confidence")
    evidence = string(ctx, data["evidence"], "evidence") if "evidence" in data else ""
    known = [c.value for c in Confidence]
    if grade is not None and grade not in known:
        ctx.problem(data["confidence"].where("confidence"), f"must be one of {', '.join(known)}, not {grade!r}")
        return None
    if grade is None or evidence is None:
        return None
    return Confidence(grade), evidence


def _read_edit_places(ctx: Context, node: Node, data: dict[str, Node]) -> tuple[PlacedEdit, ...] | None:
    """The anchors of every edit; () when the override gives none, None after a problem."""
    top = {key: value for key, value in data.items() if key in PLACE_KEYS}
    if "edits" not in data:
        if not top:
            return ()
        anchors = read_places(ctx, node, top)
        return None if anchors is None else (PlacedEdit(tuple(anchors), node.where("overrides")),)
    if top:
        first = min(top)
        ctx.problem(top[first].where(first), "put anchor keys inside 'edits' or use no 'edits' list")
        return None
    edits = data["edits"]
    if not edits.is_sequence or not edits.elements():
        ctx.problem(edits.where("edits"), "must be a non-empty list of edits")
        return None
    placed = []
    for item in edits.elements():
        item_data = mapping(ctx, item, PLACE_KEYS, refused=REFUSED_IN_OVERRIDE_EDIT)
        anchors = read_places(ctx, item, item_data) if item.is_mapping else None
        if anchors is not None:
            placed.append(PlacedEdit(tuple(anchors), item.where("edits")))
    return tuple(placed) if len(placed) == len(edits.elements()) else None


def apply_overrides(ctx: Context, points: list[Point], overrides: list[Override]) -> list[Point]:
    """The points with each override applied in place (the catalog order does not change)."""
    position = {point.id: index for index, point in enumerate(points)}
    result = list(points)
    done: dict[str, SpecSource] = {}
    for override in overrides:
        if override.target in done:
            ctx.problem(override.source, f"{override.target!r} is overridden twice (first at {done[override.target]})")
            continue
        if override.target not in position:
            ctx.problem(override.source, _unknown(override.target, list(position)))
            continue
        done[override.target] = override.source
        index = position[override.target]
        changed = _overridden(ctx, points[index], override)
        if changed is not None:
            result[index] = changed
    return result


def _unknown(target: str, known: list[str]) -> str:
    close = [repr(c) for c in difflib.get_close_matches(target, known, n=3, cutoff=0.6)]
    if not close:
        return f"overrides unknown point {target!r} (`trace-instrument points` lists them)"
    choices = close[0] if len(close) == 1 else f"{', '.join(close[:-1])} or {close[-1]}"
    return f"overrides unknown point {target!r} (did you mean {choices}?)"


def _overridden(ctx: Context, point: Point, override: Override) -> Point | None:
    """The point re-anchored, or None after a problem."""
    edits = point.edits if override.places is None else _new_edits(ctx, point, override.places)
    if edits is None:
        return None
    if override.file != point.file:
        # the point joins another file: it goes after that file's own edits in a shared gap
        edits = tuple(replace(edit, rank=ctx.take_rank(override.file)) for edit in edits)
    moved = replace(
        point,
        file=override.file,
        scope=override.scope or point.scope,
        edits=edits,
        source=SpecSource(override.source.file, override.source.line, f"overrides {point.id}"),
        overridden=override.marked,
    )
    if override.bindings is None or override.bind_source is None:
        return moved
    return bind_point(ctx, moved, override.bindings, override.bind_source)


def _new_edits(ctx: Context, point: Point, places: tuple[PlacedEdit, ...]) -> tuple[Edit, ...] | None:
    if len(places) != len(point.edits):
        ctx.problem(
            places[0].source,
            f"{point.id} has {len(point.edits)} edits (declared at {point.source}); an override lists the "
            f"anchors of every one, in the same order, under 'edits' (this one gives {len(places)})",
        )
        return None
    edits = []
    for number, (edit, placed) in enumerate(zip(point.edits, places), start=1):
        anchors = list(placed.anchors)
        if not same_kind_of_edit(edit.kind, anchors[0].kind):
            wanted = "after, before, body_start or body_end" if edit.kind.inserts else f"'{edit.kind.value}'"
            ctx.problem(
                anchors[0].source,
                f"edit {number} of {point.id} is a '{edit.kind.value}' edit and keeps its template: "
                f"its new anchor must be {wanted}",
            )
            return None
        if not template_fits(ctx, placed.source, anchors, edit.template):
            return None
        edits.append(replace(edit, anchors=tuple(anchors)))
    return tuple(edits)
