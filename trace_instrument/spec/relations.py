"""What points' code reads of what other points' code sets up, derived from the templates.

A point that sets `self._traj_tracker` in `AgentLoopBase.__init__` sets something up only if
some point's code reads `._traj_tracker`: then the setting must run on every path (see
locate/context.py). The readers come from the catalog's templates, not from a list per point:
every plain attribute read (`x.A`, not `getattr(x, "A", default)`, which copes with its absence)
and every name a template reads without binding it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator

from trace_instrument.model import Point, Reader, Relations
from trace_instrument.spec.code import PLACEHOLDER

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def relations(points: Iterable[Point]) -> Relations:
    """Who reads what of the points' code (the loader stores it on the catalog)."""
    attributes: dict[str, list[Reader]] = {}
    module_names: dict[tuple[str, str], list[Reader]] = {}
    set_attributes: set[str] = set()
    for point in points:
        default = point.scope.rsplit(".", 1)[-1] if point.scope != "<module>" else ""
        for edit in point.edits:
            reads = _Reads(default)
            reads.walk(edit.template.stmts)
            set_attributes |= reads.set_attributes
            for name, function in reads.attributes:
                attributes.setdefault(name, []).append(Reader(point.id, function, point.file, point.scope))
            for name, function in reads.free_names():
                if point.scope != "<module>" or function:
                    reader = Reader(point.id, function, point.file, point.scope)
                    module_names.setdefault((point.file, name), []).append(reader)
    return Relations(
        {k: tuple(v) for k, v in attributes.items()},
        {k: tuple(v) for k, v in module_names.items()},
        frozenset(set_attributes),
    )


class _Reads:
    """One template's reads, in one walk: plain attribute reads with the function holding them,
    names read per function (free when that function's code binds them nowhere), and attributes
    it sets (`x.A = ...`, a def A)."""

    def __init__(self, function: str):
        self.attributes: list[tuple[str, str]] = []
        self.set_attributes: set[str] = set()
        self._functions = [function]  # the function of each scope: the template's, then its defs
        self._loads: list[list[str]] = [[]]
        self._bound: list[set[str]] = [set()]

    def walk(self, stmts: Iterable[ast.stmt]) -> None:
        pending: list[tuple[ast.AST, int]] = [(s, 0) for s in reversed(list(stmts))]
        while pending:
            node, scope = pending.pop()
            if isinstance(node, (*_FUNCTIONS, ast.ClassDef)):
                self._bound[scope].add(node.name)
                self.set_attributes.add(node.name)
                if isinstance(node, _FUNCTIONS):
                    inner = self._scope(node.name, {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)})
                    pending.extend((child, inner) for child in reversed(node.body))
                continue
            self._note(node, scope)
            pending.extend((child, scope) for child in ast.iter_child_nodes(node))

    def _scope(self, function: str, bound: set[str]) -> int:
        self._functions.append(function)
        self._loads.append([])
        self._bound.append(bound)
        return len(self._functions) - 1

    def _note(self, node: ast.AST, scope: int) -> None:
        if isinstance(node, ast.Attribute):
            if isinstance(node.ctx, ast.Load):
                self.attributes.append((node.attr, self._functions[scope]))
            elif isinstance(node.ctx, ast.Store):
                self.set_attributes.add(node.attr)
        elif isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                self._loads[scope].append(node.id)
            else:
                self._bound[scope].add(node.id)
        elif isinstance(node, ast.alias):
            self._bound[scope].add(node.asname or node.name.split(".")[0])
        elif isinstance(node, ast.arg):
            self._bound[scope].add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            self._bound[scope].add(node.name)

    def free_names(self) -> Iterator[tuple[str, str]]:
        """(name, function) for every read of a name its function's code does not bind."""
        for function, loads, bound in zip(self._functions, self._loads, self._bound):
            for name in loads:
                if name not in bound and not PLACEHOLDER.match(name):
                    yield name, function
