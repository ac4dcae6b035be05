"""What port found of a point's place: the fit and the spellings the anchors showed."""

from __future__ import annotations

from dataclasses import dataclass, field

from trace_instrument.engine.analysis import FileWork
from trace_instrument.locate import Placement
from trace_instrument.model import (
    Confidence,
    Point,
)


@dataclass(frozen=True)
class _Fit:
    """A scope where every edit of the point finds its place exactly once."""

    scope: str
    anchors: tuple[str, ...]  # per edit: the new anchor text ("" where the point's own is kept)
    placements: tuple[Placement, ...]
    renamed: str = ""  # the renames its anchors were adapted to, as evidence says them
    counterpart: str = ""  # for a fit by statements that do the anchors' work otherwise: what differs
    nearest: str = ""  # for a fit by similar statements: what differs, as evidence says it
    spelled: tuple[tuple[str, str], ...] = ()  # for a fit by aligned statements: how the tree spells names
    bindings: tuple[tuple[str, str], ...] = ()  # of those, the names the point's code reads (its `bind`)
    insides: tuple[str, ...] = ()  # per edit: the def its anchor must be inside ("" none), told by its neighbours
    confirmed: bool = False  # for a fit by aligned statements: its renames borne out (_confirmed)
    set_aside: tuple[str, ...] = ()  # the scopes it fits as well that the tree shows are validation
    gained: str = ""  # for a fit whose enclosing `if` gained conditions: those, as evidence says them
    between: str = ""  # for a fit by the anchor's neighbours (deleted or replaced between them): how
    free: str = ""  # for a point whose place in its __init__ does not matter: the new attribute it sets
    inlined: str = ""  # for a fit by aligned statements in another method, its own def gone: where it went
    retimed: tuple[tuple[str, str], ...] = ()  # the timers (`with` headers) it showed named otherwise: (old, new)


@dataclass
class _Spellings:
    """What the points' anchors showed of how this tree spells names, per file and scope: name ->
    (the tree's code, the point whose anchor showed it, how sure that point's place is)."""

    works: dict[str, FileWork] = field(default_factory=dict)
    by_scope: dict[tuple[str, str], dict[str, tuple[str, str, Confidence]]] = field(default_factory=dict)

    def learn(self, point: Point, fit: _Fit, confidence: Confidence) -> None:
        known = self.by_scope.setdefault((point.file, fit.scope), {})
        for name, code in fit.spelled:
            known.setdefault(name, (code, point.id, confidence))
