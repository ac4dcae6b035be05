"""An attribute of `self` a point's code reads that this tree's class no longer keeps (refused,
unset-attribute): bound to what the tree reads in its stead, as the validated release's own
statements show (`current_epoch = self.global_steps // self.steps_per_epoch` in verl 0.9.0,
`current_epoch = self.global_steps // len(self.train_dataloader)` here: `self.steps_per_epoch`
read as `len(self.train_dataloader)`).
"""

from __future__ import annotations

import ast

from trace_instrument.engine.analysis import FileWork
from trace_instrument.engine.neighbours import shipped_attribute_reads
from trace_instrument.engine.port.decide import _own_nodes, _refused_names, _where_it_is
from trace_instrument.locate.align import pure_read
from trace_instrument.model import Confidence, Point, PointResult, PortStatus, PortSuggestion, Reason

_HOLE = "__read_here__"  # stands for the attribute in a statement of the validated release


def _unset(result: PointResult) -> tuple[str, ...]:
    """The attributes of `self` (`self.NAME`) a refused point's code reads that its class never sets."""
    return _refused_names(result, Reason.UNSET_ATTRIBUTE)


def _attribute_bound(work: FileWork, point: Point, result: PointResult) -> PortSuggestion | None:
    """The point where it is, each unset attribute its code reads bound to the one expression the
    tree reads where the validated release read that attribute (None: one of them has none)."""
    bindings: dict[str, str] = {}
    notes = []
    for key in _unset(result):
        statements = shipped_attribute_reads().get(point.id, {}).get(key, [])
        found = _read_here(work, point.scope, key, statements)
        if found is None:
            return None
        code, shown = found
        bindings[key] = code
        notes.append(f"{key} read as `{code}`: the validated release's `{shown[0]}` is `{shown[1]}` here")
    if not bindings:
        return None
    bound = tuple(sorted(bindings.items()))
    return _where_it_is(point, result, PortStatus.PORTED, Confidence.LIKELY, "; ".join(notes), bindings=bound)


def _read_here(work: FileWork, scope: str, key: str, statements: list[str]) -> tuple[str, tuple[str, str]] | None:
    """What the scope reads where the validated release's statements read `key`: the one expression
    every statement found here (all but that alike) agrees on, when it only reads a value or a size
    (`len` of one), with one pair of statements showing it (release, here)."""
    nodes = work.locator.index.scope_nodes(scope)
    if len(nodes) != 1:
        return None
    own = [n for n in _own_nodes(nodes[0]) if isinstance(n, ast.stmt) and not hasattr(n, "body")]
    read: dict[str, tuple[str, str]] = {}
    for text in statements:
        pattern = _with_hole(ast.parse(text).body[0], key.removeprefix("self."))
        for stmt in own:
            captured: list[str] = []
            if _captures(pattern, stmt, captured) and len(set(captured)) == 1:
                read.setdefault(captured[0], (text, ast.unparse(stmt)))
    if len(read) != 1:
        return None
    code, shown = next(iter(read.items()))
    return (code, shown) if _sized_read(code) else None


def _with_hole(stmt: ast.stmt, attribute: str) -> ast.stmt:
    """The statement with each read of `self.<attribute>` a hole."""

    class _Hole(ast.NodeTransformer):
        def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
            if node.attr == attribute and isinstance(node.value, ast.Name) and node.value.id == "self":
                return ast.Name(_HOLE, ast.Load())
            return self.generic_visit(node)

    hole: ast.stmt = _Hole().visit(stmt)
    return hole


def _captures(pattern: ast.AST, node: ast.AST, captured: list[str]) -> bool:
    """Is `node` the pattern but for its holes (what stands in each appended to `captured`)?"""
    if isinstance(pattern, ast.Name) and pattern.id == _HOLE:
        if isinstance(node, ast.expr):
            captured.append(ast.unparse(node))
            return True
        return False
    if type(pattern) is not type(node):
        return False
    for name in pattern._fields:
        if name == "ctx":
            continue
        ours, theirs = getattr(pattern, name, None), getattr(node, name, None)
        if isinstance(ours, list):
            if not isinstance(theirs, list) or len(ours) != len(theirs):
                return False
            if not all(_captures(a, b, captured) for a, b in zip(ours, theirs)):
                return False
        elif isinstance(ours, ast.AST):
            if not isinstance(theirs, ast.AST) or not _captures(ours, theirs, captured):
                return False
        elif ours != theirs:
            return False
    return True


def _sized_read(code: str) -> bool:
    """Does the code only read a value, or the size of one (`len(self.train_dataloader)`)? Read again
    where the point's code goes, it means the same and does none of verl's work."""
    if pure_read(code):
        return True
    node = ast.parse(code, mode="eval").body
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "len"
        and len(node.args) == 1
        and not node.keywords
        and pure_read(ast.unparse(node.args[0]))
    )
