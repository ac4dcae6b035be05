"""The kinds of places a point fits when its statements are not there word for word (a structural
three-way merge: renames, conditions, counterparts, neighbours, branches, returns, headers)."""

from __future__ import annotations

import ast
import collections
import difflib
import re
from collections.abc import Iterable
from dataclasses import replace

from trace_instrument.engine.analysis import FileWork
from trace_instrument.engine.neighbours import first_line
from trace_instrument.engine.neighbours import shipped as shipped_neighbours
from trace_instrument.engine.port.decide import (
    _own_nodes,
)
from trace_instrument.engine.port.evidence import _Fit

# -- where a point fits --------------------------------------------------------------------------
from trace_instrument.engine.port.match import (
    _BLOCKS,
    _as_anchor,
    _assigned,
    _block_header,
    _block_of,
    _call_of,
    _does,
    _fit_if_placed,
    _parsed,
    _placed_all,
    _places_at,
    _same_call,
    _twins,
    _with_anchors,
)
from trace_instrument.locate import AnchorFailure, Placement
from trace_instrument.locate.align import aligned
from trace_instrument.locate.index import Site, header_only
from trace_instrument.model import (
    Anchor,
    CodePattern,
    Edit,
    EditKind,
    Point,
    Status,
)
from trace_instrument.spec.binding import names_read
from trace_instrument.spec.code import is_wild_body


def _beside_its_edits(work: FileWork, point: Point, scope: str) -> _Fit | None:
    """The point in `scope` (a class), each edit whose anchor matches in several of its methods
    anchored `inside` the method its nearest found edit is in (the one before it, else after),
    when it matches once there: the edits of a point go together."""
    moved = replace(point, scope=scope)
    found = [work.locator.place(moved, edit, nearest=False) for edit in moved.edits]
    if not any(not isinstance(f, Placement) and f.status is Status.AMBIGUOUS for f in found):
        return None
    insides: list[str] = []
    for number, (edit, place) in enumerate(zip(moved.edits, found)):
        if isinstance(place, Placement):
            insides.append("")
            continue
        if place.status is not Status.AMBIGUOUS or edit.anchors[0].inside is not None:
            return None
        before = [f for f in found[:number] if isinstance(f, Placement)]
        after = [f for f in found[number + 1 :] if isinstance(f, Placement)]
        neighbour = before[-1] if before else (after[0] if after else None)
        method = neighbour.scope_node if neighbour is not None else None
        if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)) or method.decorator_list:
            return None
        head = header_only(method)
        head.body = [ast.Expr(ast.Constant(...))]
        insides.append(ast.unparse(head))
    return _fit_if_placed(work, scope, moved, ("",) * len(moved.edits), insides)


def _aligned_fit(work: FileWork, point: Point, scope: str) -> _Fit | None:
    """The point in `scope`, each edit whose anchor is not found there anchored on the one run of
    statements that is its anchor but for names spelled otherwise (the fewest such names, when
    one run has fewer than every other); the spellings consistent across the edits."""
    moved = replace(point, scope=scope)
    texts: list[str] = []
    spelled: dict[str, str] = {}
    shown: collections.Counter[str] = collections.Counter()  # per name: how many anchor statements show it
    found_here = [work.locator.place(moved, edit, nearest=False) for edit in moved.edits]
    blocks = {_block_of(work, p) for p in found_here if isinstance(p, Placement)}
    for edit, found in zip(moved.edits, found_here):
        if isinstance(found, Placement):
            texts.append("")
            continue
        if found.status is not Status.ANCHOR_LOST:
            return None
        run = _aligned_run(work, scope, edit.anchors[0], blocks - {0})
        if run is None:
            return None
        text, mapping, counts = run
        if any(spelled.setdefault(name, code) != code for name, code in mapping.items()):
            return None  # one name spelled two ways: not a rename
        shown.update(counts)
        texts.append(text)
    if not spelled:
        return None
    placements = _placed_all(work, _with_anchors(moved, texts))
    if placements is None:
        return None
    read = {name for edit in point.edits for name in names_read(edit.template)}
    bindings = tuple((name, code) for name, code in sorted(spelled.items()) if name in read)
    return _Fit(
        scope,
        tuple(texts),
        placements,
        spelled=tuple(sorted(spelled.items())),
        bindings=bindings,
        confirmed=_confirmed(spelled, shown),
    )


def _inlined_fit(work: FileWork, point: Point, scope: str, moved: dict[str, str]) -> _Fit | None:
    """A point whose def is gone from the file (its class's, or the class its methods moved to, has none
    of its name) in the one method of that class holding its anchors' statements but for names spelled
    otherwise (`_aligned_fit`), the renames borne out: the def was inlined there (0.6 computes the
    reward in `_run_agent_loop`, `output` for 0.9.0's `_compute_score`'s `final_output`)."""
    owner, _, name = scope.rpartition(".")
    index = work.locator.index
    classes = [c for c in dict.fromkeys([owner, moved.get(owner, "")]) if c and index.scope_nodes(c)]
    methods = [
        f"{cls}.{node.name}"
        for cls in classes
        for holder in index.scope_nodes(cls)
        for node in getattr(holder, "body", [])
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]
    fits = [f for f in (_aligned_fit(work, point, m) for m in dict.fromkeys(methods)) if f is not None]
    if len(fits) != 1 or not fits[0].confirmed:
        return None
    where = " or ".join(f"{c}.{name}" for c in classes)
    return replace(fits[0], inlined=f"no {where} in this tree: it was inlined into {fits[0].scope}, alone of its class")


def _confirmed(spelled: dict[str, str], shown: collections.Counter[str]) -> bool:
    """Is every name spelled otherwise a rename the tree bears out, not another statement of the
    same shape (`metrics.update(critic_metrics)` for `metrics.update(actor_metrics)`)? Each old
    name has its own new spelling (two names read as one are two things), and each spelling says
    the name (`final_output` as `output`, `rollout_n` as `self.config...rollout.n`) or is shown by
    two statements of the point's anchors."""
    if len(set(spelled.values())) != len(spelled):
        return False
    return all(_says(name, code) or shown[name] >= 2 for name, code in spelled.items())


def _says(name: str, code: str) -> bool:
    """Does the code spell the name, letters alike, one ending the other (`rollout_n`,
    `...rollout.n`; `final_output`, `output`)?"""
    a, b = (re.sub(r"[^a-z0-9]", "", text.lower()) for text in (name, code))
    return bool(a and b) and (a.endswith(b) or b.endswith(a)) and min(len(a), len(b)) >= 4


def _aligned_run(
    work: FileWork, scope: str, anchor: Anchor, blocks: set[int]
) -> tuple[str, dict[str, str], collections.Counter[str]] | None:
    """The run of statements in the scope that is the anchor's with the fewest names spelled
    otherwise (as an anchor text, with the spellings); None unless exactly one has that few, or
    one of those few is in the block where the point's other edits are found (`blocks`: the ids
    of those statement lists): the edits of a point go together."""
    pattern = list(anchor.target.stmts)
    found: list[tuple[int, list[ast.stmt], dict[str, str], collections.Counter[str]]] = []
    for run in _runs_like(work, scope, pattern):
        mapping: dict[str, str] | None = {}
        counts: collections.Counter[str] = collections.Counter()  # per name: the statements showing it
        for want, got in zip(pattern, run):
            one = aligned(want, got)
            if one is None or mapping is None or any(mapping.setdefault(k, v) != v for k, v in one.items()):
                mapping = None
                break
            counts.update(one.keys())
        if mapping:
            found.append((len(mapping), run, mapping, counts))
    if not found:
        return None
    fewest = min(item[0] for item in found)
    best = [item for item in found if item[0] == fewest]
    if len(best) > 1:
        best = [item for item in best if id(work.locator.index.site(item[1][0]).siblings) in blocks]
    if len(best) != 1:
        return None
    _, run, mapping, counts = best[0]
    return "\n".join(_text(p, s) for p, s in zip(pattern, run)), mapping, counts


def _runs_like(work: FileWork, scope: str, pattern: list[ast.stmt]) -> Iterable[list[ast.stmt]]:
    """Every run of business statements in the scope with the pattern's kinds of statement."""
    skip = work.locator.recognition.instrumentation
    for node in work.locator.index.scope_nodes(scope):
        for _owner, _field, body in work.locator.index.bodies_in(node):
            business = [s for s in body if id(s) not in skip]
            for start in range(len(business) - len(pattern) + 1):
                run = business[start : start + len(pattern)]
                if all(type(p) is type(s) for p, s in zip(pattern, run)):
                    yield run


NEAR_ENOUGH = 0.6  # the least similarity (difflib's ratio of the statements' text) a guess may have

CLEAR_LEAD = 0.05  # by how much the nearest must beat the next to be the one


def _nearest_fit(work: FileWork, point: Point, scope: str) -> _Fit | None:
    """The point in `scope`, each edit whose anchor is not found there anchored on the statements
    most like its anchor's, when one run of statements is clearly the most like it (a guess)."""
    moved = replace(point, scope=scope)
    texts: list[str] = []
    notes: list[str] = []
    for edit in moved.edits:
        found = work.locator.place(moved, edit, nearest=False)
        if isinstance(found, Placement):
            texts.append("")
            continue
        if found.status is not Status.ANCHOR_LOST:
            return None  # ambiguous or crowded: a similar statement would not settle it
        near = _nearest_run(work, scope, edit.anchors[0])
        if near is None:
            return None
        text, ratio, line = near
        texts.append(text)
        notes.append(f"line {line} ({ratio:.0%} alike)")
    if not notes:
        return None
    return _fit_if_placed(work, scope, moved, texts, nearest=", ".join(notes))


def _nearest_run(work: FileWork, scope: str, anchor: Anchor) -> tuple[str, float, int] | None:
    """The run of statements in the scope most like the anchor's (the same kinds of statement,
    text alike), as an anchor text, with its similarity and line; None unless it is clearly first."""
    pattern = list(anchor.target.stmts)
    wanted = [_text(p, p) for p in pattern]
    scored: list[tuple[float, list[ast.stmt]]] = []
    for run in _runs_like(work, scope, pattern):
        ratios = [difflib.SequenceMatcher(None, w, _text(p, s)).ratio() for w, p, s in zip(wanted, pattern, run)]
        scored.append((sum(ratios) / len(ratios), run))
    scored.sort(key=lambda item: -item[0])
    if not scored or scored[0][0] < NEAR_ENOUGH:
        return None
    if len(scored) > 1 and scored[1][0] > scored[0][0] - CLEAR_LEAD:
        return None
    ratio, run = scored[0]
    return "\n".join(_text(p, s) for p, s in zip(pattern, run)), ratio, run[0].lineno


def _text(pattern: ast.stmt, stmt: ast.stmt) -> str:
    """A statement as an anchor writes it: a block whose pattern's body is `...` by its header."""
    if is_wild_body(getattr(pattern, "body", None)):
        head = header_only(stmt)
        head.body = [ast.Expr(ast.Constant(...))]  # type: ignore[attr-defined]  # a block (same type as the pattern)
        return ast.unparse(head)
    return ast.unparse(stmt)


def _renames(work: FileWork, points: list[Point], fits: dict[str, list[_Fit]]) -> dict[str, str]:
    """Defs the points show were renamed: a scope the file no longer has whose points all fit one
    scope with the same parent (`RayPPOTrainer.fit` -> `RayPPOTrainer.fit_loop`)."""
    renames: dict[str, str] = {}
    for old in dict.fromkeys(p.scope for p in points):
        if work.locator.index.scope_nodes(old):
            continue  # still there: its points' code moved, not the def
        new = {f.scope for p in points if p.scope == old for f in fits[p.id] if len(fits[p.id]) == 1}
        if len(new) == 1:
            (target,) = new
            if target.rpartition(".")[0] == old.rpartition(".")[0] and target != old:
                renames[old] = target
    return renames


def _without_validation(work: FileWork, point: Point, fits: list[_Fit]) -> list[_Fit]:
    """A sample-flow point's places but those in validation code, when it fits both kinds: the runtime
    silences every sample-flow trace a validation sample makes (flow.v0.validation-silence), so the
    training step is where it belongs. The tree says which code is validation: its own code marks the
    batch `validate` True. Fits of one kind only are kept as they are (a tie stays a tie)."""
    if point.facility != "sample_flow" or len(fits) < 2:
        return fits
    aside = tuple(f.scope for f in fits if _marks_validation(work, f.scope))
    kept = [f for f in fits if f.scope not in aside]
    if not aside or not kept:
        return fits
    return [replace(f, set_aside=aside) for f in kept]


def _marks_validation(work: FileWork, scope: str) -> bool:
    """Does the def's own code set a `validate` key, keyword or argument to True (`meta_info["validate"] = True`,
    `{"validate": True}`, `validate=True`, `assign(batch, "validate", True)`)?"""
    for scope_node in work.locator.index.scope_nodes(scope):
        for node in _own_nodes(scope_node):
            if (
                isinstance(node, ast.Assign)
                and _is_true(node.value)
                and any(isinstance(t, ast.Subscript) and _is_key(t.slice) for t in node.targets)
            ):
                return True
            if isinstance(node, ast.Dict) and any(
                k is not None and _is_key(k) and _is_true(v) for k, v in zip(node.keys, node.values)
            ):
                return True
            if isinstance(node, ast.keyword) and node.arg == "validate" and _is_true(node.value):
                return True
            if isinstance(node, ast.Call) and any(_is_key(a) and _is_true(b) for a, b in zip(node.args, node.args[1:])):
                return True
    return False


def _is_key(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value == "validate"


def _is_true(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def _condition_fit(work: FileWork, point: Point, scope: str) -> _Fit | None:
    """The point's anchors verbatim in `scope`, but an edit's enclosing `if` (its `inside`) gained
    conditions: the one `if` of the scope whose condition is the old one's conjuncts and more
    (`if self.val_reward_fn is not None and self.config.trainer.test_freq > 0 and (...)` for
    `if self.config.trainer.test_freq > 0 and (...)`) becomes the edit's `inside`."""
    nodes = work.locator.index.scope_nodes(scope)
    if len(nodes) != 1:
        return None
    ifs = [n for n in _own_nodes(nodes[0]) if isinstance(n, ast.If)]
    insides: list[str] = []
    gained: list[str] = []
    for edit in point.edits:
        inside = edit.anchors[0].inside
        old = inside.stmts[0] if inside is not None and len(inside.stmts) == 1 else None
        grown = [(n, more) for n in ifs if isinstance(old, ast.If) for more in [_gained(old.test, n.test)] if more]
        if len(grown) != 1:
            insides.append("")
            continue
        insides.append(f"if {ast.unparse(grown[0][0].test)}: ...")
        gained += grown[0][1]
    if not gained:
        return None
    texts = ("",) * len(point.edits)
    placements = _placed_all(work, replace(_with_anchors(point, texts, insides), scope=scope))
    if placements is None:
        return None
    return _Fit(scope, texts, placements, insides=tuple(insides), gained=" and ".join(gained))


def _counterpart_fit(work: FileWork, point: Point, scope: str) -> _Fit | None:
    """The point in `scope` with each edit whose anchor is not found anchored at the anchor's counterpart
    (`_counterparts`, of its statement or of its `inside` block): the one statement of the scope that does
    the anchor's work under another call or header, where no other could take the edit."""
    moved = replace(point, scope=scope)
    nodes = work.locator.index.scope_nodes(scope)
    if len(nodes) != 1:
        return None
    texts: list[str] = []
    insides: list[str] = []
    notes: list[str] = []
    for edit in moved.edits:
        if isinstance(work.locator.place(moved, edit, nearest=False), Placement):
            texts.append("")
            insides.append("")
            continue
        anchor = edit.anchors[0]
        # an assignment's counterpart needs the edit's block as evidence too (the same timer): alone, a statement
        # assigning the same names is only like the anchor (a guess, `_nearest_fit`)
        boxed = anchor.inside is not None or not all(isinstance(t, ast.Assign) for t in anchor.target.stmts)
        targets = [("", "")] + (_counterpart_texts(anchor.target.stmts, nodes[0]) if boxed else [])
        around = [("", "")] + (_counterpart_texts(anchor.inside.stmts, nodes[0]) if anchor.inside is not None else [])
        placed = []
        for (text, note), (inside, note_inside) in ((t, i) for t in targets for i in around if t[0] or i[0]):
            single = replace(moved, edits=(edit,))
            if _placed_all(work, _with_anchors(single, (text,), (inside,))) is not None:
                placed.append((text, inside, "; ".join(n for n in (note, note_inside) if n)))
        if len(placed) != 1:
            return None
        texts.append(placed[0][0])
        insides.append(placed[0][1])
        notes.append(placed[0][2])
    if not notes:
        return None
    return _fit_if_placed(work, scope, moved, texts, insides, counterpart="; ".join(notes))


def _new_attribute(work: FileWork, point: Point, scope: str) -> str:
    """The attribute a point sets when its place in `scope`, an `__init__`, does not matter: its one edit's code
    only assigns `self.<name>` that nothing in the file names, from names that are not the def's ("" else)."""
    nodes = work.locator.index.scope_nodes(scope)
    if not scope.endswith(".__init__") or len(point.edits) != 1 or len(nodes) != 1:
        return ""
    stmts = point.edits[0].template.stmts
    if len(stmts) != 1 or not isinstance(stmts[0], ast.Assign) or len(stmts[0].targets) != 1:
        return ""
    target = stmts[0].targets[0]
    if not (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self"):
        return ""
    own = {a.arg for a in ast.walk(nodes[0]) if isinstance(a, ast.arg)}
    own |= {n.id for n in _own_nodes(nodes[0]) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    read = {n.id for n in ast.walk(stmts[0].value) if isinstance(n, ast.Name)}
    named = any(isinstance(n, ast.Attribute) and n.attr == target.attr for n in ast.walk(work.locator.index.tree))
    return "" if named or read & own else f"self.{target.attr}"


def _top_level(work: FileWork, fit: _Fit, scope: str) -> bool:
    """Are the fit's edits next to statements of the def's own body, not in a block inside it?"""
    (node,) = work.locator.index.scope_nodes(scope)
    neighbours = [p.neighbor for p in fit.placements]
    return all(n is not None and work.locator.index.site(n).owner is node for n in neighbours)


def _at_the_end(work: FileWork, point: Point, scope: str, attribute: str) -> _Fit | None:
    """The point after the last statement of the def's body (none like its anchor: any is as good)."""
    (node,) = work.locator.index.scope_nodes(scope)
    body = getattr(node, "body", [])
    last = body[-1] if body else None
    if last is None or isinstance(last, (ast.Return, ast.Raise, *_BLOCKS)):
        return None
    text = ast.unparse(last)
    placements = _placed_all(work, _with_anchors(replace(point, scope=scope), (text,)))
    return _Fit(scope, (text,), placements, free=attribute) if placements is not None else None


def _neighbour_fit(work: FileWork, point: Point, scope: str) -> _Fit | None:
    """The point in `scope` with each edit whose anchor is not found placed by the anchor's neighbours in
    the validated release (neighbours.json), as a three-way merge places it: the statements before and
    after the anchor are still together (the anchor's statements deleted: the edit goes after the one
    before, or before the one after), or with one statement between them that calls what the anchor
    called (the anchor replaced: that statement is the new anchor). The neighbours must be found together
    once, or once in or beside the block of the point's other edits (its edits go together)."""
    known = shipped_neighbours().get(point.id)
    nodes = work.locator.index.scope_nodes(scope)
    if known is None or len(known) != len(point.edits) or len(nodes) != 1:
        return None
    moved = replace(point, scope=scope)
    sites = list(work.locator.index.sites_in(nodes[0]))
    placed = [work.locator.place(moved, edit, nearest=False) for edit in moved.edits]
    options = [
        [] if isinstance(p, Placement) or not (b and a) else _between(sites, b, a, e.anchors[0])
        for e, p, (b, a) in zip(moved.edits, placed, known)
    ]
    near = [p.neighbor for p in placed if isinstance(p, Placement) and p.neighbor is not None]
    near += [o[0][2] for o in options if len(o) == 1]
    texts: list[str] = []
    notes: list[str] = []
    for place, found in zip(placed, options):
        if isinstance(place, Placement):
            texts.append("")
            continue
        if len(found) > 1:
            found = [f for f in found if _beside(work, f[2], near)]
        if len(found) != 1:
            return None
        texts.append(found[0][0])
        notes.append(found[0][1])
    if not notes:
        return None
    return _fit_if_placed(work, scope, moved, texts, between="; ".join(notes))


def _branch_fit(work: FileWork, point: Point, scope: str) -> _Fit | None:
    """The point in `scope` with each edit whose anchor's work this tree does in both branches of an
    `if`/`else` (`_branches`: verl 0.6's `if not self.async_rollout_mode:` calling `generate_sequences` of
    the worker group or of the rollout manager, where 0.9.0 calls the manager's alone) anchored at that
    `if`; an edit whose anchor followed (or preceded) such an anchor in the validated release, and is
    gone, goes after (or before) the `if` too; the point's other edits as `_neighbour_fit` places them.
    Several such `if`s: the one in or beside the block of the point's other edits."""
    nodes = work.locator.index.scope_nodes(scope)
    known = shipped_neighbours().get(point.id)
    if len(nodes) != 1:
        return None
    moved = replace(point, scope=scope)
    own = [n for n in _own_nodes(nodes[0]) if isinstance(n, ast.stmt)]
    placed = [work.locator.place(moved, edit, nearest=False) for edit in moved.edits]
    near = [p.neighbor for p in placed if isinstance(p, Placement) and p.neighbor is not None]
    near += _neighbour_guides(work, moved, nodes[0])
    texts = [""] * len(moved.edits)
    insides = [""] * len(moved.edits)
    notes: list[str] = []
    branched: dict[str, tuple[str, str]] = {}  # an edit's old anchor statement -> the `if` doing its work, its block
    retimed: list[tuple[str, str]] = []
    for index, (edit, place) in enumerate(zip(moved.edits, placed)):
        if isinstance(place, Placement) or len(edit.anchors[0].target.stmts) != 1:
            continue
        found = _branch_of(work, moved, edit, own, near)
        if found is not None:
            node, note, inside, timer = found
            texts[index], insides[index] = _as_anchor(node), inside
            notes.append(note)
            branched[first_line(edit.anchors[0].target.stmts[0])] = (texts[index], inside)
            retimed += [timer] if timer is not None else []
    if not notes:
        return None
    notes += _next_to_branches(moved, placed, known, branched, texts, insides)
    branch = _with_anchors(moved, texts, insides)
    placements = _placed_all(work, branch)
    timers = tuple(dict.fromkeys(retimed))
    if placements is not None:
        note = "; ".join(notes)
        return _Fit(scope, tuple(texts), placements, insides=tuple(insides), counterpart=note, retimed=timers)
    rest = _neighbour_fit(work, branch, scope)
    if rest is None:
        return None
    merged = tuple(new or ours for new, ours in zip(rest.anchors, texts))
    between = f"{rest.between}; " + "; ".join(notes)
    return replace(rest, anchors=merged, insides=tuple(insides), between=between, retimed=timers)


def _branch_of(
    work: FileWork, moved: Point, edit: Edit, own: list[ast.stmt], near: list[ast.stmt]
) -> tuple[ast.stmt, str, str, tuple[str, str] | None] | None:
    """The one `if` of the scope doing an edit's anchor's work in both branches (`_branches`): the
    `if`, what it does, the block it is told by, and the timer around it named otherwise (old, new)."""
    found: list[tuple[ast.stmt, str, str, tuple[str, str] | None]] = []
    single = replace(moved, edits=(edit,))
    for node, note in _branches(edit.anchors[0].target.stmts[0], own):
        # an `if` is told from others with its header by the block it is in (the edit's own, when it has one)
        inside = _block_header(work, node) if edit.anchors[0].inside is None else ""
        if _places_at(work, single, node, inside):
            found.append((node, note, inside, None))
            continue
        # its block a timer named otherwise (0.6.0's `marked_timer("ref", ...)` for `str(Role.RefPolicy)`)
        timer = _retimed(work, node, edit.anchors[0].inside)
        if timer and _places_at(work, single, node, timer):
            old = edit.anchors[0].inside.text.strip()  # type: ignore[union-attr]
            note = f"{note}, in `{first_line(_parsed(timer))}`, the timer `{old}` named so here"
            found.append((node, note, timer, (old, timer)))
    if len(found) > 1:
        # the one beside the point's other edits, or in the block their anchors are inside
        blocks = [e.anchors[0].inside.text for e in moved.edits if e is not edit and e.anchors[0].inside]
        found = [
            f for f in found if _beside(work, f[0], near) or any(_places_at(work, single, f[0], b) for b in blocks)
        ]
    return found[0] if len(found) == 1 else None


def _next_to_branches(
    moved: Point,
    placed: list[Placement | AnchorFailure],
    known: list[tuple[str, str]] | None,
    branched: dict[str, tuple[str, str]],
    texts: list[str],
    insides: list[str],
) -> list[str]:
    """Each edit whose anchor is gone and was next to a branched anchor in the validated release
    goes next to that `if` too (`texts` and `insides` set in place); what was done, as notes."""
    notes = []
    for index, edit in enumerate(moved.edits):
        before, after = known[index] if known is not None and len(known) == len(moved.edits) else ("", "")
        kind = edit.anchors[0].kind
        follows = branched.get(before) if kind is EditKind.AFTER else None
        precedes = branched.get(after) if kind is EditKind.BEFORE else None
        next_to = follows or precedes
        if not texts[index] and not isinstance(placed[index], Placement) and next_to is not None:
            texts[index] = next_to[0]
            insides[index] = next_to[1] if edit.anchors[0].inside is None else ""
            notes.append(f"edit {index + 1}'s statements, next to that anchor in the validated release, are gone")
    return notes


def _retimed_fit(work: FileWork, point: Point, scope: str, timers: dict[str, tuple[str, str]]) -> _Fit | None:
    """The point in `scope` with each anchor or `inside` that is a timer another point of the scope showed
    named otherwise here (`timers`: old header -> (new header, the point that showed it)) renamed so."""
    if not timers or len(work.locator.index.scope_nodes(scope)) != 1:
        return None
    moved = replace(point, scope=scope)
    texts: list[str] = []
    insides: list[str] = []
    shown: list[str] = []
    for edit in moved.edits:
        anchor = edit.anchors[0]
        target = timers.get(anchor.target.text.strip())
        inside = timers.get(anchor.inside.text.strip()) if anchor.inside is not None else None
        texts.append(target[0] if target else "")
        insides.append(inside[0] if inside else "")
        shown += [
            f"`{anchor.target.text.strip()}` is `{first_line(_parsed(t[0]))}` here, as {t[1]} shows"
            for t in (target, inside)
            if t
        ]
    if not shown:
        return None
    placements = _placed_all(work, _with_anchors(moved, texts, insides))
    if placements is None:
        return None
    note = "its timer named otherwise: " + "; ".join(dict.fromkeys(shown))
    return _Fit(scope, tuple(texts), placements, insides=tuple(insides), counterpart=note)


def _retimed(work: FileWork, node: ast.stmt, inside: CodePattern | None) -> str:
    """The header of the `with` block holding `node` when it calls what the edit's `inside` block (a
    `with` of one call) calls, with other arguments: the same timer named otherwise ("" else)."""
    pattern = inside.stmts[0] if inside is not None and len(inside.stmts) == 1 else None
    owner = work.locator.index.site(node).owner
    if not (isinstance(pattern, ast.With) and isinstance(owner, ast.With) and owner.items and pattern.items):
        return ""
    ours, theirs = pattern.items[0].context_expr, owner.items[0].context_expr
    if not (isinstance(ours, ast.Call) and isinstance(theirs, ast.Call)):
        return ""
    return _as_anchor(owner) if ast.dump(ours.func) == ast.dump(theirs.func) else ""


def _return_fit(work: FileWork, point: Point, scope: str) -> _Fit | None:
    """The point in `scope` with each edit anchored before its def's return that is not found (0.9.0's
    `return await self._agent_loop_postprocess(...)`) before the one `return` of the def here (0.6's
    `_run_agent_loop` post-processes inline and returns `_InternalAgentLoopOutput(...)`): where the def
    returns is what such an anchor marks."""
    nodes = work.locator.index.scope_nodes(scope)
    if len(nodes) != 1:
        return None
    returns = [n for n in _own_nodes(nodes[0]) if isinstance(n, ast.Return)]
    moved = replace(point, scope=scope)
    texts: list[str] = []
    for edit in moved.edits:
        anchor = edit.anchors[0]
        if isinstance(work.locator.place(moved, edit, nearest=False), Placement):
            texts.append("")
        elif anchor.kind is EditKind.BEFORE and [type(s) for s in anchor.target.stmts] == [ast.Return]:
            if len(returns) != 1:
                return None
            texts.append(_return_text(returns[0]))
        else:
            return None
    if not any(texts):
        return None
    placements = _placed_all(work, _with_anchors(moved, texts))
    if placements is None:
        return None
    note = f"its anchor was {scope}'s return; {scope} returns once here, `{_return_text(returns[0])}`"
    return _Fit(scope, tuple(texts), placements, counterpart=note)


def _return_text(node: ast.Return) -> str:
    """A return as an anchor: a call's arguments as `...` (`return _InternalAgentLoopOutput(...)`)."""
    value = node.value
    if isinstance(value, ast.Call):
        return f"return {ast.unparse(value.func)}(...)"
    return ast.unparse(node)


def _branches(pattern: ast.stmt, own: list[ast.stmt]) -> list[tuple[ast.If, str]]:
    """The `if`/`else` statements of a def's own code whose two branches each do what `pattern` (a call, or
    an assignment of one) does: one branch holds one statement calling what it calls, or assigning its
    names from a call, and the other one statement assigning the same names from a call of a method of
    the same name (`self.actor_rollout_wg.generate_sequences` and `self.async_rollout_manager.generate_sequences`)."""
    found = []
    for node in own:
        if not isinstance(node, ast.If) or not node.orelse:
            continue
        sides = [[s for s in block if _call_of(s) is not None] for block in (node.body, node.orelse)]
        if any(len(side) != 1 for side in sides):
            continue
        (one,), (other,) = sides
        if not any(_does(pattern, s) for s in (one, other)) or not _twins(one, other):
            continue
        calls = " and ".join(f"`{ast.unparse(_call_of(s).func)}`" for s in (one, other))  # type: ignore[union-attr]
        note = f"`if {ast.unparse(node.test)}:` does its work in both branches ({calls})"
        found.append((node, note))
    return found


def _neighbour_guides(work: FileWork, point: Point, scope_node: ast.AST) -> list[ast.stmt]:
    """The statements the validated release's neighbours put the point's edits at, where one place each."""
    known = shipped_neighbours().get(point.id)
    if known is None or len(known) != len(point.edits):
        return []
    sites = list(work.locator.index.sites_in(scope_node))
    found = [_between(sites, b, a, e.anchors[0]) for e, (b, a) in zip(point.edits, known) if b and a]
    return [f[0][2] for f in found if len(f) == 1]


def _beside(work: FileWork, stmt: ast.stmt, others: list[ast.stmt]) -> bool:
    """Is the statement in the block of one of `others`, or inside one of them?"""
    site = work.locator.index.site(stmt)
    return any(o in site.siblings or o in site.ancestors for o in others if o is not stmt)


def _between(sites: list[Site], before: str, after: str, anchor: Anchor) -> list[tuple[str, str, ast.stmt]]:
    """Where an edit whose anchor was between `before` and `after` may go: the new anchor text, why, and
    the statement it names; where the two are together, or one statement calling what the anchor called
    apart."""
    found = []
    for site in (s for s in sites if first_line(s.node) == before):
        rest = site.siblings[site.index + 1 : site.index + 3]
        gone = f"its statements are gone from between `{before}` and `{after}`"
        if rest and first_line(rest[0]) == after and anchor.kind in (EditKind.AFTER, EditKind.BEFORE):
            node = site.node if anchor.kind is EditKind.AFTER else rest[0]
            found.append((_as_anchor(node), gone, node))
        elif len(rest) == 2 and first_line(rest[1]) == after and _same_call(anchor.target.stmts, rest[0]):
            why = f"`{first_line(rest[0])}` replaced it between `{before}` and `{after}`"
            found.append((_as_anchor(rest[0]), why, rest[0]))
    if found or anchor.kind not in (EditKind.AFTER, EditKind.BEFORE):
        return found
    # the statement before it calling what `before` called, otherwise (45632b5fa's replay-buffer sample without
    # `off_policy_metrics`), right before `after`: the anchor's statements went with what it read
    try:
        was = ast.parse(before).body
    except SyntaxError:
        return found
    for site in sites:
        rest = site.siblings[site.index + 1 : site.index + 2]
        if rest and first_line(rest[0]) == after and _same_call(was, site.node):
            node = site.node if anchor.kind is EditKind.AFTER else rest[0]
            why = f"its statements are gone from after `{first_line(site.node)}` (for `{before}`), before `{after}`"
            found.append((_as_anchor(node), why, node))
    return found


def _counterpart_texts(stmts: tuple[ast.stmt, ...] | list[ast.stmt], scope_node: ast.AST) -> list[tuple[str, str]]:
    """A one-statement pattern's counterparts in the def, as anchor texts, with what differs."""
    if len(stmts) != 1:
        return []
    return [
        (_header_pattern(stmt) if isinstance(stmt, ast.For) else ast.unparse(stmt), note)
        for stmt, note in _counterparts(stmts[0], scope_node)
    ]


def _counterparts(pattern: ast.stmt, scope_node: ast.AST) -> list[tuple[ast.stmt, str]]:
    """The statements of a def's own code that do what `pattern` does otherwise, with what differs: an
    assignment to the same names (all of them, or, when none does, some and no others) from another call
    (`old_log_prob = self.actor_rollout_wg.compute_log_prob(batch)` for `old_log_prob, old_log_prob_mfu =
    self._compute_old_log_prob(batch)`); a loop over the same call with arguments dropped or added
    (`for epoch in range(self.config.trainer.total_epochs)` for `range(current_epoch, ...)`)."""
    own = [n for n in _own_nodes(scope_node) if isinstance(n, ast.stmt)]
    if isinstance(pattern, ast.Assign) and isinstance(pattern.value, ast.Call):
        ours = _assigned(pattern)
        calls = [(n, n.value) for n in own if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)]
        same = [(n, c) for n, c in calls if _assigned(n) and _assigned(n) == ours]
        some = [(n, c) for n, c in calls if _assigned(n) and set(_assigned(n)) ^ set(ours) and _nested(n, ours)]
        old = ast.unparse(pattern.value.func)
        return [(n, f"`{ast.unparse(c.func)}` does `{old}`'s work") for n, c in same or some]
    if isinstance(pattern, ast.For) and isinstance(pattern.iter, ast.Call):
        found: list[tuple[ast.stmt, str]] = []
        for n in own:
            if (
                isinstance(n, ast.For)
                and ast.dump(n.target) == ast.dump(pattern.target)
                and isinstance(n.iter, ast.Call)
            ):
                ours_args = {ast.dump(a) for a in pattern.iter.args if not _is_ellipsis(a)}
                theirs = {ast.dump(a) for a in n.iter.args}
                same_call = ast.dump(n.iter.func) == ast.dump(pattern.iter.func)
                if same_call and theirs != ours_args and (theirs < ours_args or ours_args < theirs):
                    found.append((n, f"the loop's header is `{_header_pattern(n)[:-5]}`"))
        return found
    return []


def _nested(node: ast.Assign, names: tuple[str, ...]) -> bool:
    """Are the names the assignment binds all of `names` or among them, or `names` among its?"""
    theirs = set(_assigned(node))
    return theirs < set(names) or set(names) < theirs


def _is_ellipsis(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is Ellipsis


def _header_pattern(node: ast.For) -> str:
    """A loop's header as an anchor (its body any): `for x in y: ...`."""
    return f"for {ast.unparse(node.target)} in {ast.unparse(node.iter)}: ..."


def _gained(old: ast.expr, new: ast.expr) -> list[str]:
    """The conjuncts `new` adds to `old` when it has every one of old's (a `(...)` of old's stands for
    one of new's), in their order; [] when it does not, or adds none."""
    theirs = new.values if isinstance(new, ast.BoolOp) and isinstance(new.op, ast.And) else [new]
    ours = old.values if isinstance(old, ast.BoolOp) and isinstance(old.op, ast.And) else [old]
    wild = sum(1 for v in ours if isinstance(v, ast.Constant) and v.value is Ellipsis)
    kept = [ast.dump(v) for v in ours if not (isinstance(v, ast.Constant) and v.value is Ellipsis)]
    dumps = [ast.dump(v) for v in theirs]
    if any(dumps.count(k) < kept.count(k) for k in kept):
        return []
    rest = [v for v, d in zip(theirs, dumps) if d not in kept]
    if len(rest) <= wild:
        return []
    # the wildcards stand for the last of the rest (the catalog writes `(...)` for a trailing clause)
    return [ast.unparse(v) for v in rest[: len(rest) - wild]]


def _header_fit(work: FileWork, point: Point, new_scope: str) -> _Fit | None:
    """A point anchored at its own def's header (`body_start: def _step_once(self, metrics, ...): ...`)
    in the def its scope's other points show it was renamed (`new_scope`), when the header's
    parameters bear the rename out: the parameters the two headers share, and all of one's are the
    other's (a parameter dropped or added, none renamed). The new anchor is the header as this tree
    writes it."""
    nodes = work.locator.index.scope_nodes(new_scope)
    if len(nodes) != 1 or not isinstance(nodes[0], (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    new = nodes[0]
    old_name = point.scope.rpartition(".")[2]
    texts = []
    for edit in point.edits:
        stmts = edit.anchors[0].target.stmts
        old = stmts[0] if len(stmts) == 1 else None
        if not isinstance(old, (ast.FunctionDef, ast.AsyncFunctionDef)) or old.name != old_name:
            return None
        kept, theirs = _parameters(old), _parameters(new)
        shared = [name for name in theirs if name in kept]
        if not shared or not (set(theirs) <= set(kept) or set(kept) <= set(theirs)):
            return None
        texts.append(_header_text(new))
    placements = _placed_all(work, replace(_with_anchors(point, texts), scope=new_scope))
    if placements is None:
        return None
    note = f"{point.scope} was renamed {new_scope}, its header's parameters {', '.join(shared)} kept"
    return _Fit(new_scope, tuple(texts), placements, renamed=note)


def _parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """A def's parameter names but the bound first one (self, cls)."""
    args = node.args
    names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
    names += [f"*{a.arg}" for a in (args.vararg, args.kwarg) if a is not None]
    return names[1:] if names and names[0] in ("self", "cls") else names


def _header_text(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """A def's header as an anchor: its name and parameters, without annotations (as the catalog writes one)."""
    copy = ast.parse(f"def _({ast.unparse(node.args)}): ...").body[0]
    assert isinstance(copy, ast.FunctionDef)
    args = copy.args
    for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg):
        if arg is not None:
            arg.annotation = None
    prefix = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
    return f"{prefix} {node.name}({ast.unparse(args)}): ..."
