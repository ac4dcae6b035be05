"""Parsing the code snippets of specs and templates, once, at load."""

from __future__ import annotations

import ast
import hashlib
import re
import textwrap

import libcst as cst

from trace_instrument.model import CodePattern, SpecSource, Template

PLACEHOLDER = re.compile(r"^__anchor_(\d+)(?:_(value|body))?__$")
CAPTURE_LIKE = re.compile(r"^__anchor_")  # names in the captures' namespace: a typo there is an error


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


class _UnindentBlankLines(cst.CSTTransformer):
    """Blank template lines carry no indentation wherever they are spliced."""

    def leave_EmptyLine(self, original_node: cst.EmptyLine, updated_node: cst.EmptyLine) -> cst.EmptyLine:
        if updated_node.comment is None:
            return updated_node.with_changes(indent=False, whitespace=cst.SimpleWhitespace(""))
        return updated_node


def _statements_with_header(module: cst.Module) -> tuple[cst.BaseStatement, ...]:
    """Module statements; header comments become the first statement's leading lines."""
    module = module.visit(_UnindentBlankLines())
    body = list(module.body)
    if body and module.header:
        first = body[0]
        body[0] = first.with_changes(leading_lines=[*module.header, *first.leading_lines])
    return tuple(body)


def parse_template(name: str, text: str, *, expression: bool = False) -> Template:
    # leading blank lines are kept: they separate an inserted def from its neighbours
    body = textwrap.dedent(text).rstrip() + "\n"
    sha = hashlib.sha256(body.encode("utf-8")).hexdigest()[:16]
    if expression:
        source = body.strip()
        try:
            tree = ast.parse(source, mode="eval")
            node = cst.parse_expression(source)
        except (SyntaxError, cst.ParserSyntaxError) as exc:
            raise CodeError(1, f"expression does not parse: {exc}") from None
        return Template(name=name, text=source, stmts=(ast.Expr(tree.body),), cst=(node,), sha=sha)
    stmts = _parse_ast(body)
    if not stmts:
        raise CodeError(1, "is empty")
    try:
        module = cst.parse_module(body)
    except cst.ParserSyntaxError as exc:
        raise CodeError(exc.raw_line, f"does not parse: {exc.message}") from None
    return Template(name=name, text=body, stmts=stmts, cst=_statements_with_header(module), sha=sha)


def placeholders(stmts: tuple[ast.stmt, ...]) -> list[tuple[int, str]]:
    """(anchor index, role) of every capture a rewrite template uses; role '' is a whole statement."""
    found = []
    for top in stmts:
        for node in ast.walk(top):
            if isinstance(node, ast.Name):
                match = PLACEHOLDER.match(node.id)
                if match:
                    found.append((int(match.group(1)), match.group(2) or ""))
    return found


def bad_captures(stmts: tuple[ast.stmt, ...]) -> list[str]:
    """Names that look like captures (`__anchor_...`) but are not one of the three forms."""
    found = []
    for top in stmts:
        for node in ast.walk(top):
            if isinstance(node, ast.Name) and CAPTURE_LIKE.match(node.id) and not PLACEHOLDER.match(node.id):
                found.append(node.id)
    return found
