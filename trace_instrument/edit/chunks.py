"""Editing only the statements a file's placements touch, not the whole module.

LibCST parsing and printing is most of what an apply costs, and a verl trainer file is some
1,800 lines whose points sit in a few methods. So each group of touched statements is cut
out as a *chunk*: a run of consecutive statements of one block (the outermost function
around a touched statement, or the touched statement itself outside functions), with the
blank and comment lines LibCST gives its first statement. A chunk is parsed behind a few
prefix lines that put it where it stands in the file (`if True:` blocks above indented code,
opened at the file's own indentation; a `pass` above top-level code, so the lines above its
first statement stay that statement's), edited with the same `edit_module` as a whole file,
printed, and put back in place of its lines. The
imports are edited the same way on the head of the module: its docstring and import block,
with a stub of the statement that follows them.

Wherever a chunk cannot be cut so that LibCST sees its statements exactly as in the whole
file (comments that could belong to a neighbour's block, statements sharing a line, tabs or
other line breaks than `\\n`, a change next to the import block), `edit_by_chunks` returns
None and the caller edits the whole module: the result is the same text either way (tests
compare them on every catalog file of every supported verl release and on every fixture).
"""

from __future__ import annotations

import ast
import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import libcst as cst

from trace_instrument.edit.cstmap import CstMap, PairingError, pair
from trace_instrument.edit.formatting import Layout
from trace_instrument.edit.imports import ImportChanges, add_imports, prune_imports
from trace_instrument.edit.regions import Original, split_lines
from trace_instrument.edit.transform import EditError, edit_module
from trace_instrument.locate import Block, Placement
from trace_instrument.locate.index import FileIndex, is_block
from trace_instrument.model import TRACING_MODULE
from trace_instrument.spec.code import first_line

ENABLED = True  # False: every file is edited as a whole module (tests compare the two)
NEWLINE = "\n"
LIBCST_DEFAULT_INDENT = " " * 4  # a module without indented code (LibCST's own default)
_TAB_IN_INDENT = re.compile(r"^[ ]*\t", re.MULTILINE)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


class Unsuitable(Exception):
    """The file or a placement cannot be cut into chunks faithfully: the whole module is edited."""


Change = Placement | Block  # an edit to make, or a recognised block to take out


@dataclass(eq=False)
class _Chunk:
    """Consecutive statements `first..last` of one statement list, and what changes in them."""

    owner: ast.AST
    list_name: str  # the owner's field holding the statements
    first: int  # index in the list
    last: int
    changes: list[Change] = field(default_factory=list)

    @property
    def placements(self) -> list[Placement]:
        return [c for c in self.changes if isinstance(c, Placement)]

    @property
    def removals(self) -> list[Block]:
        return [c for c in self.changes if isinstance(c, Block)]

    def statements(self) -> list[ast.stmt]:
        items: list[ast.stmt] = getattr(self.owner, self.list_name)
        return items[self.first : self.last + 1]


@dataclass(frozen=True)
class Piece:
    """One chunk as edited: the input lines it replaced (1-based, inclusive), the lines it put
    there, and the prefix lines that parse them as they stand in the file."""

    span: tuple[int, int]
    prefix: str
    text: str


@dataclass
class ChunkedEdit:
    """A file edited chunk by chunk, and (when asked for) what measuring its regions needs: the
    LibCST statements of the input's and of the output's statements in the chunks."""

    text: str
    indent: str
    before: CstMap = field(default_factory=CstMap)
    originals: dict[Block, Original] = field(default_factory=dict)  # what removed rewrites held before apply
    headers: dict[Block, str] = field(default_factory=dict)  # ... exact or not (see edit_module)
    pieces: list[Piece] = field(default_factory=list)  # the chunks as edited, in file order
    after: dict[tuple[int, int, str], cst.CSTNode] = field(default_factory=dict)  # (line, column, kind)

    def module(self) -> cst.Module:
        """An empty module with the file's indentation and line break (what regions are measured with)."""
        return cst.Module(body=[], default_indent=self.indent, default_newline=NEWLINE)

    def after_mapping(self, tree: ast.Module) -> CstMap:
        """The output's statements in the chunks (`tree`: the output's ast), paired with LibCST's."""
        mapping = CstMap()
        for node in ast.walk(tree):
            if isinstance(node, ast.stmt):
                found = self.after.get((node.lineno, node.col_offset, type(node).__name__))
                if found is not None:
                    mapping.line_of[id(node)] = found
        return mapping


def edit_by_chunks(
    text: str,
    tree: ast.Module,
    index: FileIndex,
    placements: Sequence[Placement],
    imports: ImportChanges,
    *,
    measured: bool = False,
    removals: Sequence[Block] = (),
    originals: Mapping[Block, Original] | None = None,
    headers: Mapping[Block, str] | None = None,
    layout: Layout | None = None,
) -> ChunkedEdit | None:
    """The file's text with the placements made, the `removals` taken out (their `originals` put
    back where the region is as apply left it) and the imports added, by editing chunks (with
    `measured`, also the pairings its regions are measured with; `layout`: the checkout's
    formatter, for the templates); None when the file cannot be cut faithfully (edit the whole
    module then)."""
    if not _chunkable(text):
        return None  # LibCST's view of such files depends on more than a chunk's own lines
    lines = split_lines(text)
    try:
        result = ChunkedEdit(
            text, file_indent(tree, lines), originals=dict(originals or {}), headers=dict(headers or {})
        )
        chunks = _chunks(index, [*placements, *removals])
        head = _head(tree, lines, imports)
        spans = sorted(((_span(index, lines, chunk), chunk) for chunk in chunks), key=lambda item: item[0])
        _no_overlap([span for span, _ in spans], head)
        edited: dict[tuple[int, int], str] = {}
        if head is not None:
            edited[head.span] = _edit_head(lines, head, imports, result.indent)
        shift = _shift(lines, head.span, edited[head.span]) if head is not None else 0
        for span, chunk in spans:
            edited[span] = _edit_chunk(lines, span, chunk, result, shift if measured else None, layout)
            shift += _shift(lines, span, edited[span])
    except (Unsuitable, EditError, PairingError, cst.ParserSyntaxError, KeyError):
        return None  # (KeyError: a statement the index does not hold; the whole module is edited)
    result.text = _splice(lines, edited)
    return result


def _shift(lines: list[str], span: tuple[int, int], text: str) -> int:
    """How many lines an edit of the span adds."""
    return len(split_lines(text)) - (span[1] - span[0] + 1)


# -- where the chunks are -------------------------------------------------------------------------


def _chunkable(text: str) -> bool:
    return not ("\r" in text or "\x0c" in text or text.startswith("\ufeff") or _TAB_IN_INDENT.search(text))


def _touched(change: Change) -> tuple[ast.stmt, ...]:
    if isinstance(change, Block):
        return tuple(change.top)
    if change.neighbor is not None:
        return (change.neighbor,)
    return change.region or change.anchored


def _chunks(index: FileIndex, changes: Sequence[Change]) -> list[_Chunk]:
    """One chunk per run of touched statements; runs in one list that meet become one."""
    by_list: dict[tuple[int, str], list[_Chunk]] = {}
    for placement in changes:
        touched = _touched(placement)
        if not touched:
            raise Unsuitable("a placement without statements")
        roots = [_root(index, stmt) for stmt in touched]
        sites = [index.site(root) for root in roots]
        owner, list_field = sites[0].owner, sites[0].field
        if any(s.owner is not owner or s.field != list_field for s in sites):
            raise Unsuitable("a placement across statement lists")
        first, last = min(s.index for s in sites), max(s.index for s in sites)
        if isinstance(placement, Block) and placement.edit.kind.inserts:
            # statements taken out: their neighbours come too, so the chunk never ends up empty
            # (LibCST would give it a `pass`) and the lines they hand on land where they would
            first, last = max(first - 1, 0), min(last + 1, len(sites[0].siblings) - 1)
        chunk = _Chunk(owner, list_field, first, last, [placement])
        by_list.setdefault((id(owner), list_field), []).append(chunk)
    return [merged for chunks in by_list.values() for merged in _merge(chunks)]


def _root(index: FileIndex, stmt: ast.stmt) -> ast.stmt:
    """The outermost function around a statement (a change inside it stays inside it), or the
    statement itself outside functions."""
    functions = [a for a in index.site(stmt).ancestors if isinstance(a, _FUNCTIONS)]
    return functions[0] if functions else stmt


def _merge(chunks: list[_Chunk]) -> list[_Chunk]:
    """Chunks of one list that overlap or are next to each other, as one."""
    chunks = sorted(chunks, key=lambda c: c.first)
    merged = [chunks[0]]
    for chunk in chunks[1:]:
        current = merged[-1]
        if chunk.first <= current.last + 1:
            current.last = max(current.last, chunk.last)
            current.changes.extend(chunk.changes)
        else:
            merged.append(chunk)
    return merged


def _is_quiet(line: str) -> bool:
    """A blank or comment-only line."""
    stripped = line.strip()
    return not stripped or stripped.startswith("#")


def _indentation(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _span(index: FileIndex, lines: list[str], chunk: _Chunk) -> tuple[int, int]:
    """The chunk's lines (1-based, inclusive): from the blank and comment lines LibCST gives its
    first statement through its last statement's last line."""
    statements = chunk.statements()
    siblings: list[ast.stmt] = getattr(chunk.owner, chunk.list_name)
    first, last = statements[0], statements[-1]
    start, end = first_line(first), last.end_lineno or last.lineno
    column = first.col_offset
    if isinstance(chunk.owner, ast.Module) and chunk.first == 0:
        raise Unsuitable("the module's first statement (its leading lines are the module's header)")
    if _indentation(lines[start - 1]) != column:
        raise Unsuitable("the chunk does not start a line")
    previous = siblings[chunk.first - 1] if chunk.first > 0 else None
    following = siblings[chunk.last + 1] if chunk.last + 1 < len(siblings) else None
    if previous is not None and (previous.end_lineno or previous.lineno) >= start:
        raise Unsuitable("the chunk shares its first line")
    if following is not None and following.lineno <= end:
        raise Unsuitable("the chunk shares its last line")
    bound = (previous.end_lineno or previous.lineno) if previous is not None else _header_line(chunk.owner)
    while start - 1 > bound and _is_quiet(lines[start - 2]):
        start -= 1
    above = [line for line in lines[start - 1 : first_line(first) - 1] if line.strip()]
    if previous is not None and is_block(previous) and any(_indentation(c) > column for c in above):
        raise Unsuitable("comments above the chunk that may end the block before it")
    after = end
    while after < len(lines) and _is_quiet(lines[after]):
        if lines[after].strip() and _indentation(lines[after]) > column:
            raise Unsuitable("comments below the chunk that may end one of its blocks")
        after += 1
    return start, end


def _header_line(owner: ast.AST) -> int:
    """A line at or above the end of a block's header (the scan for leading lines stops above it)."""
    return getattr(owner, "lineno", 0)


def _no_overlap(spans: list[tuple[int, int]], head: _Head | None) -> None:
    """Each line is in one chunk at most (the head's included)."""
    ordered = sorted([*([head.span] if head is not None else []), *spans])
    for (_, end), (start, _) in itertools.pairwise(ordered):
        if start <= end:
            raise Unsuitable("chunks overlap")


# -- editing a chunk --------------------------------------------------------------------------------


def _edit_chunk(
    lines: list[str],
    span: tuple[int, int],
    chunk: _Chunk,
    result: ChunkedEdit,
    shift: int | None,
    layout: Layout | None = None,
) -> str:
    """The chunk's lines edited; with a `shift` (lines the edits above it added), the pairings
    of its statements go into `result`."""
    statements = chunk.statements()
    prefix, tree = _surroundings(statements, result.indent)
    text = prefix + "".join(lines[span[0] - 1 : span[1]])
    module = cst.parse_module(text)
    if module.default_indent != result.indent:
        raise Unsuitable("the chunk's first indentation is not the file's")
    removals = chunk.removals
    originals = {b: result.originals[b] for b in removals if b in result.originals}
    edited_module = edit_module(
        module,
        tree,
        chunk.placements,
        removals,
        originals=originals,
        text=text,
        positions=result.text,
        headers={b: result.headers[b] for b in removals if b in result.headers},
        layout=layout,
    )
    edited = edited_module.code
    if not edited.startswith(prefix):
        raise Unsuitable("the chunk's prefix changed")
    if shift is not None:
        _measure(module, tree, edited_module, edited, result, span[0] + shift - prefix.count(NEWLINE) - 1)
    result.pieces.append(Piece(span, prefix, edited[len(prefix) :]))
    return edited[len(prefix) :]


def _measure(
    module: cst.Module, tree: ast.Module, edited_module: cst.Module, edited: str, result: ChunkedEdit, offset: int
) -> None:
    """Pair the chunk's input statements and its output statements (by place: `offset` turns a
    line of the edited chunk into one of the output file) with their LibCST statements."""
    before = pair(module, tree)
    result.before.line_of.update(before.line_of)
    result.before.path_of.update(before.path_of)
    output = ast.parse(edited)
    after = pair(edited_module, output)
    for node in ast.walk(output):
        found = after.line_of.get(id(node)) if isinstance(node, ast.stmt) else None
        if found is not None and isinstance(node, ast.stmt):
            result.after[(node.lineno + offset, node.col_offset, type(node).__name__)] = found


def _surroundings(statements: list[ast.stmt], indent: str) -> tuple[str, ast.Module]:
    """The lines to put above a chunk, and the ast of the chunk behind them.

    They make LibCST see the chunk as in the file: its first statement follows another one (so
    the lines above it are its own), and the first indented line is indented as the file's
    first one (LibCST leaves blocks indented so without an indentation of their own, and
    gives inserted blocks that default). Indented statements sit in nested `if True:`
    blocks, one per level of the file's indentation; top-level ones follow a `pass`.
    """
    column = statements[0].col_offset
    if column == 0:
        prefix = "if True:" + NEWLINE + indent + "pass" + NEWLINE + "pass" + NEWLINE
        opener = ast.If(test=ast.Constant(True), body=[ast.Pass()], orelse=[])
        return prefix, ast.Module(body=[opener, ast.Pass(), *statements], type_ignores=[])
    levels = max(1, -(-column // len(indent)))  # wrappers at 0, indent, 2 * indent, ... below the chunk
    prefix = "".join(" " * (level * len(indent)) + "if True:" + NEWLINE for level in range(levels))
    body: list[ast.stmt] = list(statements)
    for _ in range(levels):
        body = [ast.If(test=ast.Constant(True), body=body, orelse=[])]
    return prefix, ast.Module(body=body, type_ignores=[])


# -- the module's head: docstring and imports -------------------------------------------------------


@dataclass(frozen=True)
class _Head:
    span: tuple[int, int]  # the lines up to the statement after the import block (1-based, inclusive)
    stub: str  # stands for that statement: a def, a class or a plain statement, as it is one


def _head(tree: ast.Module, lines: list[str], imports: ImportChanges) -> _Head | None:
    if not imports.tracing_names and not imports.statements and not imports.prune:
        return None
    body = tree.body
    position = 1 if body and _is_docstring(body[0]) else 0
    while position < len(body) and isinstance(body[position], (ast.Import, ast.ImportFrom)):
        position += 1
    if position == len(body):
        raise Unsuitable("nothing follows the import block")
    following = body[position]
    for before, after in itertools.pairwise(body[: position + 1]):
        if (before.end_lineno or before.lineno) >= first_line(after):
            raise Unsuitable("statements sharing a line in the module's head")
    if _indentation(lines[first_line(following) - 1]) != 0:
        raise Unsuitable("the statement after the imports does not start its line")
    return _Head((1, first_line(following) - 1), _stub_kind(following))


def _is_docstring(stmt: ast.stmt) -> bool:
    """A string statement, as LibCST's import code tells a docstring line."""
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.JoinedStr):
        raise Unsuitable("an f-string first (LibCST and ast tell docstrings apart differently)")
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, (str, bytes))
    )


def _stub_kind(stmt: ast.stmt) -> str:
    if isinstance(stmt, _FUNCTIONS):
        return "def"
    return "class" if isinstance(stmt, ast.ClassDef) else "pass"


def _stub_text(kind: str, indent: str) -> str:
    if kind == "pass":
        return "pass" + NEWLINE
    header = "def _trace_instrument_stub():" if kind == "def" else "class _TraceInstrumentStub:"
    return header + NEWLINE + indent + "pass" + NEWLINE


def _edit_head(lines: list[str], head: _Head, imports: ImportChanges, indent: str) -> str:
    stub = _stub_text(head.stub, indent)
    module = cst.parse_module("".join(lines[: head.span[1]]) + stub)
    # the head holds no block of its own (its first indented line is the stub's, if any)
    module = module.with_changes(default_indent=indent, default_newline=NEWLINE)
    edited = (prune_imports(module, imports) if imports.prune else add_imports(module, imports)).code
    if not edited.endswith(stub):
        raise Unsuitable("the stub after the imports changed")
    return edited[: len(edited) - len(stub)]


def prune_by_head(text: str, tree: ast.Module, imports: ImportChanges, *, before_line: int) -> str | None:
    """The file's text with the imports `imports` prunes taken out, editing its head alone (the
    docstring and import block); None when it cannot be (edit the whole module then): a file
    LibCST must see whole, or a prunable import further down the module.

    `tree`: the ast of the text before the chunks that made `text` were edited, all of which
    start at `before_line` or below (the head and the statement after it are as the ast says)."""
    if not imports.prune or not _chunkable(text):
        return None
    lines = split_lines(text)
    try:
        head = _head(tree, lines, imports)
        if head is None:
            return None
        following = next(s for s in tree.body if first_line(s) == head.span[1] + 1)
        if before_line <= (following.end_lineno or following.lineno):
            return None  # a chunk edited the head or the statement after it
        below = [s for s in tree.body if isinstance(s, (ast.Import, ast.ImportFrom)) and s.lineno > head.span[1]]
        if any(_prunable(s, imports) for s in below):
            return None
        edited = _edit_head(lines, head, imports, file_indent(tree, lines))
    except (Unsuitable, cst.ParserSyntaxError):
        return None
    return _splice(lines, {head.span: edited})


def _prunable(stmt: ast.Import | ast.ImportFrom, imports: ImportChanges) -> bool:
    """Could pruning take this import (or names of it) out?"""
    if isinstance(stmt, ast.ImportFrom) and stmt.module == TRACING_MODULE:
        return True
    return ast.dump(stmt) in {ast.dump(ast.parse(t).body[0]) for t in imports.prunable}


# -- putting it together ----------------------------------------------------------------------------


def _splice(lines: list[str], edited: dict[tuple[int, int], str]) -> str:
    result = list(lines)
    for (start, end), text in sorted(edited.items(), reverse=True):
        result[start - 1 : end] = [text]
    return "".join(result)


def file_indent(tree: ast.Module, lines: list[str]) -> str:
    """The indentation LibCST takes as a module's default: that of its first indented line of code
    (the first block body that does not share its header's line)."""
    for stmt in tree.body:
        if isinstance(stmt, ast.Match):
            raise Unsuitable("a match statement before any other indented code")
        body = getattr(stmt, "body", None)
        if not isinstance(body, list) or not body:
            continue
        line = lines[first_line(body[0]) - 1]
        indent = line[: len(line) - len(line.lstrip(" \t"))]
        if "\t" in indent:
            raise Unsuitable("tabs in the indentation")
        if indent and (len(indent) == body[0].col_offset or line[len(indent)] == "@"):
            return indent
        # a one-line suite, on the (last) line of its header: the next block may be indented
        if any(getattr(stmt, name, None) for name in ("orelse", "handlers", "finalbody")):
            raise Unsuitable("a one-line suite followed by another block of the same statement")
    return LIBCST_DEFAULT_INDENT
