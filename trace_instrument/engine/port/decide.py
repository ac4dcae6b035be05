"""Deciding between places and grading them (exact, likely, guess); names the tree spells otherwise."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import replace

from trace_instrument.engine.analysis import FileWork
from trace_instrument.engine.port.evidence import _Fit, _Spellings
from trace_instrument.locate.align import pure_read, repeatable
from trace_instrument.model import (
    Confidence,
    Point,
    PointResult,
    PortStatus,
    PortSuggestion,
    Reason,
    Status,
)

# -- deciding --------------------------------------------------------------------------------------


def _consensus(points: list[Point], fits: dict[str, list[_Fit]]) -> dict[str, str | None]:
    """Per old scope: the one new scope its points that fit one place agree on (None: they disagree)."""
    agreed: dict[str, set[str]] = {}
    for point in points:
        if len(fits[point.id]) == 1:
            agreed.setdefault(point.scope, set()).add(fits[point.id][0].scope)
    return {old: next(iter(new)) if len(new) == 1 else None for old, new in agreed.items()}


def _moved_scopes(work: FileWork, consensus: dict[str, str | None]) -> dict[str, str]:
    """Where each scope the file no longer has went, as its points that fit show; and, for a method
    that went to the same-named method of another class (`AgentLoopWorker._run_agent_loop` ->
    `AgentLoopWorkerBase._run_agent_loop`), the other methods of its old class, to the same-named
    methods of the new one when it has them and the old class no longer does: the class was
    renamed, or its methods moved into a base class together."""
    index = work.locator.index
    moved = {old: new for old, new in consensus.items() if new and new != old and not index.scope_nodes(old)}
    classes: dict[str, set[str]] = {}
    for old, new in moved.items():
        (old_class, _, method), (new_class, _, new_method) = old.rpartition("."), new.rpartition(".")
        if old_class and new_class and method == new_method:
            classes.setdefault(old_class, set()).add(new_class)
    return {**{c: next(iter(n)) for c, n in classes.items() if len(n) == 1}, **moved}


def _in_moved_class(scope: str, moved: dict[str, str], work: FileWork) -> str:
    """The scope in the class its own class moved to (`moved` maps classes too), when that exists."""
    owner, _, name = scope.rpartition(".")
    index = work.locator.index
    target = f"{moved[owner]}.{name}" if owner in moved and not index.scope_nodes(scope) else ""
    return target if target and index.scope_nodes(target) else ""


def _kept_scope(work: FileWork, scope: str) -> str:
    """What the point's old scope is, when the file still has it: "class", "def" ("" when gone)."""
    nodes = work.locator.index.scope_nodes(scope)
    if not nodes:
        return ""
    return "class" if all(isinstance(n, ast.ClassDef) for n in nodes) else "def"


def _decide(
    point: Point, result: PointResult, fits: list[_Fit], consensus: str | None, scope_kept: str
) -> PortSuggestion:
    """The suggestion for one point from the places it fits (`consensus`: where the other lost
    points of its scope agree to go; `scope_kept`: what its old scope is, when still in the file)."""
    if not fits:
        return _not_found(point, result, "")
    if len(fits) > 1:
        return _among_several(point, fits, consensus)
    return _by_evidence(point, fits[0], consensus, scope_kept)


def _among_several(point: Point, fits: list[_Fit], consensus: str | None) -> PortSuggestion:
    """A point that fits several places: where the other lost points of its scope went, else a tie."""
    scopes = [f.scope for f in fits]
    chosen = next((f for f in fits if f.scope == consensus), None)
    if chosen is None:
        return PortSuggestion(
            point.id,
            point.file,
            PortStatus.TIE,
            point.scope,
            runners_up=tuple(scopes),
            message=f"fits {len(fits)} places equally ({', '.join(scopes)}); nothing tells them apart",
        )
    others = tuple(s for s in scopes if s != chosen.scope)
    evidence = f"fits {len(fits)} places; the other lost points of {point.scope} moved to {chosen.scope}"
    return _ported(point, chosen, Confidence.LIKELY, evidence, others)


def _by_evidence(point: Point, fit: _Fit, consensus: str | None, scope_kept: str) -> PortSuggestion:
    """A point that fits one place, graded by the evidence the fit carries."""
    if fit.free:
        evidence = (
            f"its code only sets {fit.free}, which nothing else names, from names {fit.scope} does not define:"
            f" anywhere in {fit.scope}'s body is its place"
            + (f"; the statements most like its anchor: {fit.nearest}" if fit.nearest else "")
        )
        return _ported(point, fit, Confidence.LIKELY, evidence, ())
    if fit.between:
        evidence = f"placed by its anchors' neighbours in the validated release, in {fit.scope}: {fit.between}"
        return _ported(point, fit, Confidence.LIKELY, evidence, ())
    if fit.counterpart:
        evidence = f"its anchors' work, found in {fit.scope} alone: {fit.counterpart}"
        return _ported(point, fit, Confidence.LIKELY, evidence, ())
    if fit.gained:
        evidence = f"its anchors' statements, found in {fit.scope}, whose enclosing `if` gained `{fit.gained} and`"
        return _ported(point, fit, Confidence.LIKELY, evidence, ())
    if fit.set_aside:
        aside = ", ".join(fit.set_aside)
        evidence = (
            f"fits {fit.scope} and {aside}, which marks its batch as validation (`validate` True): the runtime"
            f" silences a validation sample's traces, so the training step {fit.scope} is the place"
        )
        return _ported(point, fit, Confidence.LIKELY, evidence, fit.set_aside)
    if fit.insides:
        methods = ", ".join(inside.split("(")[0].split()[-1] for inside in fit.insides if inside)
        evidence = f"its anchor matches in several methods of {fit.scope}; its other edits are found in {methods}"
        # a guess: a method that gained a statement like the edit's anchor takes it as readily
        return _ported(point, fit, Confidence.GUESS, evidence, ())
    return _by_likeness(point, fit, consensus, scope_kept)


def _by_likeness(point: Point, fit: _Fit, consensus: str | None, scope_kept: str) -> PortSuggestion:
    """A point whose one place has its anchors' statements, verbatim, renamed or alike."""
    if fit.spelled:
        again = next(((name, code) for name, code in fit.bindings if not repeatable(code)), None)
        if again is not None:
            return _not_repeatable(point, fit, *again)
        spellings = ", ".join(f"{name} as `{code}`" for name, code in fit.spelled)
        evidence = f"its anchors' statements, found in {fit.scope} with {spellings}"
        sure = (fit.scope == point.scope or bool(fit.inlined)) and fit.confirmed
        sure = sure and all(pure_read(code) for _, code in fit.bindings)
        evidence += f"; {fit.inlined}" if fit.inlined else ""
        return _ported(point, fit, Confidence.LIKELY if sure else Confidence.GUESS, evidence, ())
    if fit.nearest:
        evidence = f"not found word for word; the nearest statements in {fit.scope}: {fit.nearest}"
        return _ported(point, fit, Confidence.GUESS, evidence, ())
    if fit.renamed:
        evidence = f"its anchor names a def that moved ({fit.renamed}: that def's points fit there alone)"
        return _ported(point, fit, Confidence.LIKELY, evidence + f"; renamed so, it fits {fit.scope} alone", ())
    where = f"its anchors' statements, found verbatim in {fit.scope} alone"
    if consensus is None:
        evidence = f"{where}; the other lost points of {point.scope} went elsewhere"
        return _ported(point, fit, Confidence.LIKELY, evidence, ())
    if fit.scope != point.scope and scope_kept:
        # its scope is still here: the code moved out of it, and where the point belongs is a choice;
        # a class that stays keeps what is inserted into it (a method moved to a mixin takes no more)
        evidence = f"{where}; {point.scope} is still in the file (the code moved out of it)"
        confidence = Confidence.GUESS if scope_kept == "class" else Confidence.LIKELY
        return _ported(point, fit, confidence, evidence, ())
    return _ported(point, fit, Confidence.EXACT, f"{where}, where the other lost points of its scope went", ())


def _ported(point: Point, fit: _Fit, confidence: Confidence, evidence: str, others: tuple[str, ...]) -> PortSuggestion:
    line = min(p.line for p in fit.placements)
    return PortSuggestion(
        point.id,
        point.file,
        PortStatus.PORTED,
        point.scope,
        fit.scope,
        fit.anchors,
        confidence,
        line,
        evidence,
        others,
        bindings=fit.bindings,
        insides=fit.insides,
    )


def _not_repeatable(point: Point, fit: _Fit, name: str, code: str) -> PortSuggestion:
    """A fit whose code would read `name` as code that does verl's work again (a call)."""
    why = f"its code reads {name!r}, which this tree computes as `{code}`: read again, that code would run twice"
    message = f"{why}; no name there holds its value: nothing to bind (for a person: a local assigned once)"
    line = min(p.line for p in fit.placements)
    return PortSuggestion(
        point.id, point.file, PortStatus.REFUSED, point.scope, fit.scope, fit.anchors, line=line, message=message
    )


def _not_found(point: Point, result: PointResult, why: str) -> PortSuggestion:
    """No place: why, and the statements nearest its anchor as check finds them (apply's result)."""
    message = why or f"no scope of {point.file} holds its anchors' statements ({result.message})"
    nearest = result.candidates or tuple(c for e in result.edits for c in e.candidates)
    return PortSuggestion(point.id, point.file, PortStatus.NOT_FOUND, point.scope, message=message, candidates=nearest)


def _graded(suggestion: PortSuggestion, min_confidence: Confidence) -> PortSuggestion:
    confidence = suggestion.confidence
    if suggestion.status is not PortStatus.PORTED or confidence is None or confidence.at_least(min_confidence):
        return suggestion
    message = f"{confidence.value}, below --min-confidence {min_confidence.value}: not written"
    return replace(suggestion, status=PortStatus.UNSURE, message=message)


# -- names the tree spells otherwise ------------------------------------------------------------------


def _refused_names(result: PointResult, reason: Reason) -> tuple[str, ...]:
    """The names a point refused for ``reason`` reads that have that problem, each once."""
    if result.status is not Status.REFUSED or result.reason is not reason:
        return ()
    return tuple(dict.fromkeys(n.name for n in result.names if n.problem is reason))


def _unbound(result: PointResult) -> tuple[str, ...]:
    """The names a refused point's code reads that are not defined where it would go."""
    return _refused_names(result, Reason.UNBOUND_NAME)


def _where_it_is(
    point: Point,
    result: PointResult,
    status: PortStatus,
    confidence: Confidence,
    note: str = "",
    bindings: tuple[tuple[str, str], ...] = (),
) -> PortSuggestion:
    """A suggestion that keeps the point in its scope, where its anchors are found (``note``: what
    else the evidence says); a refused one carries the check's message."""
    evidence = "its anchors are found where they were" + (f"; {note}" if note else "")
    message = result.message if status is PortStatus.REFUSED else ""
    return PortSuggestion(
        point.id, point.file, status, point.scope, point.scope, confidence=confidence, line=result.line,
        evidence=evidence, message=message, bindings=bindings,
    )  # fmt: skip


def _in_place(point: Point, result: PointResult) -> PortSuggestion:
    """A point whose place is found but whose code reads names this tree lacks (bound later)."""
    return _where_it_is(point, result, PortStatus.REFUSED, Confidence.EXACT)


def _rebound(suggestion: PortSuggestion, names: tuple[str, ...], known: _Spellings) -> PortSuggestion:
    """A suggestion refused for names its code reads, each bound to how the tree spells it: as
    another point's anchor in the same scope showed (as sure as that point's place), else the
    one expression of the scope that reads a key or attribute of that name (a guess)."""
    if suggestion.status is not PortStatus.REFUSED or not names or suggestion.file not in known.works:
        return suggestion
    bindings = dict(suggestion.bindings)
    confidence = suggestion.confidence or Confidence.LIKELY
    notes = []
    scope_known = known.by_scope.get((suggestion.file, suggestion.new_scope), {})
    for name in names:
        if name in scope_known:
            code, shown_by, sure = scope_known[name]
            if not repeatable(code):
                why = f"its code reads {name!r}, which the anchor of {shown_by} shows computed as `{code}`"
                return _unbindable(suggestion, f"{why}: read again, that code would run twice")
            note = f"{name} read as `{code}`, as the anchor of {shown_by} shows"
            sure = sure if pure_read(code) else Confidence.GUESS
        else:
            found = _named_read(known.works[suggestion.file], suggestion.new_scope, name)
            if found is None:
                why = (
                    f"its code reads {name!r}, which {suggestion.new_scope} does not define: no anchor of that"
                    f" scope shows it spelled otherwise and nothing there reads a key or attribute {name!r},"
                    " so there is nothing to bind; the value is not in that def (for a person)"
                )
                return _unbindable(suggestion, why)
            code, sure = found, Confidence.GUESS
            note = f"{name} read as `{code}`, the one read of a key or attribute {name!r} in {suggestion.new_scope}"
        bindings[name] = code
        confidence = confidence if confidence.rank >= sure.rank else sure
        notes.append(note)
    evidence = "; ".join([suggestion.evidence, *notes]) if suggestion.evidence else "; ".join(notes)
    return replace(
        suggestion,
        status=PortStatus.PORTED,
        bindings=tuple(sorted(bindings.items())),
        confidence=confidence,
        evidence=evidence,
        message="",
        cause=None,
        blocked_by="",
    )


def _unbindable(suggestion: PortSuggestion, why: str) -> PortSuggestion:
    """A refused suggestion whose message says why a name cannot be bound (once: a point looked at
    again after apply's proof is told the same)."""
    if why in suggestion.message:
        return suggestion
    return replace(suggestion, message=f"{suggestion.message}; {why}")


def _named_read(work: FileWork, scope: str, name: str) -> str | None:
    """The one expression in the scope reading a key or an attribute called `name`
    (`batch.meta_info.get("validate", False)`, `cfg["validate"]`, `self.validate`), as code."""
    found: set[str] = set()
    for node in work.locator.index.scope_nodes(scope):
        for sub in _own_nodes(node):
            if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr == "get":
                if sub.args and isinstance(sub.args[0], ast.Constant) and sub.args[0].value == name:
                    found.add(ast.unparse(sub))
            elif isinstance(sub, ast.Subscript) and isinstance(sub.slice, ast.Constant) and sub.slice.value == name:
                if isinstance(sub.ctx, ast.Load):
                    found.add(ast.unparse(sub))
            elif isinstance(sub, ast.Attribute) and sub.attr == name and isinstance(sub.ctx, ast.Load):
                found.add(ast.unparse(sub))
    repeated = {code for code in found if repeatable(code)}  # `q.pop().get(...)` would pop again
    return repeated.pop() if len(found) == 1 and len(repeated) == 1 else None


_INNER_SCOPES: tuple[type[ast.AST], ...] = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_INNER_SCOPES += (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _own_nodes(scope_node: ast.AST) -> Iterable[ast.AST]:
    """The nodes of a def's own scope: not those of a def, lambda, class or comprehension inside it,
    whose names (a parameter, a loop variable) are not the def's where a point's code goes."""
    stack = list(ast.iter_child_nodes(scope_node))
    while stack:
        node = stack.pop()
        if isinstance(node, _INNER_SCOPES):
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))
