"""An index of a file's statements: where each one sits and in which scope."""

from __future__ import annotations

import ast
import bisect
import collections
import copy
import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TypeVar

from trace_instrument.spec.code import DEFINITIONS, first_line, source_lines

BLOCK_FIELDS = ("body", "orelse", "handlers", "finalbody", "cases")
StmtT = TypeVar("StmtT", bound=ast.stmt)


@dataclass(frozen=True, eq=False)
class Site:
    """A statement and its place: the list holding it and the blocks around it."""

    node: ast.stmt
    owner: ast.AST  # the node whose `field` list holds the statement
    field: str
    index: int
    scope: str  # dotted path of the enclosing defs/classes, "<module>" at top level
    ancestors: tuple[ast.AST, ...]  # enclosing statements (and except/case clauses), outermost first

    @property
    def siblings(self) -> list[ast.stmt]:
        items: list[ast.stmt] = getattr(self.owner, self.field)  # a field the index walked: a statement list
        return items


class FileIndex:
    def __init__(self, tree: ast.Module, source: str | None = None):
        self.tree = tree
        self.lines = source_lines(source) if source is not None else None
        self._found: dict[tuple[str, ...], list[int]] = {}
        self._matches: dict[re.Pattern[str], list[int]] = {}
        self.sites: list[Site] = []
        self.scopes: dict[str, list[ast.AST]] = {}
        self._site_of: dict[int, Site] = {}
        self._walk(tree, (), "")
        starts = collections.Counter(site.node.lineno for site in self.sites)
        self.shared_lines = frozenset(line for line, count in starts.items() if count > 1)

    def _walk(self, owner: ast.AST, ancestors: tuple[ast.AST, ...], scope: str) -> None:
        for field in BLOCK_FIELDS:
            items = getattr(owner, field, None)
            if not isinstance(items, list):
                continue
            for index, child in enumerate(items):
                if isinstance(child, ast.stmt):
                    site = Site(child, owner, field, index, scope or "<module>", ancestors)
                    self.sites.append(site)
                    self._site_of[id(child)] = site
                    inner_scope = scope
                    if isinstance(child, DEFINITIONS):
                        inner_scope = f"{scope}.{child.name}" if scope else child.name
                        self.scopes.setdefault(inner_scope, []).append(child)
                    self._walk(child, (*ancestors, child), inner_scope)
                elif isinstance(child, (ast.ExceptHandler, ast.match_case)):
                    self._walk(child, (*ancestors, child), scope)

    def text_of(self, node: ast.stmt) -> str | None:
        """The statement's own code (a block's header), whitespace-trimmed per line; None if unknown."""
        if self.lines is None:
            return None
        first = first_line(node) - 1  # decorators are part of the def's tree
        if is_block(node):
            children = [c for name in BLOCK_FIELDS for c in getattr(node, name, None) or [] if hasattr(c, "lineno")]
            end = min((c.lineno for c in children), default=(node.end_lineno or node.lineno) + 1) - 1
            if end <= first:
                return None  # a one-line block: header and body share the line
            return "\n".join(line.strip() for line in self.lines[first:end])
        if node.end_lineno is None or node.lineno != node.end_lineno:
            chunk = self.lines[first : node.end_lineno]
            if not chunk:
                return None
            chunk = (
                [chunk[0][node.col_offset :], *chunk[1:-1], chunk[-1][: node.end_col_offset]]
                if len(chunk) > 1
                else chunk
            )
            return "\n".join(line.strip() for line in chunk)
        return self.lines[first][node.col_offset : node.end_col_offset].strip()

    def mentions(self, node: ast.stmt, names: tuple[str, ...], header_only: bool = False) -> bool:
        """Does the statement's source (with header_only, a block's own lines) contain one of `names`?
        True when the source is unknown."""
        if self.lines is None:
            return True
        end = node.end_lineno or node.lineno
        if header_only and is_block(node):
            children = [
                c.lineno for name in BLOCK_FIELDS for c in getattr(node, name, None) or [] if hasattr(c, "lineno")
            ]
            end = min(children, default=end + 1) - 1
            end = max(end, node.lineno)  # a one-line block: header and body share the line
        found = self._lines_with(names)
        first = bisect.bisect_left(found, node.lineno - 1)
        return first < len(found) and found[first] < end

    def lines_with(self, names: tuple[str, ...]) -> list[int]:
        """The (1-based, sorted) numbers of the lines whose text holds one of the names (a plain
        substring search); every line when the source is unknown."""
        if self.lines is None:
            return list(range(1, max((s.end_lineno or s.lineno for s in self.tree.body), default=0) + 1))
        return [line + 1 for line in self._lines_with(names)]

    def _lines_with(self, names: tuple[str, ...]) -> list[int]:
        """The (0-based, sorted) numbers of the lines holding one of the names: the file searched once
        per name (a plain substring search; the lines of a block are its statements' lines too)."""
        found = self._found.get(names)
        if found is None:
            assert self.lines is not None
            text = "\n".join(self.lines)  # (no name holds a line break: a find never spans two lines)
            offsets: set[int] = set()
            for name in names:
                at = text.find(name)
                while at != -1:
                    offsets.add(at)
                    at = text.find(name, at + 1)
            found, line, counted = [], 0, 0
            for offset in sorted(offsets):
                line += text.count("\n", counted, offset)
                counted = offset
                if not found or found[-1] != line:
                    found.append(line)
            self._found[names] = found
        return found

    def alone_on_its_line(self, node: ast.stmt) -> bool:
        """False for `a; b` and one-line blocks (`if x: y`): such statements are not edited."""
        return node.lineno not in self.shared_lines

    def enclosing_scope(self, node: ast.stmt) -> ast.AST:
        """The innermost def or class around a statement (the module at top level)."""
        for ancestor in reversed(self.site(node).ancestors):
            if isinstance(ancestor, DEFINITIONS):
                return ancestor
        return self.tree

    def site(self, node: ast.stmt) -> Site:
        return self._site_of[id(node)]

    def scope_nodes(self, scope: str) -> list[ast.AST]:
        return [self.tree] if scope == "<module>" else self.scopes.get(scope, [])

    def sites_in(self, scope_node: ast.AST) -> Iterator[Site]:
        """Statements inside a scope (top level only for the module)."""
        if scope_node is self.tree:
            yield from (s for s in self.sites if not s.ancestors)
            return
        for site in self.sites:
            if scope_node in site.ancestors:
                yield site

    def bodies_in(self, scope_node: ast.AST) -> Iterator[tuple[ast.AST, str, list[ast.stmt]]]:
        """Every statement list inside a scope, the scope's own body first."""
        seen: set[tuple[int, str]] = set()
        owners = [scope_node] if scope_node is self.tree else [scope_node, *(s.node for s in self.sites_in(scope_node))]
        for owner in owners:
            for holder in [owner, *getattr(owner, "handlers", []), *getattr(owner, "cases", [])]:
                for field in BLOCK_FIELDS:
                    items = getattr(holder, field, None)
                    if isinstance(items, list) and items and isinstance(items[0], ast.stmt):
                        key = (id(holder), field)
                        if key not in seen:
                            seen.add(key)
                            yield holder, field, items

    def similar_scopes(self, scope: str, limit: int = 3) -> list[str]:
        import difflib

        return difflib.get_close_matches(scope, list(self.scopes), n=limit, cutoff=0.5)


def docstring_of(body: list[ast.stmt]) -> ast.stmt | None:
    first = body[0] if body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        return first
    return None


def is_block(stmt: ast.AST) -> bool:
    """Does the statement hold statement lists (if, for, with, def, try, ...)?"""
    return any(isinstance(getattr(stmt, name, None), list) for name in BLOCK_FIELDS)


def header_only(stmt: StmtT) -> StmtT:
    """The statement with its nested blocks emptied: what its own line(s) say."""
    if not is_block(stmt):
        return stmt
    shallow = copy.copy(stmt)
    for name in BLOCK_FIELDS:
        if isinstance(getattr(shallow, name, None), list):
            setattr(shallow, name, [])
    return shallow


def statement_print(stmt: ast.stmt) -> str:
    """A short formatting-free digest of what a statement's own line(s) say (its nested blocks
    left out: other points' code inside them does not change it)."""
    text = ast.dump(header_only(stmt), annotate_fields=False, include_attributes=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def body_of(stmt: ast.stmt) -> list[ast.stmt]:
    """The `body` statement list of a block statement (def, class, if, for, while, with, try)."""
    body = getattr(stmt, "body", None)
    if not isinstance(body, list):
        raise TypeError(f"line {stmt.lineno}: {type(stmt).__name__} has no body")
    return body


def position(items: list[ast.stmt], wanted: ast.stmt) -> int:
    """Index of a statement in its list, by identity (ast nodes have no equality)."""
    return next(i for i, item in enumerate(items) if item is wanted)


StatementKey = tuple[object, ...]  # a few plain values: a kind and, for some kinds, a name


def statement_key(node: ast.stmt) -> StatementKey:
    """Equal statements have equal keys (the converse need not hold)."""
    value = getattr(node, "value", None)
    if isinstance(node, ast.Expr) and isinstance(value, ast.Call):
        func = value.func
        return ("call", getattr(func, "id", None) or getattr(func, "attr", None))
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        target = node.targets[0] if isinstance(node, ast.Assign) else node.target
        return (
            type(node).__name__,
            type(target).__name__,
            getattr(target, "id", None) or getattr(target, "attr", None),
        )
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return ("def", node.name)
    return (type(node).__name__,)
