"""Which points are already in a file, and which statements are instrumentation.

Recognition runs in three passes over the ast:
  1. insert templates, found as exact runs of statements;
  2. rewrite and replace-expression templates, matched with the statements of
     pass 1 transparent (another point may sit inside a rewritten block);
  3. markers (tracing-call signatures a point alone has in its scope), which
     reveal points that are there but edited by hand.
"""

from __future__ import annotations

import ast
import copy
import functools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from trace_instrument.locate.handedits import EditedBlock, edited_runs
from trace_instrument.locate.index import (
    BLOCK_FIELDS,
    FileIndex,
    Site,
    StatementKey,
    header_only,
    is_block,
    position,
    statement_key,
    statement_print,
)
from trace_instrument.locate.match import Captures, Matcher
from trace_instrument.model import TRACING_NAMES, Anchor, BodyExtent, Edit, EditKind, Extents, Point
from trace_instrument.spec.code import (
    DEFINITIONS,
    OpenBody,
    expr_pattern,
    is_wild_body,
    single_expression,
    unbounded_bodies,
)
from trace_instrument.spec.signatures import TRACKER_METHODS, signatures_in


@dataclass(frozen=True, eq=False)
class Departure:
    """Business code a rewrite keeps that its anchor no longer matches: the fork edited it
    after apply. The point's own code is all there; the statement it was anchored on is not."""

    index: int  # the anchored statement (position in the anchor)
    expected: ast.stmt  # the anchor's statement
    found: ast.stmt  # the code the file holds there, in its pre-rewrite form
    line: int  # where that code is in the file


@dataclass(eq=False)
class Block:
    """One edit of a point, found in place."""

    point: Point
    edit: Edit
    top: list[ast.stmt]  # statements of the block in their list (rewrite: the replaced region)
    instrumentation: list[ast.stmt]  # statements that are tracing code only
    captures: Captures | None = None
    virtual: dict[int, ast.stmt] = field(default_factory=dict)  # real statement -> its pre-edit form
    expr: ast.expr | None = None  # REPLACE_EXPR: the replacement in the code
    exact: bool = True  # False for hand-edited code found by its markers: its comment lines are the user's
    departures: tuple[Departure, ...] = ()  # REWRITE: kept business code its anchor no longer matches
    unbounded: str = ""  # REWRITE: why where a captured body begins or ends is not known ("": it is)
    kept: tuple[ast.stmt, ...] = ()  # taken out by force: the fork's statements in it, left where it stood

    @property
    def line(self) -> int:
        return self.top[0].lineno if self.top else 0


@dataclass(eq=False)
class PointState:
    point: Point
    blocks: list[Block] = field(default_factory=list)
    absent: list[Edit] = field(default_factory=list)
    marker_nodes: list[ast.AST] = field(default_factory=list)
    edited: list[EditedBlock] = field(default_factory=list)  # hand-edited blocks around the markers

    @property
    def complete(self) -> bool:
        return not self.absent

    @property
    def untouched(self) -> bool:
        return not self.blocks and not self.marker_nodes

    @property
    def departures(self) -> list[Departure]:
        """Business code the point's rewrites keep that their anchors no longer match."""
        return [d for b in self.blocks for d in b.departures]

    @property
    def anchored(self) -> bool:
        """All its code is there, on what its anchors match (complete, and no departure)."""
        return self.complete and not self.departures

    @property
    def line(self) -> int:
        lines = [b.line for b in self.blocks] + [getattr(n, "lineno", 0) for n in self.marker_nodes]
        return min((line for line in lines if line), default=0)


class Recognition:
    """Recognise every catalog point of one file."""

    def __init__(
        self,
        index: FileIndex,
        points: Iterable[Point],
        helper_names: frozenset[str],
        markers_for: frozenset[str] | None = None,
        applied: frozenset[str] | None = None,
        extents: Extents | None = None,
        unrecognisable: frozenset[str] | None = None,
    ):
        """markers_for limits the marker pass to these point ids (None: all points).

        `applied`: the points the manifest says apply placed (None: not known). A def or class
        named like one a point inserts is that point's hand-edited code only when apply placed
        the point; otherwise it is the fork's own code of the same name (a name conflict).
        `extents`: where the captured bodies apply recorded begin and end (see `BodyExtent`).
        `unrecognisable`: the points whose code is not looked for (None: see `_recognisable`).
        """
        self.index = index
        self.helper_names = helper_names
        self.applied = applied
        self.extents: Extents = extents or {}
        self._prints: dict[int, str] = {}
        self.states: dict[str, PointState] = {}
        self.rank_of: dict[int, int] = {}  # instrumentation statement id -> edit rank
        self.virtual: dict[int, ast.stmt] = {}
        self.own_leading: dict[int, int] = {}  # first statement of a block -> comment lines its template brings
        self._signatures: dict[str, list[Site]] | None = None
        self._by_key: dict[StatementKey, list[Site]] | None = None
        self._by_type: dict[type, list[Site]] | None = None
        self._calls: list[tuple[str, ast.Call, Site]] | None = None
        names = sorted(TRACING_NAMES | TRACKER_METHODS | helper_names)
        self._mention = tuple(names)
        every = list(points)
        for point in every:
            self.states[point.id] = PointState(point)
        if unrecognisable is None:
            unrecognisable = frozenset(p.id for p in every if not self._recognisable(p))
        self.unrecognisable = unrecognisable
        points = [p for p in every if p.id not in unrecognisable]
        for point in every:
            if point.id in unrecognisable:
                self.states[point.id].absent.extend(point.edits)
        for point in points:
            for edit in point.edits:
                if edit.kind.inserts:
                    self._find_insert(point, edit)
        # a block another point's block was moved into is still whole: look again, stepping over it
        for point in points:
            for edit in list(self.states[point.id].absent):
                if edit.kind.inserts and self._find_insert(point, edit, over_others=True):
                    self.states[point.id].absent.remove(edit)
        for point in points:
            for edit in point.edits:
                if not edit.kind.inserts:
                    self._find_rewrite(point, edit)
        marked = [p for p in points if markers_for is None or p.id in markers_for]
        for point in marked:
            self._find_markers(point)
        # every point's marked statements are known: now each hand-edited block can grow to its edges
        for point in marked:
            self._grow_edited(point)

    def _recognisable(self, point: Point) -> bool:
        """Can code in the file be this point's? An opt-in extra's code that calls nothing of the
        runtime is told from the fork's own only by the manifest: it is the point's only where the
        manifest records apply placed it (verl 0.7's own `slowest = np.argmax(...)` line is one
        extra's code, word for word). A core point's code is its own wherever it is found: a
        manifest may lack its record (two branches' manifests merged), and the catalog's core code
        is not verl's."""
        if point.tracing_names or point.extra is None:
            return True
        return point.id in (self.applied or ())

    # -- pass 1: inserted statements ---------------------------------------------------

    def _find_insert(self, point: Point, edit: Edit, over_others: bool = False) -> bool:
        """Find an insert template as a run of statements (with over_others: other points'
        recognised blocks may sit between its statements). Records it, or the edit as absent."""
        template = list(edit.template.stmts)
        matcher = Matcher()
        scopes = self.index.scope_nodes(point.scope)
        for site in self._sites_by_key().get(statement_key(template[0]), ()):
            if not _in_scopes(site, scopes, self.index) or id(site.node) in self.rank_of:
                continue
            run = self._run_from(site, len(template), over_others)
            if len(run) < len(template) or any(id(s) in self.rank_of for s in run):
                continue
            if all(matcher.statement(t, s) for t, s in zip(template, run)):
                self._record(Block(point, edit, run, run), edit.rank)
                return True
        if not over_others:
            self.states[point.id].absent.append(edit)
        return False

    def _run_from(self, site: Site, length: int, over_others: bool) -> list[ast.stmt]:
        """`length` statements from `site` on; with over_others, recognised instrumentation is stepped over."""
        siblings = site.siblings
        if not over_others:
            return siblings[site.index : site.index + length]
        run: list[ast.stmt] = []
        for stmt in siblings[site.index :]:
            if len(run) == length:
                break
            if id(stmt) not in self.rank_of:
                run.append(stmt)
        return run

    def _sites_by_key(self) -> dict[StatementKey, list[Site]]:
        """Statements grouped by a cheap key, so a template's first statement meets few candidates."""
        if self._by_key is None:
            grouped: dict[StatementKey, list[Site]] = {}
            for site in self.index.sites:
                grouped.setdefault(statement_key(site.node), []).append(site)
            self._by_key = grouped
        return self._by_key

    # -- pass 2: rewrites and expression replacements -----------------------------------

    def _find_rewrite(self, point: Point, edit: Edit) -> None:
        """The rewrite's code where the business code it keeps still matches its anchor; else its
        code around kept business code the fork edited, when that is found exactly once (never a
        guess between two). Records it, or the edit as absent.

        A template whose captured body its own code does not bound (it starts or ends the
        template) is found by the body's recorded extent: as apply left it, else (the fork
        edited inside the body) where its first and last statements are, when that is one
        place. Without either, the code is still the point's, but where the body ends is not
        known: the block says so (`unbounded`), and remove leaves it."""
        unbounded = unbounded_bodies(edit.template.stmts) if edit.kind is EditKind.REWRITE else ()
        if not unbounded:
            block = self._search_rewrite(point, edit, _Bounds())
        else:
            block = self._bounded_rewrite(point, edit, unbounded)
        if block is None:
            self.states[point.id].absent.append(edit)
        else:
            self._adopt(block)

    def _bounded_rewrite(self, point: Point, edit: Edit, unbounded: tuple[OpenBody, ...]) -> Block | None:
        extents = self.extents.get((point.id, point.edits.index(edit)), {})
        edges = {body: extents[body.capture] for body in unbounded if body.capture in extents}
        if len(edges) == len(unbounded):
            lengths = {body.capture: extent.length for body, extent in edges.items()}
            exact = self._search_rewrite(point, edit, _Bounds(lengths, edges))
            if exact is not None:
                return self._with_edge_code(exact, edges)
            edged = self._search_rewrite(point, edit, _Bounds(edges=edges, unique=True))
            if edged is not None:
                return self._with_edge_code(edged, edges)
            # as long as the bodies, with as many statements around the region as apply left: the
            # fork edited statements in place (had it moved one across an open edge, a count differs)
            sized = self._search_rewrite(point, edit, _Bounds(lengths))
            if (
                sized is not None
                and self._around(sized) == _recorded_around(edges)
                and self._edited_in_place(sized, edges)
            ):
                return self._with_edge_code(sized, edges)
            # its code is still the point's: taken at the recorded length, which is all that is known
            block = sized or self._search_rewrite(point, edit, _Bounds())
            why = self._edges_changed(block, edges) if block is not None else ""
        else:
            why = "where the body it captured begins or ends was not recorded when it was applied"
            block = self._search_rewrite(point, edit, _Bounds())
        if block is not None:
            block.unbounded = why
        return block

    def _search_rewrite(self, point: Point, edit: Edit, bounds: _Bounds) -> Block | None:
        # a def or class the template writes is the point's as written: a fork's edit to it is a hand edit
        matcher = Matcher(skip=frozenset(self.rank_of), lengths=bounds.lengths, written_headers=True)
        clean: list[Block] = []
        departed: list[Block] = []
        for scope_node in self.index.scope_nodes(point.scope):
            for site in list(self.index.sites_in(scope_node)):
                if id(site.node) in self.rank_of:
                    continue
                block = (
                    self._match_replaced(point, edit, site.node)
                    if edit.kind is EditKind.REPLACE_EXPR
                    else self._match_rewrite(point, edit, matcher, site, bounds)
                )
                if block is None:
                    continue
                (departed if block.departures else clean).append(block)
                if clean and not bounds.unique:
                    return clean[0]
        if bounds.unique:
            found = clean or departed
            return found[0] if len(found) == 1 and (clean or _carries_tracing(edit, self.helper_names)) else None
        if len(departed) == 1 and _carries_tracing(edit, self.helper_names):
            return departed[0]
        return None

    def _edges_hold(self, caps: Captures, bounds: _Bounds) -> bool:
        """Do the captured bodies begin and end, on their open sides, with the statements apply recorded?"""
        if any(extent.length and not caps.bodies.get(body.capture) for body, extent in bounds.edges.items()):
            return False
        return all(self._print(stmt) == recorded for _side, stmt, recorded in _open_edges(caps, bounds.edges))

    def _with_edge_code(self, block: Block, edges: dict[OpenBody, BodyExtent]) -> Block:
        """The block with the other points' code next to an open edge of a body that is anchored
        on the body (`before` its first statement, `after` its last): that code is inside the
        body, and goes back into the block remove rebuilds. Code anchored on the statements
        outside the region stays outside."""
        caps = block.captures
        if caps is None:
            return block
        siblings = self.index.site(block.top[0]).siblings
        for open_body in edges:
            body = caps.bodies.get(open_body.capture, [])
            if not body:
                continue
            if open_body.start:
                at = position(siblings, body[0])
                taken = self._anchored_on(_skipped_at_end(siblings[:at], self.rank_of), body, EditKind.BEFORE)
                caps.attached[id(body[0])] = [*taken, *caps.attached.get(id(body[0]), [])]
                first = position(siblings, block.top[0])
                if taken and position(siblings, taken[0]) < first:
                    block.top[:0] = siblings[position(siblings, taken[0]) : first]
            if open_body.end:
                at = position(siblings, body[-1])
                taken = self._anchored_on(_skipped_at_start(siblings[at + 1 :], self.rank_of), body, EditKind.AFTER)
                caps.tails[open_body.capture] = taken
                last = position(siblings, block.top[-1])
                if taken and position(siblings, taken[-1]) > last:
                    block.top.extend(siblings[last + 1 : position(siblings, taken[-1]) + 1])
        return block

    def _anchored_on(self, run: list[ast.stmt], body: list[ast.stmt], kind: EditKind) -> list[ast.stmt]:
        """The part of a run of other points' statements next to a body edge whose blocks are
        anchored on the body: `before` its first statements, or `after` its last (the part
        nearest the body: what is beyond a block anchored outside stays outside)."""
        owner = {id(s): b for state in self.states.values() for b in state.blocks for s in b.top}
        ordered = run if kind is EditKind.AFTER else list(reversed(run))
        taken: list[ast.stmt] = []
        for stmt in ordered:
            found = owner.get(id(stmt))
            if found is None or not any(self._anchors_body(a, body, kind) for a in found.edit.anchors):
                break
            taken.append(stmt)
        return taken if kind is EditKind.AFTER else list(reversed(taken))

    def _anchors_body(self, anchor: Anchor, body: list[ast.stmt], kind: EditKind) -> bool:
        """Does an insert's anchor (of `kind`) match the body's statements at that edge?"""
        pattern = list(anchor.target.stmts)
        if anchor.kind is not kind or len(pattern) > len(body):
            return False
        run = body[: len(pattern)] if kind is EditKind.BEFORE else body[-len(pattern) :]
        matcher = Matcher(skip=frozenset(self.rank_of))
        return all(matcher.statement(p, self.view(s)) for p, s in zip(pattern, run))

    def _edited_in_place(self, block: Block, edges: dict[OpenBody, BodyExtent]) -> bool:
        """Is each open edge statement that differs from the record new code, not a statement the
        record names (one moved across the edge: from outside the region, or from the next body)?"""
        recorded = frozenset(p for extent in edges.values() for p in extent.prints)
        return all(
            (now := self._print(stmt)) == expected or now not in recorded
            for _side, stmt, expected in _open_edges(block.captures, edges)
        )

    def _around(self, block: Block) -> tuple[int, int]:
        """How many statements (other points' code not counted) its list holds before and after the block."""
        siblings = self.index.site(block.top[0]).siblings
        start, end = position(siblings, block.top[0]), position(siblings, block.top[-1])
        skip = self.rank_of
        before = sum(1 for s in siblings[:start] if id(s) not in skip)
        return before, sum(1 for s in siblings[end + 1 :] if id(s) not in skip)

    def _edges_changed(self, block: Block, edges: dict[OpenBody, BodyExtent]) -> str:
        """What differs at the open edges of the block's captured bodies from what apply recorded."""
        changed = [
            f"line {stmt.lineno} is not the statement apply left {side} in it"
            for side, stmt, recorded in _open_edges(block.captures, edges)
            if self._print(stmt) != recorded
        ]
        detail = (
            "; ".join(changed)
            or f"it does not hold the {', '.join(str(e.length) for e in edges.values())} statements apply left in it"
        )
        return f"the body it captured was edited at its open edge ({detail})"

    def _print(self, stmt: ast.stmt) -> str:
        if id(stmt) not in self._prints:
            self._prints[id(stmt)] = statement_print(stmt)
        return self._prints[id(stmt)]

    def _adopt(self, block: Block) -> None:
        self._record(block, block.edit.rank)
        self.virtual.update(block.virtual)

    def _match_rewrite(self, point: Point, edit: Edit, matcher: Matcher, site: Site, bounds: _Bounds) -> Block | None:
        template = list(edit.template.stmts)
        siblings = site.siblings
        real = [s for s in siblings[site.index :] if id(s) not in matcher.skip]
        caps = None
        for count in _region_sizes(template, len(real)):
            trial = Captures()
            if matcher.sequence(template, real[:count], trial) and self._edges_hold(trial, bounds):
                caps, last = trial, real[count - 1]
                break
        if caps is None:
            return None
        anchor = edit.anchors[0]
        top = siblings[site.index : position(siblings, last) + 1]
        matcher.record_attachments(top, caps)
        value_holders = {id(holder) for _, holder in caps.values.values()}
        instrumentation = [s for s in caps.holders.values() if id(s) not in value_holders]
        # a kept value is business code: seen as the anchored statement holding that value
        virtual = {
            id(holder): _with_value(anchor.target.stmts[index], value) for index, (value, holder) in caps.values.items()
        }
        departures = _departures(anchor, caps, virtual, matcher.skip)
        return Block(point, edit, top, instrumentation, captures=caps, virtual=virtual, departures=departures)

    def _match_replaced(self, point: Point, edit: Edit, stmt: ast.stmt) -> Block | None:
        anchor = edit.anchors[0]
        applied = applied_form(edit)
        if applied is None or not Matcher().statement(applied, stmt):
            return None
        # in the header only, as the anchor finder and the edit layer look: the body may say it too
        replacement = find_expression(header_only(stmt), single_expression(edit.template.stmts))
        view = _swapped_back(stmt, edit) if replacement is not None else None
        virtual = {id(stmt): view if view is not None else anchor.target.stmts[0]}
        return Block(point, edit, [stmt], [], virtual=virtual, expr=replacement)

    # -- pass 3: markers ------------------------------------------------------------------

    def _find_markers(self, point: Point) -> None:
        state = self.states[point.id]
        in_blocks = {id(s) for b in state.blocks for s in b.top}
        scopes = self.index.scope_nodes(point.scope)
        found: dict[int, Site] = {}
        for signature in point.markers:
            for site in self._signature_index().get(signature, ()):
                found[id(site.node)] = site
        for pattern in point.marker_patterns:
            for wanted in pattern.stmts:
                for site in self._sites_of_type(type(wanted)):
                    if Matcher().statement(wanted, site.node):
                        found[id(site.node)] = site
        # what is left of a block whose tracing call was deleted or edited: the template's own
        # private variable, assigned exactly as the template does (`_traj_uids = ...`)
        for wanted in _private_assignments(point) if state.absent else ():
            for site in self._sites_of_type(type(wanted)):
                if id(site.node) not in self.rank_of and Matcher().statement(wanted, site.node):
                    found[id(site.node)] = site
        marked = set(found)
        for site in sorted(found.values(), key=lambda s: (s.node.lineno, s.node.col_offset)):
            if not _in_scopes(site, scopes, self.index) or id(site.node) in in_blocks or _nested_in(site, in_blocks):
                continue
            if _nested_in(site, marked):
                continue  # inside another marked statement (a rewritten def's call): that one holds it
            if isinstance(site.node, DEFINITIONS) and self.applied is not None and point.id not in self.applied:
                continue  # a namesake the fork wrote, not this point's code
            state.marker_nodes.append(site.node)
            if id(site.node) not in self.rank_of:
                self.rank_of[id(site.node)] = min(e.rank for e in point.edits)

    def _grow_edited(self, point: Point) -> None:
        state = self.states[point.id]
        if not state.marker_nodes:
            return
        state.edited = edited_runs(self.index, point, state.marker_nodes, frozenset(self.rank_of))
        rank = min(e.rank for e in point.edits)
        for block in state.edited:
            for stmt in block.stmts:
                self.rank_of.setdefault(id(stmt), rank)

    def _signature_index(self) -> dict[str, list[Site]]:
        """Tracing-call signature -> the simple statements (and helper defs) that carry it."""
        if self._signatures is None:
            index: dict[str, list[Site]] = {}
            for site in self.index.sites:
                node = site.node
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    if node.name in self.helper_names:
                        index.setdefault(f"def {node.name}", []).append(site)
                    continue
                if is_block(node):
                    continue  # a block carries its children's calls; the children are indexed instead
                if not self.index.mentions(node, self._mention):
                    continue  # no tracing name in its text: skip the walk
                for signature in {sig for sig, _ in signatures_in([node], self.helper_names, loose=True)}:
                    index.setdefault(signature, []).append(site)
            self._signatures = index
        return self._signatures

    def _sites_of_type(self, kind: type) -> list[Site]:
        if self._by_type is None:
            by_type: dict[type, list[Site]] = {}
            for site in self.index.sites:
                by_type.setdefault(type(site.node), []).append(site)
            self._by_type = by_type
        return self._by_type.get(kind, [])

    def tracing_calls(self) -> list[tuple[str, ast.Call, Site]]:
        """(signature, call, the statement whose own code holds it) for every tracing call in the file
        (statements not naming one are skipped)."""
        if self._calls is None:
            found: list[tuple[str, ast.Call, Site]] = []
            for site in self.index.sites:
                if self.index.mentions(site.node, self._mention, header_only=True):
                    calls = signatures_in([header_only(site.node)], self.helper_names)
                    found.extend((sig, node, site) for sig, node in calls if isinstance(node, ast.Call))
            self._calls = found
        return self._calls

    def _record(self, block: Block, rank: int) -> None:
        self.states[block.point.id].blocks.append(block)
        if block.top and block.edit.kind.inserts:
            self.own_leading[id(block.top[0])] = block.edit.template.leading_lines
        for stmt in block.instrumentation:
            self.rank_of[id(stmt)] = rank

    # -- queries ----------------------------------------------------------------------------

    @property
    def instrumentation(self) -> frozenset[int]:
        return frozenset(self.rank_of)

    def view(self, stmt: ast.stmt) -> ast.stmt:
        """The statement as business code sees it (its pre-rewrite form)."""
        return self.virtual.get(id(stmt), stmt)


@dataclass(frozen=True)
class _Bounds:
    """What a rewrite's captured bodies must be to be taken: exactly so many statements
    (`lengths`), beginning and ending with the recorded statements (`edges`); `unique`: the
    match must be the only one in the scope."""

    lengths: dict[int, int] = field(default_factory=dict)
    edges: dict[OpenBody, BodyExtent] = field(default_factory=dict)
    unique: bool = False


def _open_edges(caps: Captures | None, edges: dict[OpenBody, BodyExtent]) -> Iterator[tuple[str, ast.stmt, str]]:
    """("first" or "last", the statement there, the digest apply recorded for it) at each open
    edge of each captured body that holds statements."""
    for open_body, extent in edges.items():
        body = caps.bodies.get(open_body.capture, []) if caps is not None else []
        if body and open_body.start:
            yield "first", body[0], extent.first
        if body and open_body.end:
            yield "last", body[-1], extent.last


def _skipped_at_end(stmts: list[ast.stmt], skip: dict[int, int]) -> list[ast.stmt]:
    """The statements ending `stmts` that are all other points' code."""
    run: list[ast.stmt] = []
    for stmt in reversed(stmts):
        if id(stmt) not in skip:
            break
        run.insert(0, stmt)
    return run


def _skipped_at_start(stmts: list[ast.stmt], skip: dict[int, int]) -> list[ast.stmt]:
    """The statements starting `stmts` that are all other points' code."""
    run: list[ast.stmt] = []
    for stmt in stmts:
        if id(stmt) not in skip:
            break
        run.append(stmt)
    return run


def _recorded_around(edges: dict[OpenBody, BodyExtent]) -> tuple[int, int] | None:
    """The statements apply recorded before and after the region (None: no record says)."""
    counts = {(extent.before, extent.after) for extent in edges.values()}
    return counts.pop() if len(counts) == 1 else None


def _carries_tracing(edit: Edit, helper_names: frozenset[str]) -> bool:
    """Does the template's own code call tracing code? Only then is a rewrite found around kept code
    its anchor does not match the point's: a template of business-like code alone could be the
    fork's own code, and remove would rebuild the anchor's statements over it."""
    return next(signatures_in(edit.template.stmts, helper_names), None) is not None


def _with_value(anchored: ast.stmt, value: ast.expr) -> ast.stmt:
    """The anchored statement holding the value the file holds (what a rewrite's value capture kept)."""
    view = copy.copy(anchored)
    assert isinstance(view, _VALUE_HOLDERS)  # the loader gives value captures no other statement
    view.value = value
    return view


_VALUE_HOLDERS = (ast.Return, ast.Assign, ast.Expr, ast.AnnAssign)


def _departures(
    anchor: Anchor, caps: Captures, virtual: dict[int, ast.stmt], skip: frozenset[int]
) -> tuple[Departure, ...]:
    """The business code a rewrite keeps (a whole statement, a value, a body) that the anchor's
    statement no longer matches. Other points' code is transparent, as in anchor matching."""
    pattern = anchor.target.stmts
    found: list[Departure] = []
    for index, stmt in caps.statements.items():
        if not Matcher(skip=skip).statement(pattern[index], stmt):
            found.append(Departure(index, pattern[index], stmt, stmt.lineno))
    for index, (_value, holder) in caps.values.items():
        view = virtual[id(holder)]
        if not Matcher().statement(pattern[index], view):
            found.append(Departure(index, pattern[index], view, holder.lineno))
    for index, body in caps.bodies.items():
        expected = getattr(pattern[index], "body", [])
        if body and not is_wild_body(expected) and not Matcher(skip=skip).body(expected, body):
            view = copy.copy(pattern[index])
            view.body = body  # type: ignore[attr-defined]  # a block statement (the loader says so)
            found.append(Departure(index, pattern[index], view, body[0].lineno))
    return tuple(sorted(found, key=lambda d: d.line))


def _swapped_back(stmt: ast.stmt, edit: Edit) -> ast.stmt | None:
    """A statement whose expression a replace_expr edit swapped, with the anchor's expression put
    back: the business code as it was, whatever else in the statement the anchor's wildcards let
    through (its nested blocks are the file's own)."""
    head = copy.deepcopy(header_only(stmt))
    replacement = find_expression(head, single_expression(edit.template.stmts))
    if replacement is None:
        return None
    original = single_expression(expr_pattern(edit.anchors[0]).stmts)
    view = _Swap(replacement, original).visit(head)
    assert isinstance(view, ast.stmt)  # only an expression inside the statement is swapped
    for name in BLOCK_FIELDS:
        if isinstance(getattr(stmt, name, None), list):
            setattr(view, name, getattr(stmt, name))
    return view


def _private_assignments(point: Point) -> list[ast.stmt]:
    """Top-level statements of the point's insert templates that assign one `_name` of its own."""
    found: list[ast.stmt] = []
    for edit in point.edits:
        if not edit.kind.inserts:
            continue
        for stmt in edit.template.stmts:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [getattr(stmt, "target", None)]
            if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and len(targets) == 1:
                target = targets[0]
                if isinstance(target, ast.Name) and target.id.startswith("_"):
                    found.append(stmt)
    return found


def _region_sizes(template: list[ast.stmt], available: int) -> range:
    """How many real statements a rewrite template may cover (a body capture stretches)."""
    stretches = any(getattr(getattr(t, "value", None), "id", "").endswith("_body__") for t in template)
    if not stretches:
        return range(len(template), len(template) + 1) if available >= len(template) else range(0)
    return range(max(1, len(template) - 1), available + 1)


def _in_scopes(site: Site, scopes: list[ast.AST], index: FileIndex) -> bool:
    for scope in scopes:
        if scope is index.tree:
            if not site.ancestors:
                return True
        elif any(a is scope for a in site.ancestors):
            return True
    return False


def _nested_in(site: Site, ids: set[int]) -> bool:
    return any(id(a) in ids for a in site.ancestors)


@functools.lru_cache(maxsize=4096)  # one entry per edit of the catalog
def applied_form(edit: Edit) -> ast.stmt | None:
    """The anchor statement of a replace-expression edit with the replacement made."""
    anchor = edit.anchors[0]
    original = single_expression(expr_pattern(anchor).stmts)
    replacement = single_expression(edit.template.stmts)
    stmt = copy.deepcopy(anchor.target.stmts[0])
    target = find_expression(stmt, original)
    if target is None:
        return None
    swapped = _Swap(target, replacement).visit(stmt)
    assert isinstance(swapped, ast.stmt)  # only an expression inside the statement is swapped
    return swapped


def find_expression(stmt: ast.AST, wanted: ast.expr) -> ast.expr | None:
    """The single sub-expression of stmt equal to wanted (None when absent or repeated)."""
    matcher = Matcher()
    found = [n for n in ast.walk(stmt) if isinstance(n, ast.expr) and matcher.node(wanted, n, Captures())]
    return found[0] if len(found) == 1 else None


class _Swap(ast.NodeTransformer):
    def __init__(self, target: ast.AST, replacement: ast.AST):
        self.target = target
        self.replacement = replacement

    def visit(self, node: ast.AST) -> ast.AST:
        if node is self.target:
            return copy.deepcopy(self.replacement)
        visited: ast.AST = super().visit(node)  # NodeTransformer.visit is typed Any
        return visited
