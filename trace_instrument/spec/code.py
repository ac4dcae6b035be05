"""Parsing the code snippets of specs and templates, once, at load."""

from __future__ import annotations

import ast
import functools
import hashlib
import re
import textwrap
from typing import NamedTuple

from trace_instrument.model import Anchor, CodePattern, EditKind, SpecSource, Template

PLACEHOLDER = re.compile(r"^__anchor_(\d+)(?:_(value|body))?__$")
CAPTURE_LIKE = re.compile(r"^__anchor_")  # names in the captures' namespace: a typo there is an error
DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)  # statements that define a name


_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # the breaks Python's tokenizer counts


def source_lines(text: str) -> list[str]:
    """The source's lines (without their breaks) numbered as Python numbers them: `str.splitlines`
    also breaks at form feeds and other separators a tokenizer takes for whitespace, and every
    line after one would be read for the line above it."""
    lines = _LINE_BREAK.split(text) if "\r" in text else text.split("\n")
    if lines[-1] == "":
        lines.pop()  # (a last line break ends the last line; it starts none)
    return lines


def is_ellipsis(node: object) -> bool:
    """`...`: a wildcard in a pattern."""
    return isinstance(node, ast.Constant) and node.value is Ellipsis


def is_wild_body(body: object) -> bool:
    """A block written `...`: a pattern about its header only."""
    return isinstance(body, list) and len(body) == 1 and isinstance(body[0], ast.Expr) and is_ellipsis(body[0].value)


class CodeError(ValueError):
    def __init__(self, line: int, message: str):
        self.line = line
        super().__init__(message)


def _parse_ast(text: str) -> tuple[ast.stmt, ...]:
    try:
        return tuple(ast.parse(text).body)
    except SyntaxError as exc:
        raise CodeError(exc.lineno or 1, f"does not parse: {exc.msg}") from None


def parse_pattern(text: str, source: SpecSource) -> CodePattern:
    body = textwrap.dedent(text).strip("\n")
    stmts = _parse_ast(body + "\n")
    if not stmts:
        raise CodeError(1, "is empty")
    return CodePattern(text=body, stmts=stmts, source=source)


def parse_template(name: str, text: str, *, expression: bool = False) -> Template:
    """A template's code, parsed with `ast` (LibCST parses it later, and only to edit a file)."""
    # leading blank lines are kept: they separate an inserted def from its neighbours
    body = textwrap.dedent(text).rstrip() + "\n"
    sha = hashlib.sha256(body.encode("utf-8")).hexdigest()[:16]
    if expression:
        source = body.strip()
        try:
            tree = ast.parse(source, mode="eval")
        except SyntaxError as exc:
            raise CodeError(1, f"expression does not parse: {exc.msg}") from None
        return Template(name=name, text=source, stmts=(ast.Expr(tree.body),), sha=sha, expression=True)
    stmts = _parse_ast(body)
    if not stmts:
        raise CodeError(1, "is empty")
    return Template(name=name, text=body, stmts=stmts, sha=sha, leading_lines=first_line(stmts[0]) - 1)


def first_line(stmt: ast.stmt) -> int:
    """Where a statement's code starts (a decorated def: at its first decorator)."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):  # the statements with decorators
        return min([stmt.lineno, *(d.lineno for d in stmt.decorator_list)])
    return stmt.lineno


@functools.lru_cache(maxsize=4096)  # a template's or pattern's statements: walked once however often asked
def _capture_like_names(stmts: tuple[ast.stmt, ...]) -> tuple[str, ...]:
    """The names in the statements that look like captures (`__anchor_...`), in walk order."""
    return tuple(
        node.id for top in stmts for node in ast.walk(top) if isinstance(node, ast.Name) and CAPTURE_LIKE.match(node.id)
    )


def placeholders(stmts: tuple[ast.stmt, ...]) -> list[tuple[int, str]]:
    """(anchor index, role) of every capture a rewrite template uses; role '' is a whole statement."""
    matches = [PLACEHOLDER.match(name) for name in _capture_like_names(stmts)]
    return [(int(match.group(1)), match.group(2) or "") for match in matches if match]


def rebuilt_positions(anchor: Anchor, template: Template) -> frozenset[int]:
    """The anchored statements a rewrite rebuilds from the anchor's text: all but the ones its
    template keeps whole (`__anchor_N__`). Other edits rebuild nothing."""
    if anchor.kind is not EditKind.REWRITE:
        return frozenset()
    whole = {index for index, role in placeholders(template.stmts) if role == ""}
    return frozenset(range(len(anchor.target.stmts))) - whole


def _body_capture(stmt: ast.stmt) -> int | None:
    """The anchor index of a `__anchor_N_body__` statement (None: any other statement)."""
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Name):
        match = PLACEHOLDER.match(stmt.value.id)
        if match and match.group(2) == "body":
            return int(match.group(1))
    return None


class OpenBody(NamedTuple):
    """A body capture among a template's top statements that its own code does not bound on a
    side (`start`, `end`): nothing or another body capture is next to it there."""

    capture: int  # the anchor index of the captured statement
    start: bool
    end: bool


@functools.lru_cache(maxsize=4096)  # one entry per rewrite template of the catalog
def unbounded_bodies(stmts: tuple[ast.stmt, ...]) -> tuple[OpenBody, ...]:
    """The body captures of a template that its own code does not bound on both sides. Where
    such a body begins or ends in the file the template does not say: apply records it (a
    `BodyExtent`). A bounded side reaches the template's own code."""
    found = []
    for position, stmt in enumerate(stmts):
        index = _body_capture(stmt)
        if index is None:
            continue
        before = stmts[position - 1] if position else None
        after = stmts[position + 1] if position + 1 < len(stmts) else None
        start, end = (n is None or _body_capture(n) is not None for n in (before, after))
        if start or end:
            found.append(OpenBody(index, start, end))
    return tuple(found)


def bad_captures(stmts: tuple[ast.stmt, ...]) -> list[str]:
    """Names that look like captures (`__anchor_...`) but are not one of the three forms."""
    return [name for name in _capture_like_names(stmts) if not PLACEHOLDER.match(name)]


def expr_pattern(anchor: Anchor) -> CodePattern:
    """The `expr` pattern of a replace_expr anchor (the loader gives every such anchor one)."""
    if anchor.expr is None:
        raise ValueError(f"{anchor.source}: a {anchor.kind.value} anchor has no 'expr'")
    return anchor.expr


def single_expression(stmts: tuple[ast.stmt, ...]) -> ast.expr:
    """The expression of a one-expression snippet: an anchor's `expr` or a replace_expr template.

    The loader parses both as one expression statement (`parse_template(expression=True)`,
    and reading.py refuses an `expr` that is anything else).
    """
    first = stmts[0]
    if not isinstance(first, ast.Expr):
        raise TypeError(f"not a single expression: {ast.unparse(first)!r}")
    return first.value


def absolute_module(node: ast.ImportFrom, package: str) -> str | None:
    """The module an ImportFrom names, relative levels resolved against the file's package (None:
    beyond the top, which Python refuses too)."""
    if node.level == 0:
        return node.module or ""
    parts = package.split(".") if package else []
    if node.level - 1 > len(parts):
        return None
    base = parts[: len(parts) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])
