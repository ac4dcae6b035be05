"""Inserted code written the way the checkout's formatter writes it (ruff or black).

Only the templates' statements are formatted, never the fork's code: each template is put at
the indentation it goes to, behind a statement of its own (nested `if True:` blocks and a
`pass`), and that small module is formatted; its statements are taken back as LibCST nodes, so
they print at that depth exactly as the formatter wrote them (line breaks, quotes, hanging
indents, trailing commas and docstrings at the right width). All the templates a file needs go
through the formatter in one document, separated by marker statements.

Why each formatter is run as it is:

- black has a Python API (`black.format_str`) and is run in process with the options
  `spec/style.py` read from `[tool.black]` and its pre-commit hook;
- ruff's PyPI package is a binary, so it is a subprocess (`python -m ruff` where the package is
  importable, else `ruff` on PATH), given the target file's path (`--stdin-filename`,
  `--force-exclude` as its pre-commit hook does), so it reads its own settings the way the
  fork's `ruff format` does: no option of it is re-implemented here.

The lines above a template's first statement (its comments and blank lines) keep their number:
`remove` takes that many lines out with the block. What the business code around an insertion
holds is never formatted. Where the formatter cannot be run on a template (tabs in the
indentation, a formatter error) the template goes in as it is written.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import libcst as cst

from trace_instrument.edit.imports import Statement
from trace_instrument.edit.render import template_nodes, unindented_blank_lines
from trace_instrument.model import CodeStyle, Formatter, FormatterMismatch, Template

_MARKER = "__trace_instrument_piece_{}__"
_MARKER_NAME = re.compile(r"^__trace_instrument_piece_(\d+)__$")
_CACHE: dict[tuple[Layout, str, str, str], tuple[Statement, ...] | None] = {}
_RUFF_TIMEOUT = 60  # seconds: a formatter that hangs must not hang apply


class FormatterFailed(Exception):
    """The formatter could not be run on the inserted code (not installed, or it failed)."""


@dataclass(frozen=True)
class Styling:
    """A run's formatting: the checkout's style and the checkout root ruff resolves its settings
    from (a scratch copy of the checkout is formatted as the checkout itself is)."""

    style: CodeStyle
    checkout: str

    def layout(self, relative: str) -> Layout:
        """How one file's inserted code is formatted."""
        return Layout(self.style, str(Path(self.checkout) / relative))


@dataclass(frozen=True)
class Layout:
    """One file's formatting: the style, and the file's path in the checkout."""

    style: CodeStyle
    path: str


def installed(style: CodeStyle) -> bool:
    """Can this machine run the style's formatter?"""
    if style.formatter is Formatter.BLACK:
        return importlib.util.find_spec("black") is not None
    return _ruff_command() is not None


def mismatch(style: CodeStyle) -> FormatterMismatch | None:
    """The formatter installed here, when the checkout pins another version of it (None when it pins
    none, the versions agree, or the installed one does not say)."""
    if not style.pinned:
        return None
    version = installed_version(style.formatter)
    if not version or _release(version) == _release(style.pinned):
        return None
    return FormatterMismatch(style, version)


def _release(version: str) -> tuple[int | str, ...]:
    """A version's parts, trailing zeros dropped ("0.12" and "0.12.0" are one release)."""
    parts: list[int | str] = [int(part) if part.isdigit() else part for part in version.strip().lstrip("v").split(".")]
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


@functools.lru_cache(maxsize=2)
def installed_version(formatter: Formatter) -> str:
    """The version of the formatter this machine runs ("" when not installed or it does not say):
    the package's metadata, else (ruff on PATH) what `ruff --version` prints."""
    if formatter is Formatter.BLACK or _ruff_command() == (sys.executable, "-m", "ruff"):
        try:
            return metadata.version(formatter.value)
        except metadata.PackageNotFoundError:
            return ""
    command = _ruff_command()
    if command is None:
        return ""
    try:
        done = subprocess.run(
            [*command, "--version"], capture_output=True, text=True, timeout=_RUFF_TIMEOUT, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    words = done.stdout.split()  # "ruff 0.12.2"
    return words[1] if done.returncode == 0 and len(words) > 1 else ""


def statements(layout: Layout | None, template: Template, indent: str, unit: str) -> tuple[Statement, ...]:
    """The template's statements as the formatter writes them at `indent` (the file's
    indentation of the place; `unit` one level of it), or as written without a layout."""
    key = _key(layout, template, indent, unit)
    if key is None:
        return template_nodes(template)
    if key not in _CACHE:
        prepare(layout, [(template, indent)], unit)
    return _CACHE.get(key) or template_nodes(template)


def prepare(layout: Layout | None, wanted: Iterable[tuple[Template, str]], unit: str) -> None:
    """Format the templates a file needs at their indentations in one run of the formatter."""
    if layout is None:
        return
    pending: dict[tuple[Layout, str, str, str], tuple[Template, int]] = {}
    for template, indent in wanted:
        key = _key(layout, template, indent, unit)
        if key is not None and key not in _CACHE and key not in pending:
            pending[key] = (template, len(indent) // len(unit) if indent else 0)
    if not pending:
        return
    document = _document([piece for piece in pending.values()], unit)
    try:
        formatted = _format(layout, document)
        pieces = _pieces(formatted, len(pending))
    except (FormatterFailed, cst.ParserSyntaxError):
        pieces = [None] * len(pending)
    for (key, (template, _levels)), nodes in zip(pending.items(), pieces):
        _CACHE[key] = _keep_leading(template, nodes)


def import_restyler(layout: Layout | None) -> Callable[[cst.SimpleStatementLine], cst.SimpleStatementLine] | None:
    """What writes an import line apply makes as the formatter does (None without a layout)."""
    if layout is None:
        return None

    def restyle(line: cst.SimpleStatementLine) -> cst.SimpleStatementLine:
        written = statements(layout, import_template(line), "", "")
        first = written[0] if len(written) == 1 else None
        return first if isinstance(first, cst.SimpleStatementLine) else line

    return restyle


def import_template(line: cst.SimpleStatementLine) -> Template:
    """An import line apply makes, as a module-level template (so it is formatted as one)."""
    text = cst.Module(body=[line.with_changes(leading_lines=())]).code
    return Template("import", text, tuple(ast.parse(text).body), "")


def _key(layout: Layout | None, template: Template, indent: str, unit: str) -> tuple[Layout, str, str, str] | None:
    """The cache key of a template at an indentation; None where it is not formatted (no
    layout, an expression template, tabs, an indentation not made of whole levels). At the
    top level the unit does not matter."""
    if layout is None or template.expression or indent.strip(" "):
        return None
    if not indent:
        return (layout, template.text, "", "")
    if not unit or unit.strip(" ") or len(indent) % len(unit):
        return None
    return (layout, template.text, indent, unit)


def _document(pieces: Sequence[tuple[Template, int]], unit: str) -> str:
    """One module holding every template: a marker statement, then the template at its depth
    behind a `pass` (so the lines above it stay its own), in `if True:` blocks."""
    body: list[Statement] = []
    for number, (template, levels) in enumerate(pieces):
        body.append(cst.SimpleStatementLine([cst.Expr(cst.Name(_MARKER.format(number)))]))
        nodes: list[Statement] = [
            *([cst.SimpleStatementLine([cst.Pass()])] if levels else []),
            *template_nodes(template),
        ]
        for _ in range(levels):
            nodes = [cst.If(test=cst.Name("True"), body=cst.IndentedBlock(body=nodes))]
        body.extend(nodes)
    return cst.Module(body=body, default_indent=unit).code


def _pieces(formatted: str, count: int) -> list[tuple[Statement, ...] | None]:
    """Each template's statements out of the formatted document, in order."""
    module = cst.parse_module(formatted)
    found: list[list[Statement]] = []
    for stmt in module.body:
        if _marker(stmt) is not None:
            found.append([])
        elif found:
            found[-1].append(stmt)
    if len(found) != count:
        raise FormatterFailed("the formatter merged or dropped the pieces")
    return [_innermost(piece) for piece in found]


def _marker(stmt: cst.CSTNode) -> int | None:
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
        small = stmt.body[0]
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Name):
            match = _MARKER_NAME.match(small.value.value)
            return int(match.group(1)) if match else None
    return None


def _innermost(piece: list[Statement]) -> tuple[Statement, ...] | None:
    """The template's statements inside a piece's `if True:` blocks, its `pass` dropped."""
    nested = False
    while len(piece) == 1 and isinstance(piece[0], cst.If) and _is_wrapper(piece[0]):
        block = piece[0].body
        assert isinstance(block, cst.IndentedBlock)  # the wrappers are written as blocks
        piece = [s for s in block.body if isinstance(s, (cst.SimpleStatementLine, cst.BaseCompoundStatement))]
        nested = True
    if nested:
        if not piece or not _is_pass(piece[0]):
            return None
        piece = piece[1:]
    return tuple(unindented_blank_lines(piece)) if piece else None


def _is_wrapper(node: cst.If) -> bool:
    return isinstance(node.test, cst.Name) and node.test.value == "True" and node.orelse is None


def _is_pass(node: Statement) -> bool:
    return isinstance(node, cst.SimpleStatementLine) and len(node.body) == 1 and isinstance(node.body[0], cst.Pass)


def _keep_leading(template: Template, nodes: tuple[Statement, ...] | None) -> tuple[Statement, ...] | None:
    """The formatted statements with the template's own lines above each one, in number: `remove`
    takes out as many above the first as the template has, and rebuilds a rewrite's captured
    block from the lines above the statement after it (the formatter only ever changes blank ones)."""
    if not nodes:
        return None
    own = template_nodes(template)
    if len(nodes) != len(own):
        return None
    return tuple(
        node
        if len(node.leading_lines) == len(mine.leading_lines)
        else node.with_changes(leading_lines=mine.leading_lines)
        for node, mine in zip(nodes, own)
    )


def _format(layout: Layout, document: str) -> str:
    """The document as the style's formatter writes it."""
    if layout.style.formatter is Formatter.BLACK:
        return _black(layout.style, document)
    return _ruff(layout, document)


def _black(style: CodeStyle, document: str) -> str:
    try:
        import black
        from black.mode import TargetVersion
    except ImportError as exc:
        raise FormatterFailed(f"black is not installed: {style.install}") from exc
    known = TargetVersion.__members__
    targets = {TargetVersion[t.upper()] for t in style.target_versions if t.upper() in known}
    mode = black.Mode(
        target_versions=targets,
        line_length=style.line_length,
        string_normalization=style.string_normalization,
        magic_trailing_comma=style.magic_trailing_comma,
        preview=style.preview,
    )
    try:
        formatted: str = black.format_str(document, mode=mode)
        return formatted
    except Exception as exc:  # black raises its own errors for input it cannot format
        raise FormatterFailed(f"black: {exc}") from exc


def _ruff(layout: Layout, document: str) -> str:
    command = _ruff_command()
    if command is None:
        raise FormatterFailed(f"ruff is not installed: {layout.style.install}")
    try:
        done = subprocess.run(
            [*command, "format", *layout.style.arguments, "--force-exclude", "--stdin-filename", layout.path],
            input=document,
            capture_output=True,
            text=True,
            encoding="utf-8",
            cwd=layout.style.directory or None,
            timeout=_RUFF_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise FormatterFailed(f"ruff: {exc}") from exc
    if done.returncode != 0:
        raise FormatterFailed(f"ruff: {done.stderr.strip()}")
    return done.stdout


@functools.lru_cache(maxsize=1)
def _ruff_command() -> tuple[str, ...] | None:
    """How ruff is run here: the package of this Python, else the `ruff` on PATH, else None."""
    if importlib.util.find_spec("ruff") is not None:
        return (sys.executable, "-m", "ruff")
    found = shutil.which("ruff")
    return (found,) if found else None
