"""Turning templates into LibCST nodes for a place, and rewrites back into originals."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import libcst as cst

from trace_instrument.edit.imports import Statement
from trace_instrument.model import CodePattern, Template
from trace_instrument.spec.code import PLACEHOLDER

Statements = list[Statement]


def with_leading(stmts: Sequence[Statement], lines: Sequence[cst.EmptyLine]) -> Statements:
    """The statements with `lines` put above the first one."""
    stmts = list(stmts)
    if stmts and lines:
        first = stmts[0]
        stmts[0] = first.with_changes(leading_lines=[*lines, *first.leading_lines])
    return stmts


def own_leading_count(template: Template) -> int:
    """Comment/blank lines the template itself puts above its first statement."""
    return template.leading_lines


class _UnindentBlankLines(cst.CSTTransformer):
    """Blank template lines carry no indentation wherever they are spliced."""

    def leave_EmptyLine(self, original_node: cst.EmptyLine, updated_node: cst.EmptyLine) -> cst.EmptyLine:
        if updated_node.comment is None:
            return updated_node.with_changes(indent=False, whitespace=cst.SimpleWhitespace(""))
        return updated_node


def unindented_blank_lines(stmts: Sequence[Statement]) -> Statements:
    """The statements with their blank lines carrying no indentation (as templates' do)."""
    return list(cst.Module(body=list(stmts)).visit(_UnindentBlankLines()).body)


@functools.lru_cache(maxsize=4096)  # one entry per edit of the catalog
def template_nodes(template: Template) -> tuple[Statement, ...]:
    """An insert or rewrite template as LibCST statements (header comments become the first
    one's leading lines). Parsed when a file is edited, not at load."""
    module = cst.parse_module(template.text).visit(_UnindentBlankLines())
    body = list(module.body)
    if body and module.header:
        first = body[0]
        body[0] = first.with_changes(leading_lines=[*module.header, *first.leading_lines])
    return tuple(body)


@functools.lru_cache(maxsize=4096)  # one entry per edit of the catalog
def template_expression(template: Template) -> cst.BaseExpression:
    """A replace_expr template's one expression, for the swap. Parsed when a file is edited."""
    return cst.parse_expression(template.text)


@functools.lru_cache(maxsize=4096)  # one entry per point or edit of the catalog
def pattern_statements(pattern: CodePattern) -> tuple[Statement, ...]:
    """The anchor pattern as LibCST statements (its text is the original code)."""
    return tuple(cst.parse_module(pattern.text + "\n").body)


# a `__anchor_N_value__` capture: the value (None: a bare `return`) and the line it came from
CapturedValue = tuple[cst.BaseExpression | None, cst.SimpleStatementLine]


class Captured:
    """What a rewrite template's placeholders stand for, as LibCST nodes."""

    def __init__(
        self,
        statements: dict[int, Statements],  # __anchor_N__: the statement, with what travels with it
        values: dict[int, CapturedValue],
        bodies: dict[int, Statements],
        around_value_line: dict[int, tuple[Statements, Statements]],  # statements travelling with a value line
        footers: dict[int, Sequence[cst.EmptyLine]] | None = None,  # comment lines ending a captured body
    ) -> None:
        self.statements = statements
        self.values = values
        self.bodies = bodies
        self.around_value_line = around_value_line
        self.footers = footers or {}

    def around(self, index: int) -> tuple[Statements, Statements]:
        """The statements that go before and after the line of value capture `index`."""
        return self.around_value_line.get(index, ([], []))


class _Fill(cst.CSTTransformer):
    """Replace placeholders in a rewrite template with captured code."""

    def __init__(self, captured: Captured) -> None:
        self.captured = captured

    def leave_SimpleStatementLine(
        self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> cst.BaseStatement | cst.FlattenSentinel[cst.BaseStatement] | cst.RemovalSentinel:
        if len(updated.body) != 1:
            return updated
        small = updated.body[0]
        name = small.value if isinstance(small, cst.Expr) else None
        if isinstance(name, cst.Name):
            match = PLACEHOLDER.match(name.value)
            if match and match.group(2) is None:
                return cst.FlattenSentinel(
                    with_leading(self.captured.statements[int(match.group(1))], updated.leading_lines)
                )
            if match and match.group(2) == "body":
                return cst.FlattenSentinel(
                    with_leading(self.captured.bodies[int(match.group(1))], updated.leading_lines)
                )
        value = getattr(small, "value", None)
        if isinstance(value, cst.Name):
            match = PLACEHOLDER.match(value.value)
            if match and match.group(2) == "value":
                index = int(match.group(1))
                expr, line = self.captured.values[index]
                filled = updated.with_changes(
                    body=[small.with_changes(value=expr)],
                    leading_lines=line.leading_lines,
                    trailing_whitespace=line.trailing_whitespace,
                )
                before, after = self.captured.around(index)
                return cst.FlattenSentinel([*before, filled, *after]) if before or after else filled
        return updated


def fill_template(template: Template, captured: Captured, written: Sequence[Statement] | None = None) -> Statements:
    """A rewrite template's statements with its placeholders replaced by the captured code.

    `written`: the template's statements as the checkout's formatter writes them (default: as
    the template is written). Comment lines that ended a captured block stay below its
    statements: they lead the template statement that follows the placeholder.
    """
    nodes = list(template_nodes(template) if written is None else written)
    for at, node in enumerate(nodes[:-1]):
        footer = captured.footers.get(body_placeholder(node), ())
        if footer:
            following = nodes[at + 1]
            nodes[at + 1] = following.with_changes(leading_lines=[*footer, *following.leading_lines])
    module = cst.Module(body=nodes)
    return list(module.visit(_Fill(captured)).body)


def body_placeholder(node: Statement) -> int:
    """N for a top-level `__anchor_N_body__` statement, else -1."""
    if isinstance(node, cst.SimpleStatementLine) and len(node.body) == 1:
        small = node.body[0]
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Name):
            match = PLACEHOLDER.match(small.value.value)
            if match and match.group(2) == "body":
                return int(match.group(1))
    return -1


def restore_originals(
    patterns: Sequence[Statement],
    captured: Captured,
) -> Statements:
    """Rebuild the anchored statements a rewrite replaced, from the anchor pattern and the captures."""
    restored: Statements = []
    for index, pattern in enumerate(patterns):
        if index in captured.statements:
            restored.extend(captured.statements[index])
        elif index in captured.values:
            expr, line = captured.values[index]
            before, after = captured.around(index)
            # a value capture sits in a return, assignment or expression statement (the loader checks)
            assert isinstance(pattern, cst.SimpleStatementLine)
            small = pattern.body[0]
            restored.extend(before)
            restored.append(
                pattern.with_changes(
                    body=[small.with_changes(value=expr)],
                    leading_lines=line.leading_lines,
                    trailing_whitespace=line.trailing_whitespace,
                )
            )
            restored.extend(after)
        elif index in captured.bodies:
            # the pattern's body is `...`; the captured statements make the real block
            footer = captured.footers.get(index, ())
            # the header line's comment (`with ...:  # why`) is the block's header whitespace
            suite = getattr(pattern, "body", None)
            block = cst.IndentedBlock(body=captured.bodies[index], footer=footer)
            if isinstance(suite, cst.IndentedBlock):
                block = block.with_changes(header=suite.header)
            restored.append(pattern.with_changes(body=block))
        else:
            restored.append(pattern)
    return restored


class _Newlines(cst.CSTTransformer):
    def __init__(self, newline: str) -> None:
        self.newline = newline

    def leave_SimpleString(self, original_node: cst.SimpleString, updated_node: cst.SimpleString) -> cst.BaseExpression:
        value = updated_node.value
        if "\n" in value and self.newline not in value:
            return updated_node.with_changes(value=value.replace("\n", self.newline))
        return updated_node


def native_newlines(stmts: Statements, newline: str) -> Statements:
    """Line breaks inside multi-line string literals written the way the file writes them (CRLF files)."""
    if newline == "\n":
        return stmts
    return list(cst.Module(body=stmts).visit(_Newlines(newline)).body)
