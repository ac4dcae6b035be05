"""Pairing Python's ast statements with LibCST's, by walking both trees in step.

Matching happens on the ast (fast, formatting-free); editing happens on
LibCST (lossless). Both parse the same text, so their statement lists line up:
a LibCST SimpleStatementLine holds one or more ast statements, every block
statement is one ast statement with the same nested lists.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass, field

import libcst as cst


class PairingError(RuntimeError):
    """ast and LibCST disagree about the file's statements (should never happen)."""


@dataclass
class CstMap:
    """Which LibCST statement holds each ast statement, and the LibCST nodes around each one."""

    line_of: dict[int, cst.CSTNode] = field(default_factory=dict)  # ast stmt id -> LibCST statement
    path_of: dict[int, tuple[int, ...]] = field(default_factory=dict)  # LibCST stmt id -> ids of its ancestors

    def statement(self, node: ast.stmt) -> cst.CSTNode:
        """The LibCST statement line, block statement or one-line suite holding an ast statement."""
        try:
            return self.line_of[id(node)]
        except KeyError:
            raise PairingError(f"no LibCST statement for line {getattr(node, 'lineno', '?')}") from None


def pair(module: cst.Module, tree: ast.Module) -> CstMap:
    """The map between a module's LibCST and ast statements (both parsed from the same text)."""
    mapping = CstMap()
    _pair_list(mapping, module.body, tree.body, (id(module),))
    return mapping


def _pair_list(
    mapping: CstMap, cst_stmts: Sequence[cst.BaseStatement], ast_stmts: list[ast.stmt], path: tuple[int, ...]
) -> None:
    items = iter(ast_stmts)
    for statement in cst_stmts:
        mapping.path_of[id(statement)] = path
        smalls = statement.body if isinstance(statement, cst.SimpleStatementLine) else [statement]
        for _ in smalls:
            node = next(items, None)
            if node is None:
                raise PairingError("LibCST has more statements than ast")
            mapping.line_of[id(node)] = statement
        if not isinstance(statement, cst.SimpleStatementLine):
            assert node is not None  # a block statement is one ast statement, paired just above
            _pair_compound(mapping, statement, node, (*path, id(statement)))
    if next(items, None) is not None:
        raise PairingError("ast has more statements than LibCST")


def _pair_block(mapping: CstMap, block: cst.BaseSuite, ast_stmts: list[ast.stmt], path: tuple[int, ...]) -> None:
    if isinstance(block, cst.IndentedBlock):
        _pair_list(mapping, block.body, ast_stmts, (*path, id(block)))
    else:  # a one-line suite: `if x: y`; its statements cannot take insertions
        for small, node in zip(block.body, ast_stmts):
            mapping.line_of[id(node)] = block


def _pair_compound(mapping: CstMap, statement: cst.BaseStatement, node: ast.stmt, path: tuple[int, ...]) -> None:
    if isinstance(statement, (cst.FunctionDef, cst.ClassDef, cst.With)):
        _pair_block(mapping, statement.body, _statements(node, "body"), path)
    elif isinstance(statement, cst.If):
        _pair_if(mapping, statement, node, path)
    elif isinstance(statement, (cst.For, cst.While)):
        _pair_block(mapping, statement.body, _statements(node, "body"), path)
        if statement.orelse is not None:
            _pair_block(mapping, statement.orelse.body, _statements(node, "orelse"), (*path, id(statement.orelse)))
    elif isinstance(statement, (cst.Try, cst.TryStar)):
        _pair_block(mapping, statement.body, _statements(node, "body"), path)
        handlers: Sequence[cst.ExceptHandler | cst.ExceptStarHandler] = statement.handlers
        for handler, ast_handler in zip(handlers, _clauses(node, "handlers")):
            _pair_block(mapping, handler.body, _statements(ast_handler, "body"), (*path, id(handler)))
        if statement.orelse is not None:
            _pair_block(mapping, statement.orelse.body, _statements(node, "orelse"), (*path, id(statement.orelse)))
        if statement.finalbody is not None:
            finalbody = _statements(node, "finalbody")
            _pair_block(mapping, statement.finalbody.body, finalbody, (*path, id(statement.finalbody)))
    elif isinstance(statement, cst.Match):
        for case, ast_case in zip(statement.cases, _clauses(node, "cases")):
            _pair_block(mapping, case.body, _statements(ast_case, "body"), (*path, id(case)))


def _pair_if(mapping: CstMap, statement: cst.If, node: ast.stmt, path: tuple[int, ...]) -> None:
    _pair_block(mapping, statement.body, _statements(node, "body"), path)
    orelse = statement.orelse
    if isinstance(orelse, cst.If):  # elif: an If inside the orelse list of the ast
        elif_node = _statements(node, "orelse")[0]
        mapping.line_of[id(elif_node)] = orelse
        mapping.path_of[id(orelse)] = path
        _pair_if(mapping, orelse, elif_node, (*path, id(orelse)))
    elif orelse is not None:
        _pair_block(mapping, orelse.body, _statements(node, "orelse"), (*path, id(orelse)))


# The ast node paired with a LibCST block has the same kind of block (both parse the same
# text), so it has the field LibCST's node has; ast types these fields per node class only.


def _statements(node: ast.AST, name: str) -> list[ast.stmt]:
    """One of the node's statement lists: body, orelse or finalbody."""
    items: list[ast.stmt] = getattr(node, name)
    return items


def _clauses(node: ast.AST, name: str) -> list[ast.AST]:
    """The node's except handlers or match cases."""
    items: list[ast.AST] = getattr(node, name)
    return items
