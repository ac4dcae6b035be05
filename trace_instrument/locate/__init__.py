"""Locating points in a file: what is already there, and where the rest would go."""

from __future__ import annotations

import ast
from collections.abc import Iterable

from trace_instrument.locate.anchors import AnchorFailure, AnchorFinder, Placement
from trace_instrument.locate.index import FileIndex
from trace_instrument.locate.recognize import Block, PointState, Recognition
from trace_instrument.model import Edit, Extents, Point

__all__ = ["AnchorFailure", "Block", "FileLocator", "Placement", "PointState"]


class FileLocator:
    """Recognition and anchor finding for the catalog points of one parsed file."""

    def __init__(
        self,
        tree: ast.Module,
        points: Iterable[Point],
        helper_names: frozenset[str],
        source: str | None = None,
        markers_for: frozenset[str] | None = None,
        applied: frozenset[str] | None = None,
        extents: Extents | None = None,
        unrecognisable: frozenset[str] | None = None,
    ):
        """`source`, the text the tree was parsed from, makes some lookups faster; `markers_for`
        limits the search for hand-edited code to these points (None: all); `applied`: the points
        the manifest says apply placed and `extents` where the bodies their rewrites captured
        are (see Recognition); `unrecognisable`: the points whose code is not looked for (None:
        decided from `applied`; an edit's result is judged as its input was)."""
        self.tree = tree
        self.index = FileIndex(tree, source)
        self.recognition = Recognition(self.index, points, helper_names, markers_for, applied, extents, unrecognisable)
        self.finder = AnchorFinder(self.index, self.recognition)

    def state(self, point: Point) -> PointState:
        return self.recognition.states[point.id]

    def place(self, point: Point, edit: Edit, *, nearest: bool = True) -> Placement | AnchorFailure:
        """Where the edit goes, or why not (with `nearest`, the statements most like a lost anchor:
        a search that only tries places does without them)."""
        return self.finder.place(point, edit, nearest=nearest)
