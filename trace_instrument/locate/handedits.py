"""A point edited by hand: which statements are its code now, edit by edit.

Markers tell that a point's code is there (a tracing call with its stage, say);
they do not tell how far its code reaches. A hand-edited block is the run of
neighbouring statements around the marked ones that still look like the edit's
template: equal to one of its statements, or of the same shape (an assignment
to the same name, a call of the same function). Diffs show exactly that run
against the template, and `remove --force` takes exactly that run out.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from trace_instrument.locate.index import FileIndex, position
from trace_instrument.locate.match import Matcher
from trace_instrument.locate.recognize import PointState, Recognition, statement_key
from trace_instrument.model import Edit, Point
from trace_instrument.spec.signatures import signatures_in


@dataclass(frozen=True, eq=False)
class EditedBlock:
    """The statements that are one edit's code, edited by hand."""

    edit: Edit
    stmts: tuple[ast.stmt, ...]

    @property
    def first_line(self) -> int:
        return self.stmts[0].lineno

    @property
    def last_line(self) -> int:
        return self.stmts[-1].end_lineno or self.stmts[-1].lineno


def edited_blocks(recognition: Recognition, state: PointState) -> list[EditedBlock]:
    """The hand-edited blocks of a point, one per run of marked statements, in file order."""
    index = recognition.index
    taken: set[int] = set()
    blocks = []
    for node in sorted(state.marker_nodes, key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0))):
        if id(node) in taken or not isinstance(node, ast.stmt):
            continue
        edit = _edit_of(state.point, node)
        run = _grow(index, recognition, node, edit, state)
        taken.update(id(s) for s in run)
        blocks.append(EditedBlock(edit, tuple(run)))
    return blocks


def _edit_of(point: Point, node: ast.stmt) -> Edit:
    """The edit whose template shares the most tracing signatures with the statement."""
    found = {sig for sig, _ in signatures_in([node], loose=True)}
    best, best_score = point.edits[0], -1
    for edit in point.edits:
        score = len(found & {sig for sig, _ in signatures_in(edit.template.stmts, loose=True)})
        if score > best_score:
            best, best_score = edit, score
    return best


def _grow(index: FileIndex, recognition: Recognition, node: ast.stmt, edit: Edit, state: PointState) -> list[ast.stmt]:
    """The run around a marked statement whose statements still look like the edit's template."""
    siblings = index.site(node).siblings
    at = position(siblings, node)
    marked = {id(n) for n in state.marker_nodes}
    keys = [statement_key(t) for t in edit.template.stmts]
    first = last = at
    while first > 0 and _belongs(siblings[first - 1], edit, keys, marked, recognition):
        first -= 1
    while last + 1 < len(siblings) and _belongs(siblings[last + 1], edit, keys, marked, recognition):
        last += 1
    return siblings[first : last + 1]


def _belongs(stmt: ast.stmt, edit: Edit, keys: list[tuple], marked: set[int], recognition: Recognition) -> bool:
    if id(stmt) in marked:
        return True
    if id(stmt) in recognition.instrumentation:
        return False  # another point's code
    if any(Matcher().statement(t, stmt) for t in edit.template.stmts):
        return True
    # edited, but still the template's own variable (`_traj_uids = ...` with another default)
    key = statement_key(stmt)
    private_assignment = key[0] in ("Assign", "AnnAssign") and str(key[-1]).startswith("_")
    return private_assignment and key in keys
