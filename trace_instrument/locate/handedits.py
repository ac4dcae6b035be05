"""A point edited by hand: which statements are its code now, edit by edit.

Markers tell that a point's code is there (a tracing call with its stage, say);
they do not tell how far its code reaches. A hand-edited block is the run of
neighbouring statements around the marked ones that still look like the edit's
template: equal to one of its statements, or an assignment to one of the
template's own (underscore) variables. Two runs of one edit with the fork's own
statements between them are one block (the fork wrote lines into the point's
code): the statements between are the fork's. Diffs show exactly that block
against the template, `remove --force` takes its statements out but the fork's,
and the names its statements bind are the point's, not the business code's.
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
    stmts: tuple[ast.stmt, ...]  # the whole block, the fork's lines inside it included
    foreign: frozenset[int] = frozenset()  # ids of the fork's statements inside the block

    @property
    def own(self) -> tuple[ast.stmt, ...]:
        """The statements that are the point's code (the fork's lines inside the block left out)."""
        return tuple(s for s in self.stmts if id(s) not in self.foreign)

    @property
    def fragments(self) -> list[list[ast.stmt]]:
        """The point's statements in runs of neighbours (the fork's lines cut the block)."""
        runs: list[list[ast.stmt]] = [[]]
        for stmt in self.stmts:
            if id(stmt) in self.foreign:
                runs.append([])
            else:
                runs[-1].append(stmt)
        return [run for run in runs if run]

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
    blocks: list[EditedBlock] = []
    for node in sorted(nodes, key=lambda n: (n.lineno, n.col_offset)):
        if id(node) in taken:
            continue
        edit = _edit_of(point, node)
        run = _grow(index, node, edit, marked, instrumentation)
        taken.update(id(s) for s in run)
        block = EditedBlock(edit, tuple(run))
        joined = _joined(index, blocks[-1], block, instrumentation) if blocks else None
        if joined is not None:
            blocks[-1] = joined
        else:
            blocks.append(block)
    return blocks


def _joined(
    index: FileIndex, first: EditedBlock, second: EditedBlock, instrumentation: frozenset[int]
) -> EditedBlock | None:
    """One block of the two runs of one edit, when only the fork's statements stand between them
    (no other point's code) and together they are no more statements than the template: pieces
    of one copy of its code, not two copies."""
    if first.edit is not second.edit:
        return None
    siblings = index.site(first.stmts[0]).siblings
    if index.site(second.stmts[0]).siblings is not siblings:
        return None
    end, start = position(siblings, first.stmts[-1]), position(siblings, second.stmts[0])
    between = siblings[end + 1 : start]
    if not between or any(id(s) in instrumentation for s in between):
        return None
    if len(first.own) + len(second.own) > len(first.edit.template.stmts):
        return None
    foreign = first.foreign | second.foreign | {id(s) for s in between}
    return EditedBlock(first.edit, (*first.stmts, *between, *second.stmts), frozenset(foreign))


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
