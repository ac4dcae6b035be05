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

A fork's line written deeper, inside one of the template's own blocks (its `if`, its loop),
cuts no run: the run around the markers is then only part of the point's code. `whole_block`
finds the statement around it that is the template's block, and the fork's statements in it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass

from trace_instrument.locate.index import BLOCK_FIELDS, FileIndex, is_block, position, statement_key, statement_print
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


@dataclass(frozen=True, eq=False)
class WholeBlock:
    """The template's block statement holding a hand-edited run, and the fork's statements in it."""

    top: ast.stmt  # the file's statement that is one of the template's block statements
    foreign: tuple[ast.stmt, ...]  # the fork's statements inside it, in file order (not nested in each other)


def nested_in_template(edited: EditedBlock) -> bool:
    """Is the run only a part of the template's code, the block statements around it not in it
    (no statement of the run is like one of the template's top-level statements)?"""
    tops = edited.edit.template.stmts
    return any(is_block(t) for t in tops) and not any(_like_simple(t, s) for t in tops for s in edited.own)


def whole_block(index: FileIndex, edited: EditedBlock, others: frozenset[int]) -> WholeBlock | None:
    """The statement around a run that is the template's block with the fork's lines in it: its
    header and those of the blocks in it as the template says, and more of its statements the
    template's than the fork's. None when there is none (`others`: ids of other points' statements,
    never the fork's)."""
    blocks = [t for t in edited.edit.template.stmts if is_block(t)]
    for ancestor in reversed(index.site(edited.stmts[0]).ancestors):  # innermost first
        if not isinstance(ancestor, ast.stmt) or isinstance(ancestor, (ast.FunctionDef, ast.AsyncFunctionDef)):
            break  # not past a clause or a def: a template block has neither
        for template in blocks:
            aligned = _aligned(template, ancestor, others)
            if aligned is not None and aligned[0] > len(aligned[1]):
                return WholeBlock(ancestor, tuple(aligned[1]))
    return None


def _aligned(template: ast.stmt, stmt: ast.stmt, others: frozenset[int]) -> tuple[int, list[ast.stmt]] | None:
    """(how many of the template's statements the block holds, the fork's statements in it), when
    `stmt` is the template's block statement: the same header, and so for each block in it."""
    if type(template) is not type(stmt) or statement_print(template) != statement_print(stmt):
        return None
    if getattr(template, "handlers", None) or getattr(template, "cases", None):
        return None  # (no template's block is a try with handlers or a match)
    matched, foreign = 1, list[ast.stmt]()
    for name in BLOCK_FIELDS:
        body = _aligned_body(getattr(template, name, None) or [], getattr(stmt, name, None) or [], others)
        if body is None:
            return None
        matched, foreign = matched + body[0], foreign + body[1]
    return matched, foreign


def _aligned_body(
    templates: list[ast.stmt], stmts: list[ast.stmt], others: frozenset[int]
) -> tuple[int, list[ast.stmt]] | None:
    """The statements of one block, each the template's next one (or a later: the fork deleted
    some) or the fork's own."""
    matched, foreign, at = 0, list[ast.stmt](), 0
    for stmt in stmts:
        found = None
        for index in range(at, len(templates)):
            if is_block(templates[index]):
                inner = _aligned(templates[index], stmt, others)
                if inner is not None:
                    found = index
                    matched, foreign = matched + inner[0], foreign + inner[1]
                    break
            elif _like_simple(templates[index], stmt):
                found = index
                matched += 1
                break
        if found is not None:
            at = found + 1
        elif id(stmt) in others:
            return None  # another point's code inside: not this point's block to take out
        else:
            foreign.append(stmt)
    return matched, foreign


def _like_simple(template: ast.stmt, stmt: ast.stmt) -> bool:
    """A statement that is the template's (equal), or its edited form (the same private variable
    assigned, the same tracing function called)."""
    if is_block(template) or is_block(stmt):
        return False
    if Matcher().statement(template, stmt):
        return True
    key = statement_key(stmt)
    if key[0] in ("Assign", "AnnAssign") and str(key[-1]).startswith("_") and key == statement_key(template):
        return True
    called = _tracing_call(stmt)
    return called is not None and called == _tracing_call(template)


def _tracing_call(stmt: ast.stmt) -> str | None:
    """The tracing function a statement calls (`trace_flow(...)`), if that is all it does."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return None
    name = call_name(stmt.value)
    return name if name in TRACING_NAMES else None
