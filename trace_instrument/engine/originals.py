"""The original text of the regions rewrite and replace_expr edits replace: recorded by apply,
handed to the removal, kept current when a later run changes a region it does not own.

A region's original goes back byte for byte only while the region holds exactly what the
last run left there (its digest), and only when exactly the points whose code the original
holds stay in place; otherwise remove rebuilds the code from the anchor and the captures
(which keeps the user's edits to captured business code).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

import libcst as cst

from trace_instrument.edit.cstmap import CstMap, pair
from trace_instrument.edit.digests import digest
from trace_instrument.edit.regions import Original, expression_text, split_lines, statements_span
from trace_instrument.engine.manifest import Manifest, Replaced, Replacements
from trace_instrument.locate import Block, FileLocator, Placement
from trace_instrument.locate.index import body_of, position, statement_print
from trace_instrument.model import BodyExtent, Edit, EditKind, Point
from trace_instrument.spec.code import unbounded_bodies


def records_edit(edit: Edit) -> bool:
    """Does apply record what this edit replaces?"""
    return edit.kind is EditKind.REPLACE_EXPR or not edit.kind.inserts


def edit_index(point: Point, edit: Edit) -> int:
    """The edit's place among its point's edits (the manifest's key for it)."""
    return next(i for i, e in enumerate(point.edits) if e is edit)


def placed_extents(
    placements: Iterable[Placement], locator: FileLocator
) -> dict[tuple[str, int], dict[int, BodyExtent]]:
    """Where the bodies these rewrites capture, unbounded by the templates' own code, will be:
    apply moves each whole. (Other points' code, which recognition steps over, is not counted.)"""
    skip = locator.recognition.instrumentation
    found: dict[tuple[str, int], dict[int, BodyExtent]] = {}
    for placement in placements:
        edit = placement.edit
        if edit.kind is not EditKind.REWRITE or not placement.region:
            continue
        siblings = locator.index.site(placement.region[0]).siblings
        start, end = position(siblings, placement.region[0]), position(siblings, placement.region[-1])
        above = [s for s in siblings[:start] if id(s) not in skip]
        below = [s for s in siblings[end + 1 :] if id(s) not in skip]
        beyond = (statement_print(above[-1]) if above else "", statement_print(below[0]) if below else "")
        for index, _start, _end in unbounded_bodies(edit.template.stmts):
            body = [s for s in body_of(placement.anchored[index]) if id(s) not in skip]
            first, last = (statement_print(body[0]), statement_print(body[-1])) if body else ("", "")
            key = (placement.point.id, edit_index(placement.point, edit))
            found.setdefault(key, {})[index] = BodyExtent(len(body), first, last, len(above), len(below), *beyond)
    return found


def for_removal(
    manifest: Manifest, blocks: Iterable[Block], in_place: Iterable[str], removing: Iterable[str]
) -> dict[Block, Original]:
    """The recorded originals the removal of `blocks` may put back.

    `in_place`: the points with code in the file before the removal; `removing`: those it takes out.
    """
    staying = frozenset(in_place) - frozenset(removing)
    originals: dict[Block, Original] = {}
    for block in blocks:
        if not records_edit(block.edit):
            continue
        record = _record(manifest, block)
        if record is not None and record.exact_when(staying):
            originals[block] = Original(record.text, record.digest)
    return originals


def _record(manifest: Manifest, block: Block) -> Replaced | None:
    """What the manifest recorded of the region the block's edit replaced."""
    return manifest.replaced.get(block.point.id, {}).get(edit_index(block.point, block.edit))


def before_apply(manifest: Manifest, blocks: Iterable[Block]) -> dict[Block, str]:
    """What the regions of the rewrites among `blocks` held before apply, as recorded (exact or
    not: a rebuilt statement takes its header from it where it still matches the anchor)."""
    found: dict[Block, str] = {}
    for block in blocks:
        if block.edit.kind is not EditKind.REWRITE:
            continue
        record = _record(manifest, block)
        if record is not None and record.text and not record.within:
            found[block] = record.text
    return found


@dataclass
class FileText:
    """One version of a file as the records need it: LibCST module, ast, recognised points."""

    module: cst.Module  # the whole module, or (with `mapping`) one with its indentation and line break
    tree: ast.Module
    locator: FileLocator
    code: str  # the module's text (known to the caller: printing a whole module again is costly)
    mapping: CstMap | None = None  # LibCST's statement of each ast statement (None: pair the module's)

    def __post_init__(self) -> None:
        self.lines = split_lines(self.code)
        self.pairs: CstMap = self.mapping if self.mapping is not None else pair(self.module, self.tree)

    def in_place(self, points: Iterable[Point]) -> frozenset[str]:
        return frozenset(p.id for p in points if self.locator.state(p).blocks)

    def block(self, point: Point, index: int) -> Block | None:
        """The point's block of edit `index`, found in this text."""
        edit = point.edits[index] if index < len(point.edits) else None
        return next((b for b in self.locator.state(point).blocks if b.edit is edit), None)

    def span(self, stmts: Sequence[ast.stmt], *, leading: bool = True) -> tuple[int, int]:
        return statements_span(self.pairs, self.module, stmts, leading=leading)

    def region_text(self, block: Block) -> str:
        """What a recognised rewrite or replace_expr block holds now (what its digest is of)."""
        if block.edit.kind is EditKind.REPLACE_EXPR:
            return expression_text(self.code, block.expr) if block.expr is not None else ""
        start, end = self.span(block.top)
        return "".join(self.lines[start:end])

    def points_within(self, points: Iterable[Point], start: int, end: int, but: str) -> tuple[str, ...]:
        """The points (other than `but`) with code on lines [start, end) (0-based) and nowhere else."""
        found = []
        for point in points:
            blocks = self.locator.state(point).blocks
            if point.id == but or not blocks:
                continue
            lines = [(s.lineno - 1, s.end_lineno or s.lineno) for b in blocks for s in b.top]
            if lines and all(start <= first and last <= end for first, last in lines):
                found.append(point.id)
        return tuple(sorted(found))

    def inside(self, block: Block, points: Iterable[Point]) -> tuple[str, ...]:
        if block.edit.kind is EditKind.REPLACE_EXPR:
            return ()
        start, end = self.span(block.top)
        return self.points_within(points, start, end, block.point.id)


def recorded(
    before: FileText,
    after: FileText,
    points: Sequence[Point],
    placed: Sequence[Placement],
    manifest: Manifest,
) -> dict[str, Replacements]:
    """The records after a run that turned `before` into `after`: new ones for the edits `placed`,
    and the records of the other points in place brought up to date (see `refreshed`)."""
    records: dict[str, Replacements] = {}
    for placement in placed:
        if not records_edit(placement.edit):
            continue
        record = _new_record(before, after, points, placement, placed)
        entry = records.setdefault(placement.point.id, {})
        if record is not None:
            entry[edit_index(placement.point, placement.edit)] = record
    placed_ids = {p.point.id for p in placed}
    kept = [p for p in points if p.id not in placed_ids]
    records.update(refreshed(before, after, kept, points, manifest))
    return records


def _new_record(
    before: FileText, after: FileText, points: Sequence[Point], placement: Placement, placed: Sequence[Placement]
) -> Replaced | None:
    block = after.block(placement.point, edit_index(placement.point, placement.edit))
    if block is None:
        return None
    produced = digest(after.region_text(block))
    inside = after.inside(block, points)
    if placement.edit.kind is EditKind.REPLACE_EXPR:
        if placement.expr is None:
            return None
        return Replaced(expression_text(before.code, placement.expr), produced, inside)
    bodies = placed_extents([placement], before.locator).get(
        (placement.point.id, edit_index(placement.point, placement.edit)), {}
    )
    # comments above the region stay where they are when an insert in front of it took them over
    taken = any(
        other.neighbor is placement.region[0] and not other.after and other.take_leading
        for other in placed
        if other is not placement and other.edit.kind.inserts
    )
    start, end = before.span(placement.region, leading=not taken)
    within = before.points_within(points, start, end, placement.point.id)
    return Replaced("".join(before.lines[start:end]), produced, inside, within, bodies)


def refreshed(
    before: FileText, after: FileText, kept: Iterable[Point], points: Sequence[Point], manifest: Manifest
) -> dict[str, Replacements]:
    """The records of points a run left in place, brought up to date where the run changed their
    region (another point's code put in or taken out): a record that matched before the run
    describes the region after it. One that did not match stays as it was (remove rebuilds);
    one whose original holds code of a point the run took out is dropped (but for where its
    captured bodies are, kept with a digest nothing matches). `points`: all of the file's."""
    updates: dict[str, Replacements] = {}
    after_in_place = after.in_place(points)
    for point in kept:
        records = manifest.replaced.get(point.id)
        if not records:
            continue
        fresh: Replacements = {}
        for index, record in records.items():
            old = before.block(point, index)
            new = after.block(point, index)
            if old is None or new is None or digest(before.region_text(old)) != record.digest:
                fresh[index] = record
                continue
            if not set(record.within) <= after_in_place:
                # its original holds code the run took out: never put back (no digest matches ""),
                # but where its bodies are stays known
                if record.bodies:
                    fresh[index] = replace(record, digest="", inside=after.inside(new, points))
                continue
            fresh[index] = replace(record, digest=digest(after.region_text(new)), inside=after.inside(new, points))
        if fresh != records:
            updates[point.id] = fresh
    return updates
