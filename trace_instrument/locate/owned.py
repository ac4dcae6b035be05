"""Which code is whose: the nodes of a recognised point's own code, and a template's name table.

Below both ``context`` (which checks a point's surroundings) and ``runnable`` (which checks its
names), so neither imports the other.
"""

from __future__ import annotations

import ast
import functools
import weakref
from collections.abc import Iterator

from trace_instrument.locate.names import NameTable
from trace_instrument.locate.recognize import Block, Recognition
from trace_instrument.model import EditKind


def owned_nodes(block: Block, others: frozenset[int] = frozenset()) -> Iterator[ast.AST]:
    """Every node of a block's own code (captured business code inside a rewrite left out).

    `others`: statements of other points' blocks, left out with everything under them
    (another point's code may sit inside a rewrite's block).
    """
    if block.edit.kind is EditKind.REPLACE_EXPR:
        if block.expr is not None:
            yield from ast.walk(block.expr)
        return
    kept: set[int] = set(others)
    captures = block.captures
    if captures is not None:
        kept.update(id(s) for s in captures.statements.values())
        kept.update(id(s) for body in captures.bodies.values() for s in body)
        for _value, holder in captures.values.values():
            # `result = <business value>`: the target is the template's, the value is business code
            kept.add(id(holder))
            for target in _targets(holder):
                yield from ast.walk(target)
    for stmt in block.instrumentation:
        yield from _walk_skipping(stmt, kept)


def _targets(stmt: ast.stmt) -> list[ast.expr]:
    if isinstance(stmt, ast.Assign):
        return list(stmt.targets)
    if isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
        return [stmt.target]
    return []


def _walk_skipping(node: ast.AST, kept: set[int]) -> Iterator[ast.AST]:
    stack = [node]
    while stack:
        current = stack.pop()
        if id(current) in kept:
            continue
        yield current
        stack.extend(ast.iter_child_nodes(current))


_OWNED: weakref.WeakKeyDictionary[Block, frozenset[int]] = weakref.WeakKeyDictionary()


def owned_ids(block: Block) -> frozenset[int]:
    """Ids of the nodes of a block's own code (owned_nodes), worked out once per block."""
    found = _OWNED.get(block)
    if found is None:
        found = _OWNED[block] = frozenset(id(node) for node in owned_nodes(block))
    return found


def instrumentation_node_ids(recognition: Recognition) -> frozenset[int]:
    """Ids of every node that belongs to a recognised point's code in this file."""
    owned: set[int] = set()
    for state in recognition.states.values():
        for block in state.blocks:
            owned |= owned_ids(block)
        for edited in state.edited:
            owned.update(id(node) for stmt in edited.own for node in ast.walk(stmt))
    return frozenset(owned)


@functools.lru_cache(maxsize=4096)  # one entry per edit of the catalog
def template_table(stmts: tuple[ast.stmt, ...]) -> NameTable:
    """The name table of a template's own code (read whole; never changed once built)."""
    return NameTable(ast.Module(body=list(stmts), type_ignores=[])).complete()
