"""Matching a point's anchors: the scopes holding its statements, placing it there, anchors rewritten."""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from dataclasses import replace

from trace_instrument.engine.analysis import FileWork
from trace_instrument.engine.neighbours import first_line
from trace_instrument.engine.port.evidence import _Fit
from trace_instrument.locate import Placement
from trace_instrument.locate.match import Captures, Matcher
from trace_instrument.model import (
    Edit,
    EditKind,
    Point,
)
from trace_instrument.spec.code import DEFINITIONS, parse_pattern

# -- where a point fits --------------------------------------------------------------------------


def _fits(work: FileWork, point: Point, renames: dict[str, str]) -> list[_Fit]:
    """The innermost scopes where the point (its anchors' defs renamed as `renames` says) fits."""
    texts = tuple(_renamed_anchor(point, edit, renames) for edit in point.edits)
    moved = _with_anchors(point, texts)
    found: list[_Fit] = []
    for scope in sorted(_scopes_holding(work, moved)):
        placements = _placed_all(work, replace(moved, scope=scope))
        if placements is not None:
            note = ", ".join(f"{old} was renamed {new}" for old, new in renames.items()) if any(texts) else ""
            found.append(_Fit(scope, texts, placements, note))
    # a class fits wherever one of its methods does: the method is the place
    return [f for f in found if not any(o.scope.startswith(f.scope + ".") for o in found)]


def _scopes_holding(work: FileWork, point: Point) -> set[str]:
    """The scopes (and the scopes around them) holding every edit's first anchor statement."""
    index, recognition = work.locator.index, work.locator.recognition
    common: set[str] | None = None
    for edit in point.edits:
        scopes: set[str] = set()
        for anchor in edit.anchors:
            wanted = anchor.target.stmts[0]
            for site in index.sites:
                node = recognition.view(site.node)
                if type(node) is not type(wanted) or not Matcher().statement(wanted, node, Captures()):
                    continue
                scopes.update(_enclosing(site.scope))
                if isinstance(node, DEFINITIONS) and anchor.kind in (EditKind.BODY_START, EditKind.BODY_END):
                    scopes.add(node.name if site.scope == "<module>" else f"{site.scope}.{node.name}")
        common = scopes if common is None else common & scopes
    return common or set()


def _enclosing(scope: str) -> list[str]:
    """A scope and every scope around it (`A.b.c`: `A.b.c`, `A.b`, `A`, the module)."""
    if scope == "<module>":
        return ["<module>"]
    parts = scope.split(".")
    return [".".join(parts[:n]) for n in range(len(parts), 0, -1)] + ["<module>"]


def _fit_if_placed(
    work: FileWork, scope: str, moved: Point, texts: Sequence[str], insides: Sequence[str] = (), **evidence: str
) -> _Fit | None:
    """The fit of `moved` with these anchors (and `inside`s) in `scope`, when every edit then finds
    its place; `evidence` says how the anchors were found (a `_Fit` field)."""
    placements = _placed_all(work, _with_anchors(moved, texts, insides))
    if placements is None:
        return None
    return _Fit(scope, tuple(texts), placements, insides=tuple(insides), **evidence)  # type: ignore[arg-type]


def _placed_all(work: FileWork, point: Point) -> tuple[Placement, ...] | None:
    """Where each edit of the point goes, when every one finds its place (None otherwise)."""
    placed = [work.locator.place(point, edit, nearest=False) for edit in point.edits]
    placements = tuple(p for p in placed if isinstance(p, Placement))
    return placements if len(placements) == len(placed) else None


def _block_of(work: FileWork, placement: Placement) -> int:
    """The statement list an insert's neighbour or a rewrite's region is in (its id; 0: none)."""
    stmt = placement.neighbor if placement.neighbor is not None else next(iter(placement.region), None)
    return id(work.locator.index.site(stmt).siblings) if stmt is not None else 0


def _parsed(text: str) -> ast.stmt:
    return ast.parse(text).body[0]


def _places_at(work: FileWork, point: Point, node: ast.stmt, inside: str) -> bool:
    """Is the one-edit point, anchored at `node`'s header (inside `inside`, "" its own), placed at `node`?"""
    placements = _placed_all(work, _with_anchors(point, (_as_anchor(node),), (inside,)))
    return placements is not None and placements[0].neighbor is node


def _block_header(work: FileWork, node: ast.stmt) -> str:
    """The header of the block a statement is in, as an `inside` ("" at a def's top level)."""
    owner = work.locator.index.site(node).owner
    return _as_anchor(owner) if isinstance(owner, _BLOCKS) else ""


def _call_of(stmt: ast.stmt) -> ast.Call | None:
    """The call a statement makes whole (`f(x)`, `y = f(x)`), or None."""
    value = getattr(stmt, "value", None) if isinstance(stmt, (ast.Expr, ast.Assign)) else None
    return value if isinstance(value, ast.Call) else None


def _does(pattern: ast.stmt, stmt: ast.stmt) -> bool:
    """Does `stmt` call what `pattern` calls, or assign the names it assigns from a call?"""
    if _same_call([pattern], stmt):
        return True
    if not (isinstance(pattern, ast.Assign) and isinstance(stmt, ast.Assign) and _assigned(pattern)):
        return False
    return _assigned(pattern) == _assigned(stmt) and _twins(pattern, stmt)


def _twins(one: ast.stmt, other: ast.stmt) -> bool:
    """Do two statements assign the same names (or none) from calls of methods of the same name?"""
    calls = [_call_of(s) for s in (one, other)]
    names = [c.func.attr if c is not None and isinstance(c.func, ast.Attribute) else "" for c in calls]
    targets = [_assigned(s) if isinstance(s, ast.Assign) else () for s in (one, other)]
    same_targets = targets[0] == targets[1] and (
        bool(targets[0]) or isinstance(one, ast.Expr) == isinstance(other, ast.Expr)
    )
    return bool(names[0]) and names[0].lstrip("_") == names[1].lstrip("_") and same_targets


def _same_call(pattern: tuple[ast.stmt, ...] | list[ast.stmt], stmt: ast.stmt) -> bool:
    """Is `stmt` a call (or an assignment of one) of what the one-statement pattern calls?"""
    if len(pattern) != 1:
        return False
    calls = [getattr(s, "value", None) for s in (pattern[0], stmt)]
    return all(isinstance(c, ast.Call) for c in calls) and ast.dump(calls[0].func) == ast.dump(calls[1].func)  # type: ignore[union-attr]


def _as_anchor(stmt: ast.stmt) -> str:
    """A statement as an anchor text: a block by its header (`with x: ...`), a simple statement whole."""
    return first_line(stmt) + " ..." if isinstance(stmt, _BLOCKS) else ast.unparse(stmt)


_BLOCKS = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith)


def _assigned(node: ast.Assign) -> tuple[str, ...]:
    """The names an assignment binds, in order ("" for a target that is not a name: none then)."""
    names: list[str] = []
    for target in node.targets:
        for t in target.elts if isinstance(target, ast.Tuple) else [target]:
            if not isinstance(t, ast.Name):
                return ()
            names.append(t.id)
    return tuple(names)


_DEF_NAME = re.compile(r"^(\s*(?:async\s+)?(?:def|class)\s+)([A-Za-z_][A-Za-z0-9_]*)\b", re.MULTILINE)


def _renamed_anchor(point: Point, edit: Edit, renames: dict[str, str]) -> str:
    """The edit's first anchor with the defs it names renamed ("" when none is)."""
    if not renames:
        return ""
    anchor = edit.anchors[0]
    scope = renames.get(point.scope, point.scope)
    changed = False

    def rename(match: re.Match[str]) -> str:
        nonlocal changed
        name = match.group(2)
        for holder in (point.scope, scope):
            qualified = name if holder == "<module>" else f"{holder}.{name}"
            if qualified in renames:
                changed = True
                return match.group(1) + renames[qualified].rpartition(".")[2]
        return match.group(0)

    text = _DEF_NAME.sub(rename, anchor.target.text)
    return text if changed else ""


def _with_anchors(point: Point, texts: Sequence[str], insides: Sequence[str] = ()) -> Point:
    """The point with the first anchor of each edit whose text is given replaced by it (and, where
    an `inside` is given, inside that block); the edit's alternatives go (they were not what matched)."""
    insides = list(insides) or [""] * len(texts)
    if not any(texts) and not any(insides):
        return point
    edits = []
    for edit, text, inside in zip(point.edits, texts, insides):
        if not text and not inside:
            edits.append(edit)
            continue
        first = edit.anchors[0]
        anchor = replace(first, target=parse_pattern(text, first.source)) if text else first
        if inside:
            anchor = replace(anchor, inside=parse_pattern(inside, first.source))
        edits.append(replace(edit, anchors=(anchor,)))
    return replace(point, edits=tuple(edits))
