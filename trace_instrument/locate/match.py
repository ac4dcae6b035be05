"""Structural matching of code patterns against real code, on Python's ast.

Both sides are parsed by `ast`, so line breaks, quotes, comments, parentheses
and trailing commas never matter. On the pattern side:
  - `...` matches any expression; as the last call argument it matches any
    remaining arguments and keywords; alone in a block it matches any body
    (and any else/except/finally, but in a statement a rewrite rebuilds);
  - def / class patterns match by name (signature and decorators ignored),
    but in a statement a rewrite rebuilds (see `_header_fields`);
  - `__anchor_N__`, `__anchor_N_value__`, `__anchor_N_body__` capture a
    statement, an expression or a run of statements (rewrite templates).
Statements whose id is in `skip` (other points' instrumentation) are
transparent inside statement lists; they are reported as attachments so a
rewrite can keep them.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from trace_instrument.locate.index import BLOCK_FIELDS
from trace_instrument.spec.code import DEFINITIONS, PLACEHOLDER, is_ellipsis, is_wild_body

_IGNORED_FIELDS = frozenset({"ctx", "type_comment", "kind", "type_params"})
_BLOCK_FIELDS = frozenset(BLOCK_FIELDS)
_BODY_ONLY = frozenset({"body"})


def _capture_of(node: ast.AST) -> tuple[int, str] | None:
    """(index, role) when node is a capture placeholder (statement or expression)."""
    target = node.value if isinstance(node, ast.Expr) else node
    if isinstance(target, ast.Name):
        match = PLACEHOLDER.match(target.id)
        if match:
            return int(match.group(1)), match.group(2) or ""
    return None


@dataclass
class Captures:
    statements: dict[int, ast.stmt] = field(default_factory=dict)
    values: dict[int, tuple[ast.expr, ast.stmt]] = field(default_factory=dict)  # value, statement holding it
    bodies: dict[int, list[ast.stmt]] = field(default_factory=dict)
    # skipped statements, keyed by the id of the real statement they precede (0 = end of list)
    attached: dict[int, list[ast.stmt]] = field(default_factory=dict)
    holders: dict[int, ast.stmt] = field(default_factory=dict)  # real statements matched by template statements
    tails: dict[int, list[ast.stmt]] = field(default_factory=dict)  # skipped statements ending body N


class Matcher:
    def __init__(
        self,
        skip: frozenset[int] = frozenset(),
        lengths: Mapping[int, int] | None = None,
        *,
        written_headers: bool = False,
    ):
        """`skip`: ids of statements that are transparent (other points' code); `lengths`: the
        number of statements a body capture must take, by anchor index (others stretch);
        `written_headers`: a def or class matches its header as written, not by name alone (a
        rewrite's template: the header it wrote is the point's, an edit to it the fork's)."""
        self.skip = skip
        self.lengths = lengths or {}
        self.written_headers = written_headers

    # -- statements -----------------------------------------------------------------

    def statement(
        self, pattern: ast.stmt, node: ast.stmt, caps: Captures | None = None, *, rebuilt: bool = False
    ) -> bool:
        """Does node match pattern? `rebuilt`: the pattern is a statement a rewrite replaces and
        rebuilds from its text (see `_header_fields`)."""
        caps = caps if caps is not None else Captures()
        rebuilt = rebuilt or self.written_headers
        capture = _capture_of(pattern) if isinstance(pattern, ast.Expr) else None
        if capture is not None and capture[1] == "":
            caps.statements[capture[0]] = node
            return True
        if type(pattern) is not type(node):
            return False
        if isinstance(pattern, DEFINITIONS) and isinstance(node, DEFINITIONS) and not rebuilt:  # node: same type
            # found by name; a def or class a rewrite rebuilds matches its header as written, below
            if pattern.name != node.name:
                return False
            return is_wild_body(pattern.body) or self.body(pattern.body, node.body, caps)
        if is_wild_body(getattr(pattern, "body", ())):
            return self._fields_equal(pattern, node, caps, exclude=_header_fields(rebuilt))
        value_capture = self._value_capture(pattern)
        if value_capture is not None:
            index, field_name = value_capture
            if not self._fields_equal(pattern, node, caps, exclude={field_name}):
                return False
            caps.values[index] = (getattr(node, field_name), node)
            return True
        return self._fields_equal(pattern, node, caps)

    def _value_capture(self, pattern: ast.stmt) -> tuple[int, str] | None:
        value = getattr(pattern, "value", None)
        if isinstance(pattern, (ast.Return, ast.Assign, ast.Expr, ast.AnnAssign)) and value is not None:
            capture = _capture_of(value)
            if capture is not None and capture[1] == "value":
                return capture[0], "value"
        return None

    def body(self, patterns: Sequence[ast.stmt], nodes: Sequence[ast.stmt], caps: Captures | None = None) -> bool:
        """Match a statement list; skipped statements are transparent."""
        caps = caps if caps is not None else Captures()
        if is_wild_body(patterns):
            return True
        real = [n for n in nodes if id(n) not in self.skip]
        if not self.sequence(list(patterns), real, caps):
            return False
        self.record_attachments(nodes, caps)
        return True

    def sequence(self, patterns: list[ast.stmt], nodes: list[ast.stmt], caps: Captures) -> bool:
        """Match patterns against exactly these statements, in order (`__anchor_N_body__` stretches)."""
        if not patterns:
            return not nodes
        head, rest = patterns[0], patterns[1:]
        capture = _capture_of(head) if isinstance(head, ast.Expr) else None
        if capture is not None and capture[1] == "body":
            for cut in _cuts(self.lengths.get(capture[0]), len(nodes)):
                trial = Captures()
                if self.sequence(rest, nodes[cut:], trial):
                    caps.bodies[capture[0]] = nodes[:cut]
                    _merge(caps, trial)
                    return True
            return False
        if not nodes:
            return False
        trial = Captures()
        if not self.statement(head, nodes[0], trial):
            return False
        caps_holder = Captures()
        if not self.sequence(rest, nodes[1:], caps_holder):
            return False
        _merge(caps, trial)
        _merge(caps, caps_holder)
        if _capture_of(head) is None:
            caps.holders[id(nodes[0])] = nodes[0]
        return True

    def record_attachments(self, nodes: Sequence[ast.stmt], caps: Captures) -> None:
        """Note which skipped statements (other points' code) sit before which matched ones."""
        pending: list[ast.stmt] = []
        for node in nodes:
            if id(node) in self.skip:
                pending.append(node)
            elif pending:
                caps.attached.setdefault(id(node), []).extend(pending)
                pending = []
        if pending:
            caps.attached.setdefault(0, []).extend(pending)

    # -- expressions and everything else -------------------------------------------------

    def node(self, pattern: object, node: object, caps: Captures) -> bool:
        if isinstance(pattern, ast.AST):
            if isinstance(pattern, ast.expr) and is_ellipsis(pattern):
                return isinstance(node, ast.expr)
            if isinstance(pattern, ast.stmt):
                return isinstance(node, ast.stmt) and self.statement(pattern, node, caps)
            if type(pattern) is not type(node):
                return False
            if isinstance(pattern, ast.Call) and isinstance(node, ast.Call):  # node: same type as pattern
                return self._call(pattern, node, caps)
            return self._fields_equal(pattern, node, caps)
        if isinstance(pattern, list):
            if not isinstance(node, list):
                return False
            if pattern and isinstance(pattern[0], ast.stmt):
                return self.body(pattern, node, caps)
            return len(pattern) == len(node) and all(self.node(p, n, caps) for p, n in zip(pattern, node))
        return pattern == node and type(pattern) is type(node)

    def _fields_equal(
        self, pattern: ast.AST, node: ast.AST, caps: Captures, exclude: AbstractSet[str] = frozenset()
    ) -> bool:
        for name in pattern._fields:
            if name in _IGNORED_FIELDS or name in exclude:
                continue
            if not self.node(getattr(pattern, name, None), getattr(node, name, None), caps):
                return False
        return True

    def _call(self, pattern: ast.Call, node: ast.Call, caps: Captures) -> bool:
        if not self.node(pattern.func, node.func, caps):
            return False
        args = list(pattern.args)
        open_ended = bool(args) and is_ellipsis(args[-1])
        if open_ended:
            args = args[:-1]
            if len(node.args) < len(args):
                return False
        elif len(node.args) != len(args) or len(node.keywords) != len(pattern.keywords):
            return False
        if not all(self.node(p, n, caps) for p, n in zip(args, node.args)):
            return False
        # named keywords match by name (their order does not matter to Python), `**x` unpackings in order
        by_name = {kw.arg: kw for kw in node.keywords if kw.arg is not None}
        for kw in pattern.keywords:
            if kw.arg is None:
                continue
            other = by_name.get(kw.arg)
            if other is None or not self.node(kw.value, other.value, caps):
                return False
        pattern_splats = [kw.value for kw in pattern.keywords if kw.arg is None]
        node_splats = [kw.value for kw in node.keywords if kw.arg is None]
        if open_ended:
            node_splats = node_splats[: len(pattern_splats)]
        return len(pattern_splats) == len(node_splats) and all(
            self.node(p, n, caps) for p, n in zip(pattern_splats, node_splats)
        )


def _cuts(fixed: int | None, available: int) -> Sequence[int]:
    """The lengths a body capture may take, longest first: any, or exactly `fixed`."""
    if fixed is None:
        return range(available, -1, -1)
    return [fixed] if fixed <= available else []


def _header_fields(rebuilt: bool) -> frozenset[str]:
    """The fields a block pattern whose body is `...` leaves out of the comparison.

    Such a pattern is about its header only: `if x: ...` matches whatever its `else` holds.
    A statement a rewrite rebuilds is the exception: only its body is kept (by a body capture),
    the rest is rebuilt from the pattern's text, so its other clauses (`else`, `elif`, `except`,
    `finally`) must be there exactly as written, and `if x: ...` matches an `if` without `else`.
    So must a def's or a class's header, which a def or class is otherwise found without: its
    decorators, parameters with their defaults and annotations, return annotation, bases and
    keywords (`def f(x): ...` does not match `def f(x, z=1)`, whose `z=1` the rewrite would lose).
    """
    return _BODY_ONLY if rebuilt else _BLOCK_FIELDS


def _merge(into: Captures, other: Captures) -> None:
    into.statements.update(other.statements)
    into.values.update(other.values)
    into.bodies.update(other.bodies)
    into.holders.update(other.holders)
    into.tails.update(other.tails)
    for key, items in other.attached.items():
        into.attached.setdefault(key, []).extend(items)


def canonical(node: ast.AST) -> str:
    """A formatting-free fingerprint of code, for exact comparisons."""
    return ast.dump(node, annotate_fields=False, include_attributes=False)
