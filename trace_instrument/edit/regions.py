"""The exact text of a region a rewrite or replace_expr edit replaced, and putting it back.

apply records the original text of each region it replaces and a digest of the text it
made there; remove puts the recorded text back when the region still holds exactly what
apply made. A region of statements is measured in whole lines: from the first comment or
blank line LibCST gives its first statement, through the end of its last statement
(block footers included); a replaced expression is its source segment.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import libcst as cst

from trace_instrument.edit.cstmap import CstMap
from trace_instrument.spec.code import first_line

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")  # the line breaks Python itself counts


@dataclass(frozen=True)
class Original:
    """What a region held before apply (`text`) and the digest of what apply made of it."""

    text: str
    digest: str


def split_lines(text: str) -> list[str]:
    """The text's lines with their line breaks, numbered as Python numbers them (no form feeds)."""
    return _LINE.findall(text)


def statements_span(
    mapping: CstMap, module: cst.Module, stmts: Sequence[ast.stmt], *, leading: bool = True
) -> tuple[int, int]:
    """The lines (0-based start, end exclusive) of consecutive statements of one list.

    `leading`: from the first of the comment and blank lines above the first statement.
    """
    nodes: list[cst.CSTNode] = []
    for stmt in stmts:
        node = mapping.statement(stmt)
        if not any(node is seen for seen in nodes):
            nodes.append(node)
    first = nodes[0]
    lead = getattr(first, "leading_lines", ())
    code_line = first_line(stmts[0])
    body = [_without_leading(first), *nodes[1:]]
    rendered = cst.Module(
        body=[n for n in body if isinstance(n, (cst.SimpleStatementLine, cst.BaseCompoundStatement))],
        default_indent=module.default_indent,
        default_newline=module.default_newline,
    ).code
    start = code_line - 1 - (len(lead) if leading else 0)
    return start, code_line - 1 + len(split_lines(rendered))


def _without_leading(node: cst.CSTNode) -> cst.CSTNode:
    return node.with_changes(leading_lines=()) if hasattr(node, "leading_lines") else node


def expression_text(source: str, expr: ast.expr) -> str:
    """The exact source text of an expression (without the parentheses around it)."""
    return ast.get_source_segment(source, expr) or ""


def placeholder_name(index: int) -> str:
    """The name that stands for a recorded original until the edited code is spliced."""
    return f"__trace_instrument_original_{index}__"


def splice(code: str, originals: dict[str, str], statements: frozenset[str]) -> str:
    """The code with each placeholder replaced by its original text.

    A statement placeholder takes its whole line (indentation and line break included); an
    expression placeholder, its name alone. A placeholder inside a region another one
    restored is gone already.
    """
    for name, text in originals.items():
        if name in statements:
            # (a line starts after any break Python counts: `^` knows only `\n`)
            pattern = re.compile(rf"(?:\A|(?<=[\r\n]))[ \t]*{name}[ \t]*(?:\r\n|\r|\n|\Z)")
        else:
            pattern = re.compile(rf"\b{name}\b")
        code = pattern.sub(_literal(text), code, count=1)
    return code


def _literal(text: str) -> Callable[[re.Match[str]], str]:
    """A replacement for re.sub that is taken as it is (no backslash escapes)."""

    def replacement(_match: re.Match[str]) -> str:
        return text

    return replacement
