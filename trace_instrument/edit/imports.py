"""Module-level imports: added once, sorted the way ruff/isort sorts them, merged, removed.

Sections follow isort: standard library, third party, first party (verl).
Inside a section `import x` lines come before `from x import y` lines, each
ordered by module name; names in a `from` import are ordered by type
(CONSTANTS, Classes, functions) then alphabetically.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable
from dataclasses import dataclass

import libcst as cst

from trace_instrument.model import TRACING_MODULE

LINE_LENGTH = 120
FIRST_PARTY = frozenset({"verl"})


@dataclass
class ImportChanges:
    """What a run does to one file's imports."""

    tracing_names: frozenset[str] = frozenset()  # apply: names `from verl.utils.tracing import` must have
    statements: tuple[str, ...] = ()  # apply: other imports the code needs (e.g. "import time")
    prune: bool = False  # remove: drop tracing names and listed statements the code no longer uses
    prunable: tuple[str, ...] = ()  # remove: import statements the catalog may have added
    still_used: frozenset[str] = frozenset()  # remove: names the code uses once the removals are done


def _section(module: str) -> int:
    root = module.split(".")[0]
    if root == "__future__":
        return -1
    if root in sys.stdlib_module_names:
        return 0
    return 2 if root in FIRST_PARTY else 1


def _sort_key(node: ast.stmt) -> tuple[int, int, str]:
    if isinstance(node, ast.Import):
        module = node.names[0].name
        return _section(module), 0, module.lower()
    module = ("." * node.level) + (node.module or "")
    return _section(module) if node.level == 0 else 3, 1, module.lower()


def _name_key(name: str) -> tuple[int, str]:
    if len(name) > 1 and name.isupper():
        return 0, name
    return (1 if name[:1].isupper() else 2), name


def _as_ast(line: cst.CSTNode) -> ast.stmt | None:
    if (
        isinstance(line, cst.SimpleStatementLine)
        and len(line.body) == 1
        and isinstance(line.body[0], (cst.Import, cst.ImportFrom))
    ):
        return ast.parse(cst.Module(body=[line]).code.strip()).body[0]
    return None


def _import_region(body: list[cst.CSTNode]) -> list[tuple[int, ast.stmt]]:
    """(index, ast) of the module's leading import statements."""
    region = []
    for index, line in enumerate(body):
        node = _as_ast(line)
        if node is not None:
            region.append((index, node))
            continue
        if not (index == 0 and _is_docstring_line(line)):
            break
    return region


Alias = tuple[str, "str | None"]  # (name, asname)


def render_from_import(
    module: str, names: Iterable[str | Alias], like: cst.SimpleStatementLine | None = None
) -> cst.SimpleStatementLine:
    """`from module import ...`, names sorted like isort; one line, or one name per line past the line length."""
    aliases = {(n, None) if isinstance(n, str) else n for n in names}
    ordered = sorted(aliases, key=lambda a: (_name_key(a[0]), a[1] or ""))
    texts = [name if asname is None else f"{name} as {asname}" for name, asname in ordered]
    one_line = f"from {module} import {', '.join(texts)}"
    if len(one_line) > LINE_LENGTH:
        inner = "".join(f"    {text},\n" for text in texts)
        one_line = f"from {module} import (\n{inner})"
    line = cst.parse_statement(one_line + "\n")
    if like is not None:
        line = line.with_changes(leading_lines=like.leading_lines, trailing_whitespace=like.trailing_whitespace)
    return line


def _aliases(node: ast.ImportFrom) -> list[Alias]:
    return [(alias.name, alias.asname) for alias in node.names]


def _imported_names(node: ast.stmt) -> set[str]:
    return {alias.asname or alias.name.split(".")[0] for alias in node.names}


def add_imports(module: cst.Module, changes: ImportChanges) -> cst.Module:
    body = list(module.body)
    if changes.tracing_names:
        body = _merge_tracing(body, changes.tracing_names)
    for text in changes.statements:
        body = _ensure(body, text)
    return module.with_changes(body=body)


def _merge_tracing(body: list[cst.CSTNode], names: frozenset[str]) -> list[cst.CSTNode]:
    for index, node in _import_region(body):
        if isinstance(node, ast.ImportFrom) and node.module == TRACING_MODULE and node.level == 0:
            bound = _imported_names(node)
            if names <= bound:
                return body
            body[index] = render_from_import(TRACING_MODULE, [*_aliases(node), *(names - bound)], like=body[index])
            return body
    return _insert_sorted(body, render_from_import(TRACING_MODULE, names))


def _ensure(body: list[cst.CSTNode], text: str) -> list[cst.CSTNode]:
    wanted = ast.parse(text).body[0]
    bound = _imported_names(wanted)
    for _index, node in _import_region(body):
        same_module = getattr(node, "module", None) == getattr(wanted, "module", None)
        if type(node) is type(wanted) and bound <= _imported_names(node) and same_module:
            return body
    return _insert_sorted(body, cst.parse_statement(text + "\n"))


def _insert_sorted(body: list[cst.CSTNode], line: cst.SimpleStatementLine) -> list[cst.CSTNode]:
    new = ast.parse(cst.Module(body=[line]).code).body[0]
    key = _sort_key(new)
    region = _import_region(body)
    if not region:
        insert_at = 1 if body and _is_docstring_line(body[0]) else 0
        return [*body[:insert_at], line, *body[insert_at:]]
    same_section = [(i, n) for i, n in region if _sort_key(n)[0] == key[0]]
    if same_section:
        not_after = [(i, n) for i, n in same_section if _sort_key(n) <= key]
        if not_after:
            return _insert_at(body, not_after[-1][0] + 1, line)
        first = same_section[0][0]
        return _insert_before_taking_leading(body, first, line)
    lower = [(i, n) for i, n in region if _sort_key(n)[0] < key[0]]
    if lower:
        separated = line.with_changes(leading_lines=[cst.EmptyLine()])
        return _insert_at(body, lower[-1][0] + 1, separated)
    first = region[0][0]
    body = _insert_before_taking_leading(body, first, line)
    body[first + 1] = body[first + 1].with_changes(leading_lines=[cst.EmptyLine()])
    return body


def _insert_at(body: list[cst.CSTNode], index: int, line: cst.CSTNode) -> list[cst.CSTNode]:
    return [*body[:index], line, *body[index:]]


def _insert_before_taking_leading(body: list[cst.CSTNode], index: int, line: cst.SimpleStatementLine):
    neighbour = body[index]
    moved = line.with_changes(leading_lines=neighbour.leading_lines)
    return [*body[:index], moved, neighbour.with_changes(leading_lines=[]), *body[index + 1 :]]


def _is_docstring_line(line: cst.CSTNode) -> bool:
    return isinstance(line, cst.SimpleStatementLine) and isinstance(
        getattr(line.body[0], "value", None), (cst.SimpleString, cst.ConcatenatedString)
    )


# -- removal ------------------------------------------------------------------------------------


def prune_imports(module: cst.Module, changes: ImportChanges) -> cst.Module:
    """Drop tracing names no longer used, and catalog imports whose names are unused."""
    used = changes.still_used
    prunable = {ast.dump(ast.parse(text).body[0]) for text in changes.prunable}
    body = list(module.body)
    result: list[cst.CSTNode] = []
    carry: list[cst.EmptyLine] = []
    for index, line in enumerate(body):
        node = _as_ast(line)
        replacement = line
        if isinstance(node, ast.ImportFrom) and node.module == TRACING_MODULE and node.level == 0:
            keep = [(name, asname) for name, asname in _aliases(node) if (asname or name) in used]
            if not keep:
                replacement = None
            elif len(keep) < len(node.names):
                replacement = render_from_import(TRACING_MODULE, keep, like=line)
        elif node is not None and ast.dump(node) in prunable and not (_imported_names(node) & used):
            replacement = None
        if replacement is None:
            carry.extend(_handed_down(line, body[index + 1] if index + 1 < len(body) else None))
            continue
        if carry:
            replacement = replacement.with_changes(leading_lines=[*carry, *replacement.leading_lines])
            carry = []
        result.append(replacement)
    return module.with_changes(body=result)


def _handed_down(removed: cst.CSTNode, following: cst.CSTNode | None) -> list[cst.EmptyLine]:
    """Lines above a removed import that belong to what follows it.

    An import added first in its section took over the next line's lines and
    left it none: they go back. Otherwise only comments are handed down.
    """
    if following is not None and not following.leading_lines:
        return list(removed.leading_lines)
    return [empty for empty in removed.leading_lines if empty.comment is not None]
