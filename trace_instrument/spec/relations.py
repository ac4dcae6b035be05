"""What points' code reads of what other points' code sets up, derived from the templates.

A point that sets `self._traj_tracker` in `AgentLoopBase.__init__` sets something up only if
some point's code reads `._traj_tracker`: then the setting must run on every path (see
locate/context.py). The readers come from the catalog's templates, not from a list per point:
every plain attribute read (`x.A`, not `getattr(x, "A", default)`, which copes with its absence)
and every name a template reads without binding it.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from dataclasses import dataclass

from trace_instrument.model import Catalog, Point
from trace_instrument.spec.code import PLACEHOLDER

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


@dataclass(frozen=True)
class Reader:
    """A point whose code reads an attribute or a module name, and the function that code runs in."""

    point: str
    function: str  # the def in the template holding the read, else the last part of the point's scope
    file: str
    scope: str


@dataclass(frozen=True)
class Relations:
    """Who reads what, across the catalog: attribute name -> readers; (file, module name) -> readers."""

    attributes: dict[str, tuple[Reader, ...]]
    module_names: dict[tuple[str, str], tuple[Reader, ...]]

    def attribute_readers(self, name: str, binder: str, function: str) -> tuple[Reader, ...]:
        """Readers of `.name` but the binder's own code in the same function (its own use)."""
        return tuple(r for r in self.attributes.get(name, ()) if not (r.point == binder and r.function == function))

    def name_readers(self, file: str, name: str, binder: str) -> tuple[Reader, ...]:
        return tuple(r for r in self.module_names.get((file, name), ()) if r.point != binder)


@functools.lru_cache(maxsize=8)  # one per loaded catalog
def relations(catalog: Catalog) -> Relations:
    attributes: dict[str, list[Reader]] = {}
    module_names: dict[tuple[str, str], list[Reader]] = {}
    for point in catalog.points:
        for kind, name, function in _reads(point):
            reader = Reader(point.id, function, point.file, point.scope)
            if kind == "attribute":
                attributes.setdefault(name, []).append(reader)
            elif point.scope != "<module>" or function:
                module_names.setdefault((point.file, name), []).append(reader)
    return Relations(
        {k: tuple(v) for k, v in attributes.items()},
        {k: tuple(v) for k, v in module_names.items()},
    )


def _reads(point: Point) -> Iterator[tuple[str, str, str]]:
    """("attribute" | "name", name, function) for every plain attribute read and free name read."""
    default = point.scope.rsplit(".", 1)[-1] if point.scope != "<module>" else ""
    for edit in point.edits:
        bound = _bound_at_top(edit.template.stmts)
        for stmt in edit.template.stmts:
            yield from _walk(stmt, default, bound)


def _walk(node: ast.AST, function: str, bound: frozenset[str]) -> Iterator[tuple[str, str, str]]:
    if isinstance(node, _FUNCTIONS):
        inner = _bound_at_top(node.body) | {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)}
        for stmt in node.body:
            yield from _walk(stmt, node.name, frozenset(inner))
        return
    if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
        yield "attribute", node.attr, function
    free = isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in bound
    if free and isinstance(node, ast.Name) and not PLACEHOLDER.match(node.id):
        yield "name", node.id, function
    for child in ast.iter_child_nodes(node):
        yield from _walk(child, function, bound)


def _bound_at_top(stmts: list[ast.stmt] | tuple[ast.stmt, ...]) -> frozenset[str]:
    """Names a block of code binds itself (at any depth, nested functions aside)."""
    names: set[str] = set()
    pending: list[ast.AST] = list(stmts)
    while pending:
        node = pending.pop()
        if isinstance(node, (*_FUNCTIONS, ast.ClassDef)):
            names.add(node.name)
            continue
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, ast.alias):
            names.add(node.asname or node.name.split(".")[0])
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        pending.extend(ast.iter_child_nodes(node))
    return frozenset(names)
