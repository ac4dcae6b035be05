"""A point edited by hand: which statements are its code now, edit by edit.

Markers tell that a point's code is there (a tracing call with its stage, say);
they do not tell how far its code reaches. A hand-edited block is the run of
neighbouring statements around the marked ones that still look like the edit's
template: equal to one of its statements, or an assignment to one of the
template's own (underscore) variables. Diffs show exactly that run against the
template, `remove --force` takes exactly that run out, and the names its
statements bind are the point's, not the business code's.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass

from trace_instrument.locate.index import FileIndex, position, statement_key
from trace_instrument.locate.match import Matcher
from trace_instrument.model import TRACING_NAMES, Edit, Point
from trace_instrument.spec.signatures import call_name, signatures_in


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


def edited_runs(
    index: FileIndex, point: Point, marker_nodes: Iterable[ast.AST], instrumentation: frozenset[int]
) -> list[EditedBlock]:
    """The hand-edited blocks of a point, one per run of marked statements, in file order.

    `instrumentation`: statements that are code of any point (marked ones included).
    """
    nodes = [n for n in marker_nodes if isinstance(n, ast.stmt)]
    marked = {id(n) for n in nodes}
    taken: set[int] = set()
    blocks = []
    for node in sorted(nodes, key=lambda n: (n.lineno, n.col_offset)):
        if id(node) in taken:
            continue
        edit = _edit_of(point, node)
        run = _grow(index, node, edit, marked, instrumentation)
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


def _grow(index: FileIndex, node: ast.stmt, edit: Edit, marked: set[int], others: frozenset[int]) -> list[ast.stmt]:
    """The run around a marked statement whose statements still look like the edit's template."""
    siblings = index.site(node).siblings
    at = position(siblings, node)
    keys = [statement_key(t) for t in edit.template.stmts]
    first = last = at
    while first > 0 and _belongs(siblings[first - 1], edit, keys, marked, others):
        first -= 1
    while last + 1 < len(siblings) and _belongs(siblings[last + 1], edit, keys, marked, others):
        last += 1
    return siblings[first : last + 1]


def _belongs(
    stmt: ast.stmt, edit: Edit, keys: list[tuple[object, ...]], marked: set[int], others: frozenset[int]
) -> bool:
    if id(stmt) in marked:
        return True
    if id(stmt) in others:
        return False  # another point's code
    if any(Matcher().statement(t, stmt) for t in edit.template.stmts):
        return True
    # edited, but still the template's own variable (`_traj_uids = ...` with another default)
    key = statement_key(stmt)
    private_assignment = key[0] in ("Assign", "AnnAssign") and str(key[-1]).startswith("_")
    return (private_assignment and key in keys) or _same_tracing_call(stmt, edit)


def _same_tracing_call(stmt: ast.stmt, edit: Edit) -> bool:
    """A call of the same tracing function as one of the template's, its arguments edited."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return False
    name = call_name(stmt.value)
    if name is None or name not in TRACING_NAMES:
        return False
    return any(
        isinstance(t, ast.Expr) and isinstance(t.value, ast.Call) and call_name(t.value) == name
        for t in edit.template.stmts
    )
