"""Finding where an absent edit goes: exactly one match, or a reasoned refusal."""

from __future__ import annotations

import ast
import difflib
import functools
from collections.abc import Sequence
from dataclasses import dataclass

from trace_instrument.locate.gap import first_change, reads
from trace_instrument.locate.index import FileIndex, Site, body_of, docstring_of, header_only, position
from trace_instrument.locate.match import Captures, Matcher
from trace_instrument.locate.names import clause_header
from trace_instrument.locate.recognize import Block, PointState, Recognition, find_expression
from trace_instrument.model import Anchor, Candidate, Edit, EditKind, Point, Reason, Status
from trace_instrument.spec.code import DEFINITIONS, expr_pattern, is_wild_body, rebuilt_positions, single_expression

# statements that hold blocks: a one-line `if x: y` shares its line with its own body, not a sibling
_COMPOUND = (
    ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try, ast.FunctionDef,
    ast.AsyncFunctionDef, ast.ClassDef, ast.Match,
)  # fmt: skip


@dataclass(eq=False)
class Placement:
    """Where one edit goes in the current code."""

    point: Point
    edit: Edit
    line: int
    neighbor: ast.stmt | None = None  # inserts: the template goes next to this statement
    after: bool = True
    take_leading: bool = False  # inserting before a statement takes over its comments and blank lines
    keep_leading: int = 0  # ... except the last lines the neighbour's own template put there
    region: tuple[ast.stmt, ...] = ()  # rewrite: every statement replaced, in order
    anchored: tuple[ast.stmt, ...] = ()  # rewrite: the anchored statements among them
    expr: ast.expr | None = None  # replace-expression: the expression replaced
    scope_node: ast.AST | None = None  # the def, class or module the inserted code runs in
    matched: tuple[ast.stmt, ...] = ()  # the statements its anchor matched (inserts: the code goes beside them)
    anchor_kind: EditKind | None = None  # which side of them (the matching anchor's kind)


@dataclass(frozen=True)
class AnchorFailure:
    status: Status
    reason: Reason
    message: str
    candidates: tuple[Candidate, ...] = ()
    line: int = 0


@dataclass(frozen=True)
class Misplaced:
    """An inserted block in place whose anchor puts it elsewhere, and what makes the difference."""

    line: int  # where the block is
    expected: int  # where its anchor puts it
    why: str  # what it reads or runs under there that it would not beside its anchor

    @property
    def message(self) -> str:
        """What is wrong and what to do; the fix moves the tracing code only, never business code."""
        return (
            f"its code is at line {self.line}, but its anchor puts it at line {self.expected}; move it back: "
            f"{self.why} (or re-anchor the point on the fork's code with an override, docs/anchors.md#overrides)"
        )


@dataclass(eq=False)
class _Match:
    anchor: Anchor
    stmts: list[ast.stmt]  # matched business statements, in order
    site: Site  # site of the first one


class AnchorFinder:
    def __init__(self, index: FileIndex, recognition: Recognition):
        self.index = index
        self.recognition = recognition
        self.skip = recognition.instrumentation

    def place(self, point: Point, edit: Edit, *, nearest: bool = True) -> Placement | AnchorFailure:
        """Where the edit goes; why not, with (`nearest`) the statements most like a lost anchor."""
        scope_nodes = self.index.scope_nodes(point.scope)
        if not scope_nodes:
            return self._scope_lost(point)
        for anchor in edit.anchors:
            rebuilt = rebuilt_positions(anchor, edit.template)
            matches = [m for node in scope_nodes for m in self._matches(anchor, node, rebuilt)]
            if len(matches) > 1:
                # each match with the function it is in, where that is not the point's scope itself
                lines = ", ".join(
                    f"{m.stmts[0].lineno}" + (f" in {m.site.scope}" if m.site.scope != point.scope else "")
                    for m in matches
                )
                return AnchorFailure(
                    Status.AMBIGUOUS,
                    Reason.SEVERAL_MATCHES,
                    f"anchor matches {len(matches)} places in {point.scope} (lines {lines}); refusing to guess",
                    tuple(Candidate(m.stmts[0].lineno, _in_scope(m, point), 1.0) for m in matches),
                    line=matches[0].stmts[0].lineno,
                )
            if matches:
                crowded = [s for s in matches[0].stmts if not self.index.alone_on_its_line(s)]
                if edit.kind is EditKind.REWRITE:
                    crowded += self._crowded_inside(matches[0].stmts)
                if crowded:
                    return _crowded(crowded[0])
                placed = self._placement(point, edit, matches[0])
                neighbour = getattr(placed, "neighbor", None)
                if neighbour is not None and not self.index.alone_on_its_line(neighbour):
                    return _crowded(neighbour)
                return placed
        return AnchorFailure(
            Status.ANCHOR_LOST,
            Reason.ANCHOR_NOT_FOUND,
            f"anchor not found in {point.scope}: {_first_line(edit.anchors[0].target.text)}",
            self.nearest(edit.anchors[0], scope_nodes) if nearest else (),
            line=_scope_line(scope_nodes[0]),
        )

    def _crowded_inside(self, stmts: Sequence[ast.stmt]) -> list[ast.stmt]:
        """Statements sharing a line (`a; b`) directly in a rewritten statement's blocks.

        A rewrite moves such blocks whole into its template; LibCST holds `a; b` as one line
        while the anchor sees two statements, and the two views cannot be paired safely.
        """
        found: list[ast.stmt] = []
        for stmt in stmts:
            for field in ("body", "orelse", "finalbody", "handlers"):
                block = getattr(stmt, field, None)
                if isinstance(block, list):
                    found += [s for s in block if isinstance(s, ast.stmt) and s.lineno in self.index.shared_lines]
        return [s for s in found if not isinstance(s, _COMPOUND)]

    # -- is a present block where its anchor puts it? -------------------------------------

    def misplaced(self, point: Point, block: Block) -> Misplaced | AnchorFailure | None:
        """Where an inserted block is and why that is not where its anchor puts it; why the anchor
        puts it nowhere when it is not found once (and the block is next to none of its matches:
        nothing shows the code belongs where it is). None when it is in place: beside its anchor,
        or apart from it by business code that changes nothing the block reads and cannot leave
        the body between them (and by other points' code apply places at the same anchor).
        """
        if not block.edit.kind.inserts or not block.top or not block.exact:
            return None
        if any(self._beside(anchor, block) for anchor in block.edit.anchors):
            return None
        placed = self.place(point, block.edit)
        if isinstance(placed, AnchorFailure):
            return placed if placed.status in (Status.ANCHOR_LOST, Status.AMBIGUOUS) else None
        if placed.neighbor is None:
            return None
        why = self._out_of_place(block, placed)
        if why is None:
            return None
        neighbour = placed.neighbor
        expected = (neighbour.end_lineno or neighbour.lineno) + 1 if placed.after else neighbour.lineno
        return Misplaced(block.line, expected, why)

    def _out_of_place(self, block: Block, placed: Placement) -> str | None:
        """What makes the block read other values, or run on other paths, than it would beside its
        anchor (None: nothing does)."""
        if not placed.matched or placed.anchor_kind is None:
            return "it is not beside its anchor"
        gap = self._between(block, placed.matched, placed.anchor_kind)
        if isinstance(gap, str):
            return gap
        read = reads(block.top)
        for stmt in gap:
            owner = self._code_owners.get(id(stmt))
            if owner is not None or id(stmt) in self.skip:
                if isinstance(owner, Block) and self._same_gap(owner, placed):
                    continue
                whose = f"point {owner.point.id}'s code" if owner is not None else "tracing code"
                return f"{whose} (line {stmt.lineno}) now runs between its anchor and it"
            change = first_change(stmt, read, self._imported)
            if change:
                return change
        return None

    def _between(self, block: Block, matched: tuple[ast.stmt, ...], kind: EditKind) -> list[ast.stmt] | str:
        """The statements between the block and the statements its anchor matched, or why the
        block is not in the statement list its anchor puts it in, or on the wrong side."""
        site = self.index.site(block.top[0])
        siblings = site.siblings
        first, last = position(siblings, block.top[0]), position(siblings, block.top[-1])
        if kind in (EditKind.BODY_START, EditKind.BODY_END):
            owner = matched[0]
            if site.owner is not owner or site.field != "body":
                return f"it is not in the body of `{_header(owner)}` (line {owner.lineno}), where its anchor puts it"
            if kind is EditKind.BODY_END:
                return siblings[last + 1 :]
            start = 1 if docstring_of(siblings) is not None and first > 0 else 0
            return siblings[start:first]
        anchor_site = self.index.site(matched[0])
        if anchor_site.siblings is not siblings:
            return self._other_block(site, anchor_site)
        if kind is EditKind.AFTER:
            end = position(siblings, matched[-1])
            if first < end:
                return f"it runs before `{_header(matched[-1])}` (line {matched[-1].lineno}), which its anchor puts it after"
            return siblings[end + 1 : first]
        start = position(siblings, matched[0])
        if last > start:
            return f"it runs after `{_header(matched[0])}` (line {matched[0].lineno}), which its anchor puts it before"
        return siblings[last + 1 : start]

    @staticmethod
    def _other_block(site: Site, anchor_site: Site) -> str:
        """The statement around the block and not its anchor (or around the anchor and not the
        block): the condition, loop, `with` or def one of them runs under and the other not."""
        theirs = {id(a) for a in anchor_site.ancestors}
        mine = {id(a) for a in site.ancestors}
        own = next((a for a in site.ancestors if id(a) not in theirs), None)
        if own is not None:
            return f"it runs inside `{_clause_header(own)}` (line {_line(own)}), and its anchor does not"
        other = next((a for a in anchor_site.ancestors if id(a) not in mine), None)
        if other is not None:
            return f"its anchor runs inside `{_clause_header(other)}` (line {_line(other)}), and it does not"
        # the same statements around both: another branch (`else:`, `finally:`) of the innermost one
        holder = site.owner
        return f"it runs in another branch of `{_clause_header(holder)}` (line {_line(holder)}) than its anchor"

    def _same_gap(self, other: Block, placed: Placement) -> bool:
        """Does apply put the other block on the same side of the same statement (two points
        anchored after one statement go there together)?"""
        if not other.edit.kind.inserts:
            return False
        theirs = self.place(other.point, other.edit)
        if not isinstance(theirs, Placement) or theirs.anchor_kind is not placed.anchor_kind or not theirs.matched:
            return False
        edge = -1 if placed.anchor_kind is EditKind.AFTER else 0
        return theirs.matched[edge] is placed.matched[edge]

    @functools.cached_property
    def _code_owners(self) -> dict[int, Block | PointState]:
        """Statement id -> the block of a point's code holding it (a hand-edited point's: its state)."""
        owners: dict[int, Block | PointState] = {}
        for state in self.recognition.states.values():
            for run in state.edited:
                owners.update((id(stmt), state) for stmt in run.stmts)
            for found in state.blocks:
                owners.update((id(stmt), found) for stmt in found.top)
        return owners

    @functools.cached_property
    def _imported(self) -> frozenset[str]:
        """The names the module's imports bind (calls on a module change no object of the code)."""
        found: set[str] = set()
        for node in ast.walk(self.index.tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found.update(alias.asname or alias.name.split(".")[0] for alias in node.names)
        return frozenset(found)

    def _beside(self, anchor: Anchor, block: Block) -> bool:
        """Is the block in the gap next to statements its anchor matches?"""
        site = self.index.site(block.top[0])
        siblings = site.siblings
        first, last = position(siblings, block.top[0]), position(siblings, block.top[-1])
        pattern = list(anchor.target.stmts)
        if anchor.kind in (EditKind.BODY_START, EditKind.BODY_END):
            # a module or an except/case clause holds no statement a block pattern matches
            if site.field != "body" or not isinstance(site.owner, ast.stmt) or not self._same(pattern[0], site.owner):
                return False
            if anchor.kind is EditKind.BODY_START:
                before = [s for s in siblings[:first] if id(s) not in self.skip]
                return not before or (len(before) == 1 and before[0] is docstring_of(siblings))
            return all(id(s) in self.skip for s in siblings[last + 1 :])
        if anchor.kind is EditKind.AFTER:
            business = [s for s in siblings[:first] if id(s) not in self.skip][-len(pattern) :]
        else:
            business = [s for s in siblings[last + 1 :] if id(s) not in self.skip][: len(pattern)]
        if len(business) != len(pattern) or not all(self._same(p, s) for p, s in zip(pattern, business)):
            return False
        if anchor.inside is None:
            return True
        return any(
            isinstance(a, ast.stmt) and self._same(anchor.inside.stmts[0], a)
            for a in self.index.site(business[0]).ancestors
        )

    # -- matching -------------------------------------------------------------------------

    def _matches(self, anchor: Anchor, scope_node: ast.AST, rebuilt: frozenset[int]) -> list[_Match]:
        """Where the anchor matches; `rebuilt`: the positions of the statements a rewrite rebuilds."""
        pattern = list(anchor.target.stmts)
        found = []
        # the scope's own def may be the block: `body_end: def method(self): ...`
        body_kind = anchor.kind in (EditKind.BODY_START, EditKind.BODY_END)
        if body_kind and isinstance(scope_node, ast.stmt) and self._same(pattern[0], scope_node):
            found.append(_Match(anchor, [scope_node], self.index.site(scope_node)))
        for _owner, _field, body in self.index.bodies_in(scope_node):
            business = [s for s in body if id(s) not in self.skip]
            for start in range(len(business) - len(pattern) + 1):
                run = business[start : start + len(pattern)]
                if not all(self._same(p, s, rebuilt=i in rebuilt) for i, (p, s) in enumerate(zip(pattern, run))):
                    continue
                site = self.index.site(run[0])
                if anchor.inside is None or self._inside(anchor, site, scope_node):
                    found.append(_Match(anchor, run, site))
        return found

    def _same(self, pattern: ast.stmt, stmt: ast.stmt, *, rebuilt: bool = False) -> bool:
        view = self.recognition.view(stmt)
        matcher = Matcher(skip=self.skip)
        return type(pattern) is type(view) and matcher.statement(pattern, view, Captures(), rebuilt=rebuilt)

    def _inside(self, anchor: Anchor, site: Site, scope_node: ast.AST) -> bool:
        ancestors = site.ancestors
        if scope_node in ancestors:
            ancestors = ancestors[ancestors.index(scope_node) + 1 :]
        assert anchor.inside is not None  # asked only for anchors with an `inside` (see _matches)
        wanted = anchor.inside.stmts[0]
        return any(isinstance(a, ast.stmt) and self._same(wanted, a) for a in ancestors)

    # -- placement ------------------------------------------------------------------------

    def _placement(self, point: Point, edit: Edit, match: _Match) -> Placement | AnchorFailure:
        placed = self._place_match(point, edit, match)
        if isinstance(placed, Placement):
            placed.scope_node = self._runs_in(match)
            placed.matched, placed.anchor_kind = tuple(match.stmts), match.anchor.kind
        return placed

    def _runs_in(self, match: _Match) -> ast.AST:
        """The def, class or module whose scope the edit's code runs in."""
        first = match.stmts[0]
        if match.anchor.kind in (EditKind.BODY_START, EditKind.BODY_END) and isinstance(first, DEFINITIONS):
            return first
        return self.index.enclosing_scope(first)

    def _place_match(self, point: Point, edit: Edit, match: _Match) -> Placement | AnchorFailure:
        kind = match.anchor.kind
        line = match.stmts[0].lineno
        if kind is EditKind.REWRITE:
            siblings = match.site.siblings
            first, last = position(siblings, match.stmts[0]), position(siblings, match.stmts[-1])
            region = tuple(siblings[first : last + 1])
            return Placement(point, edit, line, region=region, anchored=tuple(match.stmts))
        if kind is EditKind.REPLACE_EXPR:
            stmt = match.stmts[0]
            expr = find_expression(header_only(stmt), single_expression(expr_pattern(match.anchor).stmts))
            if expr is None:
                several = _count(stmt, match.anchor) > 1
                return AnchorFailure(
                    Status.AMBIGUOUS if several else Status.ANCHOR_LOST,
                    Reason.EXPRESSION_NOT_UNIQUE if several else Reason.ANCHOR_NOT_FOUND,
                    f"expression `{expr_pattern(match.anchor).text}` is not found exactly once in the anchor statement",
                    line=line,
                )
            return Placement(point, edit, line, region=(stmt,), anchored=(stmt,), expr=expr)
        return self._insertion(point, edit, match)

    def _insertion(self, point: Point, edit: Edit, match: _Match) -> Placement:
        kind = match.anchor.kind
        if kind in (EditKind.BODY_START, EditKind.BODY_END):
            body = body_of(match.stmts[0])  # the loader accepts only block statements for body_* anchors
            docstring = docstring_of(body)
            if kind is EditKind.BODY_START:
                gap_start = 1 if docstring is not None else 0
                gap_end = self._next_business(body, gap_start)
            else:
                gap_end = len(body)
                gap_start = self._previous_business_end(body, gap_end)
            prev_stmt = body[gap_start - 1] if gap_start > 0 else None
            next_stmt = body[gap_end] if gap_end < len(body) else None
            before_kind = kind is EditKind.BODY_START and docstring is None
        else:
            siblings = match.site.siblings
            if kind is EditKind.AFTER:
                anchor_pos = position(siblings, match.stmts[-1])
                gap_start = anchor_pos + 1
                gap_end = self._next_business(siblings, gap_start)
            else:
                anchor_pos = position(siblings, match.stmts[0])
                gap_end = anchor_pos
                gap_start = self._previous_business_end(siblings, gap_end)
            body = siblings
            prev_stmt = body[gap_start - 1] if gap_start > 0 else None
            next_stmt = body[gap_end] if gap_end < len(body) else None
            before_kind = kind is EditKind.BEFORE
        gap = body[gap_start:gap_end]
        lower = [s for s in gap if self.recognition.rank_of.get(id(s), -1) < edit.rank]
        higher = [s for s in gap if s not in lower]
        line = match.stmts[0].lineno
        if lower:
            return Placement(point, edit, line, neighbor=lower[-1], after=True)
        if higher:
            # a later point's block already sits in the gap; a before-insert takes over the lines
            # above it that are not that block's own, just as if both were inserted in one run
            own = self.recognition.own_leading.get(id(higher[0]), 0)
            return Placement(
                point, edit, line, neighbor=higher[0], after=False, take_leading=before_kind, keep_leading=own
            )
        if before_kind and next_stmt is not None:
            return Placement(point, edit, line, neighbor=next_stmt, after=False, take_leading=True)
        if prev_stmt is not None:
            return Placement(point, edit, line, neighbor=prev_stmt, after=True)
        return Placement(point, edit, line, neighbor=next_stmt, after=False, take_leading=before_kind)

    # A rewrite's own code bounds a gap as business code does: an insert anchored on a statement a
    # rewrite kept goes next to that statement, where apply puts it when both are placed in one run.

    def _next_business(self, body: list[ast.stmt], start: int) -> int:
        index = start
        while index < len(body) and id(body[index]) in self.skip and id(body[index]) not in self._rewritten:
            index += 1
        return index

    def _previous_business_end(self, body: list[ast.stmt], end: int) -> int:
        index = end
        while index > 0 and id(body[index - 1]) in self.skip and id(body[index - 1]) not in self._rewritten:
            index -= 1
        return index

    @functools.cached_property
    def _rewritten(self) -> frozenset[int]:
        """The statements rewrites wrote (their template's own code, not the code they keep)."""
        return frozenset(
            id(stmt)
            for state in self.recognition.states.values()
            for block in state.blocks
            if not block.edit.kind.inserts
            for stmt in block.instrumentation
        )

    # -- when the anchor is lost -------------------------------------------------------------

    def _scope_lost(self, point: Point) -> AnchorFailure:
        similar = self.index.similar_scopes(point.scope)
        candidates = tuple(
            Candidate(_scope_line(self.index.scopes[name][0]), f"def/class {name}", 0.0) for name in similar
        )
        return AnchorFailure(
            Status.ANCHOR_LOST, Reason.SCOPE_NOT_FOUND, f"scope {point.scope} not found in the file", candidates, line=1
        )

    def nearest(self, anchor: Anchor, scope_nodes: list[ast.AST], limit: int = 3) -> tuple[Candidate, ...]:
        wanted = _header(anchor.target.stmts[0])
        scored = []
        for scope_node in scope_nodes:
            for site in self.index.sites_in(scope_node):
                if id(site.node) in self.skip:
                    continue
                text = _header(self.recognition.view(site.node))
                matcher = difflib.SequenceMatcher(None, wanted, text, autojunk=False)
                if matcher.real_quick_ratio() < 0.5 or matcher.quick_ratio() < 0.5:
                    continue
                score = matcher.ratio()
                if score >= 0.5:
                    scored.append(Candidate(site.node.lineno, text, round(score, 2)))
        scored.sort(key=lambda c: (-c.score, c.line))
        return tuple(scored[:limit])


def _scope_line(scope_node: ast.AST) -> int:
    """The line a lost anchor is reported on: its scope's def (1 for the module)."""
    return getattr(scope_node, "lineno", 1)


def _in_scope(match: _Match, point: Point) -> str:
    """A match's first statement, with the function it is in when that is not the point's scope."""
    header = _header(match.stmts[0])
    return header if match.site.scope == point.scope else f"{header}  (in {match.site.scope})"


def _crowded(stmt: ast.stmt) -> AnchorFailure:
    return AnchorFailure(
        Status.REFUSED,
        Reason.CROWDED_LINE,
        f"line {stmt.lineno} holds more than one statement (`a; b` or a one-line block); "
        "put the statement on a line of its own to instrument it",
        line=stmt.lineno,
    )


def _count(stmt: ast.stmt, anchor: Anchor) -> int:
    wanted = single_expression(expr_pattern(anchor).stmts)
    matcher = Matcher()
    return sum(
        1 for n in ast.walk(header_only(stmt)) if isinstance(n, ast.expr) and matcher.node(wanted, n, Captures())
    )


def _clause_header(node: ast.AST) -> str:
    """The line that opens a statement or an except / case clause."""
    if isinstance(node, (ast.ExceptHandler, ast.match_case)):
        return clause_header(node)
    assert isinstance(node, ast.stmt)  # a site's ancestors are statements and clauses
    return _header(node)


def _line(node: ast.AST) -> int:
    """A statement's or clause's first line (a case clause: its pattern's)."""
    if isinstance(node, ast.match_case):
        return node.pattern.lineno
    return getattr(node, "lineno", 0)


def _header(stmt: ast.stmt) -> str:
    """One line of code standing for a statement (block statements: their header)."""
    if hasattr(stmt, "body") and not is_wild_body(getattr(stmt, "body", [])):
        shallow = header_only(stmt)
        shallow.body = [ast.Expr(ast.Constant(Ellipsis))]
        text = ast.unparse(shallow)
    else:
        text = ast.unparse(stmt)
    return _first_line(text)


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= 120 else line[:117] + "..."
