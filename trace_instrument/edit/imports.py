"""Module-level imports: added once, sorted the way ruff/isort sorts them, merged, removed.

Sections follow isort: standard library, third party, first party (verl).
Inside a section `import x` lines come before `from x import y` lines, each
ordered by module name; names in a `from` import are ordered by type
(CONSTANTS, Classes, functions) then alphabetically.
"""

from __future__ import annotations

import ast
import functools
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import takewhile

import libcst as cst

from trace_instrument.model import TRACING_MODULE

LINE_LENGTH = 120
Statement = cst.SimpleStatementLine | cst.BaseCompoundStatement  # what a module's body holds
ImportNode = ast.Import | ast.ImportFrom
FIRST_PARTY = frozenset({"verl"})


@dataclass
class ImportChanges:
    """What a run does to one file's imports."""

    tracing_names: frozenset[str] = frozenset()  # apply: names `from verl.utils.tracing import` must have
    statements: tuple[str, ...] = ()  # apply: other imports the code needs (e.g. "import time")
    prune: bool = False  # remove: drop tracing names and listed statements the code no longer uses
    prunable: tuple[str, ...] = ()  # remove: import statements the catalog may have added
    still_used: frozenset[str] = frozenset()  # remove: names the code uses once the removals are done
    # apply: the checkout's formatter writing an import line apply makes (edit/formatting.py); None: as made
    restyle: Callable[[cst.SimpleStatementLine], cst.SimpleStatementLine] | None = None


def _section(module: str) -> int:
    root = module.split(".")[0]
    if root == "__future__":
        return -1
    if root in sys.stdlib_module_names:
        return 0
    return 2 if root in FIRST_PARTY else 1


def _sort_key(node: ImportNode) -> tuple[int, int, str]:
    if isinstance(node, ast.Import):
        module = node.names[0].name
        return _section(module), 0, module.lower()
    module = ("." * node.level) + (node.module or "")
    return _section(module) if node.level == 0 else 3, 1, module.lower()


def _name_key(name: str) -> tuple[int, str]:
    if len(name) > 1 and name.isupper():
        return 0, name
    return (1 if name[:1].isupper() else 2), name


@functools.lru_cache(maxsize=4096)  # each import line is looked at once per import added (nodes hash by identity)
def _as_ast(line: cst.CSTNode) -> ImportNode | None:
    if (
        isinstance(line, cst.SimpleStatementLine)
        and len(line.body) == 1
        and isinstance(line.body[0], (cst.Import, cst.ImportFrom))
    ):
        return _parse_import(cst.Module(body=[line]).code.strip())
    return None


def _parse_import(text: str) -> ImportNode:
    """One import statement's code as ast (LibCST parsed it as one, or the loader checked it is one)."""
    node = ast.parse(text).body[0]
    if not isinstance(node, (ast.Import, ast.ImportFrom)):
        raise TypeError(f"not an import statement: {text!r}")
    return node


def _import_region(body: Sequence[cst.CSTNode]) -> list[tuple[int, ImportNode]]:
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
    module: str,
    names: Iterable[str | Alias],
    like: cst.SimpleStatementLine | None = None,
    restyle: Callable[[cst.SimpleStatementLine], cst.SimpleStatementLine] | None = None,
) -> cst.SimpleStatementLine:
    """`from module import ...`, names sorted like isort; one line, or one name per line past the line
    length (`restyle`: as the checkout's formatter writes it)."""
    aliases = {(n, None) if isinstance(n, str) else n for n in names}
    ordered = sorted(aliases, key=lambda a: (_name_key(a[0]), a[1] or ""))
    texts = [name if asname is None else f"{name} as {asname}" for name, asname in ordered]
    one_line = f"from {module} import {', '.join(texts)}"
    if len(one_line) > LINE_LENGTH:
        inner = "".join(f"    {text},\n" for text in texts)
        one_line = f"from {module} import (\n{inner})"
    line = cst.parse_statement(one_line + "\n")
    assert isinstance(line, cst.SimpleStatementLine)  # an import is a simple statement
    if restyle is not None:
        line = restyle(line)
    if like is not None:
        line = line.with_changes(leading_lines=like.leading_lines, trailing_whitespace=like.trailing_whitespace)
    return line


def _aliases(node: ast.ImportFrom) -> list[Alias]:
    return [(alias.name, alias.asname) for alias in node.names]


def _imported_names(node: ImportNode) -> set[str]:
    return {alias.asname or alias.name.split(".")[0] for alias in node.names}


def add_imports(module: cst.Module, changes: ImportChanges) -> cst.Module:
    """The tracing names merged into `from verl.utils.tracing import ...`, and the other imports
    the code needs added where isort would put them (each only when not there yet)."""
    body = list(module.body)
    if changes.tracing_names:
        body = _merge_tracing(body, changes.tracing_names, changes.restyle)
    for text in changes.statements:
        body = _ensure(body, text)
    return module.with_changes(body=body)


def _merge_tracing(
    body: list[Statement],
    names: frozenset[str],
    restyle: Callable[[cst.SimpleStatementLine], cst.SimpleStatementLine] | None = None,
) -> list[Statement]:
    for index, node in _import_region(body):
        if isinstance(node, ast.ImportFrom) and node.module == TRACING_MODULE and node.level == 0:
            bound = _imported_names(node)
            if names <= bound:
                return body
            line = body[index]
            assert isinstance(line, cst.SimpleStatementLine)  # the import region holds one-import lines
            merged: list[str | Alias] = [*_aliases(node), *(names - bound)]
            body[index] = render_from_import(TRACING_MODULE, merged, like=line, restyle=restyle)
            return body
    return _insert_sorted(body, render_from_import(TRACING_MODULE, names, restyle=restyle))


def _ensure(body: list[Statement], text: str) -> list[Statement]:
    wanted = _parse_import(text)
    bound = _imported_names(wanted)
    for _index, node in _import_region(body):
        same_module = getattr(node, "module", None) == getattr(wanted, "module", None)
        if type(node) is type(wanted) and bound <= _imported_names(node) and same_module:
            return body
    return _insert_sorted(body, cst.parse_statement(text + "\n"))


def _insert_sorted(body: list[Statement], line: Statement) -> list[Statement]:
    new = _parse_import(cst.Module(body=[line]).code)
    key = _sort_key(new)
    region = _import_region(body)
    if not region:
        return _insert_first_import(body, line)
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


def _insert_first_import(body: list[Statement], line: Statement) -> list[Statement]:
    """The module's first import, set apart from the code that follows it (never glued to it).

    As LibCST's AddImportsVisitor does, the import goes after the docstring and
    the first statement below it gets an empty line in front (two before a def
    or class, as PEP 8 and ruff format want). The import takes over the blank
    lines (and comments above them) that stood over that statement; comments
    directly above the statement stay with it. `_settle_region_head`
    undoes exactly this, so `remove` gives back the original bytes.
    """
    index = 1 if body and _is_docstring_line(body[0]) else 0
    if index == len(body):
        return [*body, line]
    following = body[index]
    if not isinstance(following, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):  # a module holds statements
        return _insert_at(body, index, line)
    above, attached = _split_leading(following.leading_lines)
    separated = following.with_changes(leading_lines=[*_separation(following), *attached])
    return [*body[:index], line.with_changes(leading_lines=above), separated, *body[index + 1 :]]


def _split_leading(lines: Sequence[cst.EmptyLine]) -> tuple[list[cst.EmptyLine], list[cst.EmptyLine]]:
    """(lines up to the last blank one, the comment lines directly above the statement)."""
    blanks = [index for index, empty in enumerate(lines) if empty.comment is None]
    cut = blanks[-1] + 1 if blanks else 0
    return list(lines[:cut]), list(lines[cut:])


def _separation(statement: Statement) -> list[cst.EmptyLine]:
    """The empty lines between the imports and the first statement after them."""
    count = 2 if isinstance(statement, (cst.FunctionDef, cst.ClassDef)) else 1
    return [cst.EmptyLine() for _ in range(count)]


def _insert_at(body: list[Statement], index: int, line: Statement) -> list[Statement]:
    return [*body[:index], line, *body[index:]]


def _insert_before_taking_leading(body: list[Statement], index: int, line: Statement) -> list[Statement]:
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
    prunable = {ast.dump(ast.parse(text).body[0]) for text in changes.prunable}
    body = list(module.body)
    kept = [_pruned(line, changes.still_used, prunable) for line in body]
    settled = _settle_region_head(body, kept)
    result: list[Statement] = []
    carry: list[cst.EmptyLine] = []
    for index, (line, replacement) in enumerate(zip(body, kept)):
        if replacement is None:
            if index not in settled:
                carry.extend(_handed_down(line, body[index + 1] if index + 1 < len(body) else None))
            continue
        if carry:
            replacement = replacement.with_changes(leading_lines=[*carry, *replacement.leading_lines])
            carry = []
        result.append(replacement)
    return module.with_changes(body=result)


def _pruned(line: Statement, used: frozenset[str], prunable: set[str]) -> Statement | None:
    """The line as it stays once unused imports are dropped (None: the line goes)."""
    node = _as_ast(line)
    if isinstance(node, ast.ImportFrom) and node.module == TRACING_MODULE and node.level == 0:
        keep = [(name, asname) for name, asname in _aliases(node) if (asname or name) in used]
        if not keep:
            return None
        if len(keep) < len(node.names) and isinstance(line, cst.SimpleStatementLine):
            return render_from_import(TRACING_MODULE, keep, like=line)
    elif node is not None and ast.dump(node) in prunable and not (_imported_names(node) & used):
        return None
    return line


def _settle_region_head(body: Sequence[Statement], kept: list[Statement | None]) -> set[int]:
    """Give back the lines added first imports took over, when they go (updates `kept` in place).

    Inserting an import first hands it the lines above the statement that was
    first: the next import keeps none (same section) or one empty line (a later
    section), the first statement of a file with no imports gets its separation
    (`_insert_first_import`). When the imports at the top of the region go, the
    statement that is first again gets those lines back, so `remove` restores
    the original bytes. Returns the indices of the removed imports settled so.
    """
    region = _import_region(body)
    removed = list(takewhile(lambda item: kept[item[0]] is None, region))
    if not removed:
        return set()
    above = list(body[removed[0][0]].leading_lines)
    if len(removed) == len(region):
        following = region[-1][0] + 1
        statement = kept[following] if following < len(body) else None
        separation = len(_separation(statement)) if statement is not None else 0
        if statement is None or not _ours_on_top(statement, separation):
            return set()
        kept[following] = statement.with_changes(leading_lines=[*above, *statement.leading_lines[separation:]])
    else:
        index, node = region[len(removed)]
        receiver = kept[index]
        if receiver is None:  # cannot be: takewhile stopped at a kept import
            return set()
        later_section = _sort_key(node)[0] > _sort_key(removed[-1][1])[0]
        split_off = later_section and len(receiver.leading_lines) == 1 and _ours_on_top(receiver, 1)
        if receiver.leading_lines and not split_off:
            return set()
        kept[index] = receiver.with_changes(leading_lines=above)
    return {index for index, _node in removed}


def _ours_on_top(statement: Statement, count: int) -> bool:
    """Whether the statement's leading lines start with `count` plain empty lines (as the insert left them)."""
    top = list(statement.leading_lines)[:count]
    return len(top) == count and all(empty.deep_equals(cst.EmptyLine()) for empty in top)


def _handed_down(removed: Statement, following: Statement | None) -> list[cst.EmptyLine]:
    """Lines above a removed import that belong to what follows it.

    An import added first in its section took over the next line's lines and
    left it none: they go back. Otherwise only comments are handed down.
    """
    if following is not None and not following.leading_lines:
        return list(removed.leading_lines)
    return [empty for empty in removed.leading_lines if empty.comment is not None]
