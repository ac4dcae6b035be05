"""Inserted code never reads a key or a position that may be missing (issue #17, item 12).

The code a point inserts runs inside training. Much of it runs before the runtime can say that
tracing is off (the arguments of a `trace_flow` call are evaluated before the call), and the rest
must not fail a training step with tracing on. So it must not raise on any input the business code
accepts: a batch without `uid`, an empty list of outputs, a reward result without a score. The
construct of ours that raises on such data is the subscript: a key of a mapping or a position of a
sequence that other code filled (KeyError, IndexError, TypeError on None). This guard walks the code
of every core point (templates/points/ and the `code:` entries of anchors/*.yaml) and refuses every
subscript that reads (a load, a `del`, an augmented assignment's target) unless it is proven safe
where it stands:

1. in a type annotation (`-> tuple[list[str], list[str]]`): no data is read;
2. under a condition that tests it: in the body of an `if`, a later operand of an `and`, or the value
   of a conditional expression, whose test (or one operand of its `and`) is
   - `E.get(K)` with no default or a falsy constant one, `K in E` or `K in E.keys()`: then `E[K]`
     is safe;
   - `len(E) == N`, N an integer constant: then `E[C]` is, for an integer constant -N <= C < N;
   - `isinstance(E, list)` (or tuple, or a tuple of those) together with `E` itself: then `E[0]`
     and `E[-1]` are;
3. a position within the length: `E[I]` inside a `for` statement or a comprehension that binds
   `I` from `range(len(E))`, or from `range(min(...))` with `len(E)` among min's arguments;
4. reading back a key just stored: an earlier statement of an enclosing block of the template
   assigns `E[K] = ...`, or the edit goes `after` an anchor whose last statement does (with every
   alternative anchor too);
5. inside a `try` whose handlers catch every Exception and none raises again;

and in cases 2 to 4 provided the template does not bind a name the subscript reads (`E`, `K`, `I`)
anywhere in between (in case 3: in the loop's body, the loop's own binding of `I` aside). Everything else a template does with business objects is accepted: reading
attributes, calling their methods (`.get(key, placeholder)`, `getattr(obj, name, placeholder)`),
`len()`, iteration. Those rely on the type of the object at the anchor (a DataProto always has a
`non_tensor_batch`), which the business code around the anchor relies on too, not on what one input
holds.

Opt-in extras are out of scope: they are changes to verl's behaviour, not tracing (they run whether
tracing is on or not, and declare what they change), and their subscripts stand for the business
statements they replace (`metric["compute_score"]` becomes `metric["reward_score"]`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

import pytest

from trace_instrument.model import Catalog, Edit, EditKind, Point
from trace_instrument.spec.code import parse_template

CATCH_ALL = {"Exception", "BaseException"}
SEQUENCE_TYPES = {"list", "tuple"}


def core_points(catalog: Catalog) -> list[Point]:
    return [point for point in catalog.points if point.extra is None]


class TemplateReads:
    """The subscripts of one edit's code that may raise on business data."""

    def __init__(self, edit: Edit):
        self.edit = edit
        self.top = list(edit.template.stmts)
        self.parents: dict[ast.AST, ast.AST] = {}
        for stmt in self.top:
            for node in ast.walk(stmt):
                for child in ast.iter_child_nodes(node):
                    self.parents[child] = node
        self.annotations = {id(n) for stmt in self.top for a in _annotations(stmt) for n in ast.walk(a)}

    def unsafe(self) -> list[ast.Subscript]:
        return [node for node in self._reading_subscripts() if not self._safe(node)]

    def _reading_subscripts(self) -> Iterator[ast.Subscript]:
        for stmt in self.top:
            for node in ast.walk(stmt):
                if not isinstance(node, ast.Subscript) or id(node) in self.annotations:
                    continue
                parent = self.parents.get(node)
                augmented = isinstance(parent, ast.AugAssign) and parent.target is node
                if not isinstance(node.ctx, ast.Store) or augmented:
                    yield node

    def _safe(self, node: ast.Subscript) -> bool:
        return self._guarded(node) or self._within_length(node) or self._stored_before(node) or self._contained(node)

    def _ancestry(self, node: ast.AST) -> Iterator[tuple[ast.AST, ast.AST]]:
        """(child, parent) pairs from `node` up to the template's top statement."""
        while node in self.parents:
            parent = self.parents[node]
            yield node, parent
            node = parent

    # -- 2: a condition that tests the key, the length or the non-empty sequence ----------------

    def _guarded(self, node: ast.Subscript) -> bool:
        for child, parent in self._ancestry(node):
            tests = _tests_guarding(child, parent)
            if tests and _conditions_make_safe(node, [c for t in tests for c in _conjuncts(t)]):
                region = parent.body if isinstance(parent, ast.If) else [child]
                if not _binds_any(region, _names_read(node)):
                    return True
        return False

    # -- 3: a position the loop takes from the length ----------------------------------------------

    def _within_length(self, node: ast.Subscript) -> bool:
        if not isinstance(node.slice, ast.Name):
            return False
        index, base = node.slice.id, ast.unparse(node.value)
        for child, parent in self._ancestry(node):
            for target, iterable, region in _loops(child, parent):
                if target == index and base in _bounding_lengths(iterable):
                    return not _binds_any(region, _names_read(node))
        return False

    # -- 4: a key stored just before -------------------------------------------------------------

    def _stored_before(self, node: ast.Subscript) -> bool:
        text = ast.unparse(node)
        for block, index in self._enclosing_blocks(node):
            earlier = block[:index]
            for position, stmt in enumerate(earlier):
                if _stores(stmt, text) and not _binds_any(earlier[position + 1 :], _names_read(node)):
                    return True
            if block is self.top and self._anchor_stores(text) and not _binds_any(earlier, _names_read(node)):
                return True
        return False

    def _enclosing_blocks(self, node: ast.AST) -> Iterator[tuple[list[ast.stmt], int]]:
        """Each statement list that holds `node` (through one of its statements), with that statement's index."""
        top = node
        for child, parent in self._ancestry(node):
            top = parent
            for field in ("body", "orelse", "finalbody"):
                block = getattr(parent, field, None)
                index = _position(block, child) if isinstance(block, list) else None
                if index is not None:
                    yield block, index
        index = _position(self.top, top)
        if index is not None:
            yield self.top, index

    def _anchor_stores(self, text: str) -> bool:
        anchors = self.edit.anchors
        return bool(anchors) and all(a.kind is EditKind.AFTER and _stores(a.target.stmts[-1], text) for a in anchors)

    # -- 5: contained by a try -------------------------------------------------------------------

    def _contained(self, node: ast.Subscript) -> bool:
        for child, parent in self._ancestry(node):
            if isinstance(parent, ast.Try) and _position(parent.body, child) is not None and _contains(parent):
                return True
        return False


def _position(block: list[ast.stmt], node: ast.AST) -> int | None:
    """The index of `node` in `block`, by identity (None when it is not there)."""
    return next((index for index, stmt in enumerate(block) if stmt is node), None)


def _annotations(stmt: ast.stmt) -> Iterator[ast.expr]:
    for node in ast.walk(stmt):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
            yield node.returns
        elif isinstance(node, (ast.arg, ast.AnnAssign)) and node.annotation is not None:
            yield node.annotation


def _tests_guarding(child: ast.AST, parent: ast.AST) -> list[ast.expr]:
    """The tests that must hold for `child` (a part of `parent`) to run."""
    if isinstance(parent, ast.If) and _position(parent.body, child) is not None:
        return [parent.test]
    if isinstance(parent, ast.IfExp) and parent.body is child:
        return [parent.test]
    if isinstance(parent, ast.BoolOp) and isinstance(parent.op, ast.And):
        position = [id(v) for v in parent.values].index(id(child))
        return list(parent.values[:position])
    return []


def _loops(child: ast.AST, parent: ast.AST) -> Iterator[tuple[str, ast.expr, list[ast.AST]]]:
    """(the name a loop binds, what it iterates, the code that runs with it) for a loop that `child` is in."""
    if (
        isinstance(parent, ast.For)
        and isinstance(parent.target, ast.Name)
        and _position(parent.body, child) is not None
    ):
        yield parent.target.id, parent.iter, list(parent.body)
    if isinstance(parent, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
        for generator in parent.generators:
            if isinstance(generator.target, ast.Name) and child is not generator:
                yield generator.target.id, generator.iter, [child]


def _bounding_lengths(iterable: ast.expr) -> set[str]:
    """E for each `len(E)` that bounds `range(len(E))` or `range(min(..., len(E), ...))`."""
    if not (isinstance(iterable, ast.Call) and _is_call_of(iterable, "range") and len(iterable.args) == 1):
        return set()
    (bound,) = iterable.args
    lengths = bound.args if isinstance(bound, ast.Call) and _is_call_of(bound, "min") else [bound]
    return {
        ast.unparse(n.args[0])
        for n in lengths
        if isinstance(n, ast.Call) and _is_call_of(n, "len") and len(n.args) == 1
    }


def _conjuncts(test: ast.expr) -> list[ast.expr]:
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return [c for value in test.values for c in _conjuncts(value)]
    return [test]


def _conditions_make_safe(node: ast.Subscript, conditions: list[ast.expr]) -> bool:
    base, key = ast.unparse(node.value), ast.unparse(node.slice)
    if any(_tested_key(c) == (base, key) for c in conditions):
        return True
    index = _int_constant(node.slice)
    if index is None:
        return False
    lengths = [n for c in conditions for (b, n) in [_tested_length(c)] if b == base]
    if any(-n <= index < n for n in lengths):
        return True
    non_empty = base in {ast.unparse(c) for c in conditions}
    return index in (0, -1) and non_empty and any(_tested_sequence(c) == base for c in conditions)


def _tested_key(test: ast.expr) -> tuple[str, str] | None:
    """(E, K) for a test `E.get(K)` (no default, or a falsy constant one), `K in E` or `K in E.keys()`."""
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute) and test.func.attr == "get":
        default = test.args[1] if len(test.args) > 1 else ast.Constant(None)
        if len(test.args) in (1, 2) and not test.keywords and isinstance(default, ast.Constant) and not default.value:
            return ast.unparse(test.func.value), ast.unparse(test.args[0])
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.In):
        container = test.comparators[0]
        if isinstance(container, ast.Call) and isinstance(container.func, ast.Attribute) and not container.args:
            container = container.func.value if container.func.attr == "keys" else container
        return ast.unparse(container), ast.unparse(test.left)
    return None


def _tested_length(test: ast.expr) -> tuple[str, int]:
    """(E, N) for a test `len(E) == N`; ("", 0) for any other test."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
        left, length = test.left, _int_constant(test.comparators[0])
        if isinstance(left, ast.Call) and _is_call_of(left, "len") and len(left.args) == 1 and length is not None:
            return ast.unparse(left.args[0]), length
    return "", 0


def _tested_sequence(test: ast.expr) -> str | None:
    """E for a test `isinstance(E, list)`, `isinstance(E, tuple)` or `isinstance(E, (list, tuple))`."""
    if not isinstance(test, ast.Call) or not _is_call_of(test, "isinstance") or len(test.args) != 2:
        return None
    subject, kinds = test.args
    names = kinds.elts if isinstance(kinds, ast.Tuple) else [kinds]
    if names and all(isinstance(n, ast.Name) and n.id in SEQUENCE_TYPES for n in names):
        return ast.unparse(subject)
    return None


def _is_call_of(node: ast.Call, name: str) -> bool:
    return isinstance(node.func, ast.Name) and node.func.id == name and not node.keywords


def _int_constant(node: ast.expr) -> int | None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _int_constant(node.operand)
        return -value if value is not None else None
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


def _stores(stmt: ast.stmt, text: str) -> bool:
    """Does `stmt` assign the subscript written `text` (`E[K] = ...`)?"""
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
    return any(isinstance(t, ast.Subscript) and ast.unparse(t) == text for t in targets)


def _contains(node: ast.Try) -> bool:
    """Do the handlers catch every Exception, and none raise again?"""
    catches_all = any(h.type is None or _handled_names(h.type) & CATCH_ALL for h in node.handlers)
    raises = any(isinstance(n, ast.Raise) for h in node.handlers for n in ast.walk(h))
    return catches_all and not raises


def _handled_names(kind: ast.expr) -> set[str]:
    kinds = kind.elts if isinstance(kind, ast.Tuple) else [kind]
    return {k.id for k in kinds if isinstance(k, ast.Name)}


def _names_read(node: ast.expr) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _binds_any(region: list[ast.stmt] | list[ast.AST], names: set[str]) -> bool:
    return any(
        isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id in names
        for top in region
        for n in ast.walk(top)
    )


def where(edit: Edit, node: ast.AST) -> str:
    """`file:line` of a node: a template file's own line, or the line within a spec's `code:`."""
    name = edit.template.name
    line = getattr(node, "lineno", 0)
    return f"{name}:{line}" if name.endswith(".py") else f"{name} (line {line} of its code)"


def unsafe_reads(points: list[Point]) -> list[str]:
    return [
        f"{where(edit, node)}: {ast.unparse(node)} ({point.id})"
        for point in points
        for edit in point.edits
        for node in TemplateReads(edit).unsafe()
    ]


# -- the shipped catalog ----------------------------------------------------------------------------


def test_no_core_point_reads_a_key_or_position_that_may_be_missing(catalog: Catalog):
    assert unsafe_reads(core_points(catalog)) == []


def test_the_guard_sees_every_template_and_code_entry(catalog: Catalog):
    """It walks every core edit's code: template files and `code:` entries both."""
    edits = [edit for point in core_points(catalog) for edit in point.edits]
    names = {edit.template.name for edit in edits}
    assert any(name.startswith("templates/points/") for name in names)
    assert any(name.startswith("anchors/") for name in names)
    assert all(TemplateReads(edit).top for edit in edits)


# -- what the guard accepts and refuses, one construct at a time ------------------------------------


def reads_in(code: str) -> list[str]:
    """The unsafe subscripts of `code` as an inserted template (no anchor stores anything)."""
    template = parse_template("t.py", code)
    return [ast.unparse(node) for node in TemplateReads(Edit(anchors=(), template=template, rank=0)).unsafe()]


@pytest.mark.parametrize(
    "code",
    [
        "trace_flow(uid=batch.non_tensor_batch['uid'], traj_uid='N/A')",
        "x = output[-1] if isinstance(output, list) else output",
        "x = output[-1] if output else output",  # a truthy dict has no key -1
        "x = d[k] if d.get(k, 'default') else None",  # a truthy default says nothing of the key
        "x = p[3] if len(p) == 3 else None",
        "if len(p) == 3:\n    p = q\n    x = p[1]",  # rebound in between
        "if k in d:\n    pass\nx = d[k]",  # the test does not guard what follows the if
        "d['a'] = 1\nd = other\nx = d['a']",  # stored, then rebound
        "del d['a']",
        "d['a'] += 1",
        "try:\n    x = d['a']\nexcept KeyError:\n    x = None",  # not every Exception
        "try:\n    x = d['a']\nexcept Exception:\n    raise",
        "try:\n    x = d['a']\nfinally:\n    pass",
        "for i in range(len(c)):\n    x = u[i]",
        "for i in range(len(u)):\n    u = v\n    x = u[i]",
        "x = [u[i + 1] for i in range(len(u))]",
        "x = [u[i] for i in range(max(len(c), len(u)))]",
        "x = d[k] if k in d.values() else None",
        "x = [r['score'] for r in results]",
    ],
)
def test_the_guard_refuses(code: str):
    assert reads_in(code) != []


@pytest.mark.parametrize(
    "code",
    [
        "trace_flow(uid=batch.non_tensor_batch.get('uid', 'unknown'), traj_uid='N/A')",
        "x = getattr(agent_data, 'trace_uid', 'unknown')",
        "def f(batch) -> tuple[list[str], list[str]]:\n    y: dict[str, int] = {}",
        "if os.environ.get('VERL_TRACE_DIR'):\n    env['VERL_TRACE_DIR'] = os.environ['VERL_TRACE_DIR']",
        "if k in d:\n    x = d[k]",
        "x = d['uid'] if 'uid' in d.keys() else 'unknown'",
        "for i in range(len(u)):\n    x = u[i]",
        "x = [str(u[i]) for i in range(min(len(c), len(u)))]",
        "if len(p) == 3 and p[1].isdigit() and p[-3]:\n    x = p[0]",
        "x = output[-1] if isinstance(output, list) and output else output",
        "x = output[0] if isinstance(output, (list, tuple)) and output else None",
        "d['traj_uid'] = make()\ntrace_flow(uid=d.get('uid'), traj_uid=d['traj_uid'])",
        "try:\n    x = d['a']\nexcept Exception:\n    x = None",
        "try:\n    x = d['a']\nexcept (ValueError, Exception) as e:\n    log(e)",
        "d['a'] = 1",
    ],
)
def test_the_guard_accepts(code: str):
    assert reads_in(code) == []


def test_a_key_the_anchor_has_just_stored_may_be_read(catalog: Catalog):
    """flow.v0.uid-generated goes right after the statement that stores batch.non_tensor_batch["uid"]."""
    point = catalog.point("flow.v0.uid-generated")
    (edit,) = point.edits
    assert "batch.non_tensor_batch['uid']" in [ast.unparse(n) for n in TemplateReads(edit)._reading_subscripts()]
    assert TemplateReads(edit).unsafe() == []
    moved = Edit(anchors=(), template=edit.template, rank=0)  # the same code anywhere else may not
    assert [ast.unparse(n) for n in TemplateReads(moved).unsafe()] == ["batch.non_tensor_batch['uid']"]
