"""Control flow through one body of code: which facts hold on every path to each statement.

A *fact* is something running code makes true:

- ``n:x``: the local name ``x`` is bound (an assignment, an import, a def or class, a loop,
  ``with`` or ``except`` target, a parameter);
- ``a:A``: the attribute ``A`` is set on the instance (``self.A = ...`` in a method,
  ``setattr(self, "A", ...)``, or ``A`` defined in a class body);
- ``k:S|K``: the item ``S[K]`` is written, by ``S[K] = ...`` or by a ``with`` block whose
  context manager is called with both ``S`` and the string ``K`` (``with marked_timer("gen",
  timing_raw):`` writes ``timing_raw["gen"]`` when the block exits);
- ``p:N``: a marked statement ran (markers are given by the caller).

The analysis is definite assignment, as Python's own semantics give it (the rules Java's
compiler applies to its locals, on Python's statements): a fact holds before a statement when
every path from the start of the body to that statement makes it true. ``if``, ``match`` and
loop bodies may not run (``while True`` leaves only by ``break``); a ``try`` body may stop at
any statement, so its handlers start from what held everywhere in it; ``finally`` runs on every
way out; ``return``, ``raise``, ``break`` and ``continue`` end a path; ``del`` and rebinding
take facts away. What it assumes, and says so (docs/anchors.md): a context manager lets an
exception through unless it is ``contextlib.suppress``; a call returns (``sys.exit()`` is a
plain call); bodies of nested functions run later and are not part of the path.

An *overlay* lets the analysis see code that is not in the file yet: the statements apply
would insert next to a statement, or the template a rewrite would put in place of a region.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from trace_instrument.spec.code import PLACEHOLDER

State = frozenset[str] | None  # the facts that hold; None: no path reaches here
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def meet(a: State, b: State) -> State:
    """What holds on both paths (a path that cannot be taken adds nothing)."""
    if a is None:
        return b
    if b is None:
        return a
    return a & b


def meet_all(states: Iterable[State]) -> State:
    result: State = None
    for state in states:
        result = meet(result, state)
    return result


# -- what a piece of code reads and writes -----------------------------------------------------


def dotted(node: ast.AST) -> str | None:
    """`a.b.c` for a name or a chain of attributes on one, else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def item_fact(subject: str, key: str) -> str:
    return f"k:{subject}|{key}"


def item_read(node: ast.AST) -> tuple[str, str] | None:
    """(subject, key) when node reads `S[K]` or calls `S.get(K, ...)` with a string K."""
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
        subject, key = dotted(node.value), node.slice
    elif (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and node.args
        and not isinstance(node.args[0], ast.Starred)
    ):
        subject, key = dotted(node.func.value), node.args[0]
    else:
        return None
    if subject is None or not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
        return None
    return subject, key.value


def with_products(stmt: ast.With | ast.AsyncWith) -> frozenset[str]:
    """The items a `with` block writes when it exits: `S[K]` for every name (or attribute chain)
    S and string K its context manager is called with."""
    found: set[str] = set()
    for item in stmt.items:
        call = item.context_expr
        if not isinstance(call, ast.Call):
            continue
        arguments = [*call.args, *(k.value for k in call.keywords)]
        keys = [a.value for a in arguments if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        subjects = [s for s in (dotted(a) for a in arguments) if s is not None]
        found.update(item_fact(s, k) for s in subjects for k in keys)
    return frozenset(found)


def suppresses(stmt: ast.With | ast.AsyncWith) -> bool:
    """`with suppress(...)` / `contextlib.suppress(...)`: an exception in the body is swallowed."""
    for item in stmt.items:
        call = item.context_expr
        if isinstance(call, ast.Call) and (dotted(call.func) or "").split(".")[-1] == "suppress":
            return True
    return False


def constant_truth(test: ast.expr) -> bool | None:
    """True / False for a test whose value is known without running it (TYPE_CHECKING is False)."""
    if isinstance(test, ast.Constant):
        return bool(test.value)
    if (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    ):
        return False
    return None


def _irrefutable(pattern: ast.pattern) -> bool:
    """`case _:` and `case name:` match anything."""
    if isinstance(pattern, ast.MatchAs):
        return pattern.pattern is None or _irrefutable(pattern.pattern)
    if isinstance(pattern, ast.MatchOr):
        return any(_irrefutable(p) for p in pattern.patterns)
    return False


def _captured_names(pattern: ast.pattern) -> Iterator[str]:
    for node in ast.walk(pattern):
        name = getattr(node, "name", None) if isinstance(node, (ast.MatchAs, ast.MatchStar)) else None
        if isinstance(node, ast.MatchMapping):
            name = node.rest
        if isinstance(name, str):
            yield name


def parameters(args: ast.arguments) -> list[str]:
    names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
    names += [a.arg for a in (args.vararg, args.kwarg) if a is not None]
    return names


# -- overlays: code apply would put in --------------------------------------------------------


@dataclass
class Overlay:
    """Statements the analysis walks as if they were in the file.

    `before` / `after`: statement lists inserted next to a statement (by its id). `rewrites`: a
    region's first statement -> the template that replaces the region; `covered`: the region's
    other statements. `substitute`: a template statement -> the real statements it stands for
    (`__anchor_N__`, `__anchor_N_body__`); `around`: a template statement -> the real statement
    whose captured value it holds, so inserts next to that statement go next to it.
    """

    before: dict[int, list[Sequence[ast.stmt]]] = field(default_factory=dict)
    after: dict[int, list[Sequence[ast.stmt]]] = field(default_factory=dict)
    rewrites: dict[int, Sequence[ast.stmt]] = field(default_factory=dict)
    covered: set[int] = field(default_factory=set)
    substitute: dict[int, list[ast.stmt]] = field(default_factory=dict)
    around: dict[int, int] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.before or self.after or self.rewrites)

    def insert(self, neighbour: ast.stmt, stmts: Sequence[ast.stmt], *, after: bool) -> None:
        (self.after if after else self.before).setdefault(id(neighbour), []).append(stmts)

    def rewrite(self, region: Sequence[ast.stmt], anchored: Sequence[ast.stmt], template: Sequence[ast.stmt]) -> None:
        """`template` in place of `region`, its captures standing for the anchored statements."""
        self.rewrites[id(region[0])] = template
        self.covered.update(id(s) for s in region[1:])
        for stmt in statements(template):
            capture = _capture(stmt)
            if capture is not None and capture[0] < len(anchored):
                index, role = capture
                real = anchored[index]
                self.substitute[id(stmt)] = list(getattr(real, "body", [])) if role == "body" else [real]
                continue
            for node in ast.walk(stmt) if not isinstance(stmt, (*_FUNCTIONS, ast.ClassDef)) else ():
                if isinstance(node, ast.Name) and (match := PLACEHOLDER.match(node.id)) and match.group(2) == "value":
                    index = int(match.group(1))
                    if index < len(anchored):
                        self.around[id(stmt)] = id(anchored[index])


def _capture(stmt: ast.stmt) -> tuple[int, str] | None:
    """(index, role) of a statement that is a whole capture (`__anchor_N__` / `__anchor_N_body__`)."""
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Name):
        match = PLACEHOLDER.match(stmt.value.id)
        if match and match.group(2) in (None, "body"):
            return int(match.group(1)), match.group(2) or ""
    return None


def statements(stmts: Iterable[ast.stmt], *, into_definitions: bool = False) -> Iterator[ast.stmt]:
    """Every statement, nested ones too (with `into_definitions`, those of nested defs and classes)."""
    for stmt in stmts:
        yield stmt
        if not into_definitions and isinstance(stmt, (*_FUNCTIONS, ast.ClassDef)):
            continue
        yield from statements(child_statements(stmt), into_definitions=into_definitions)


def child_statements(stmt: ast.stmt) -> Iterator[ast.stmt]:
    """The statements directly in a statement's blocks and clauses."""
    for name in ("body", "orelse", "finalbody"):
        yield from getattr(stmt, name, None) or []
    for clause in [*getattr(stmt, "handlers", []), *getattr(stmt, "cases", [])]:
        yield from clause.body


# -- the analysis ------------------------------------------------------------------------------


class Flow:
    """Definite facts before every statement of one body (a function's, a class's or a module's)."""

    def __init__(
        self,
        owner: ast.AST,
        overlay: Overlay | None = None,
        markers: dict[int, str] | None = None,
        exits: dict[int, str] | None = None,
    ):
        """`owner`: a def, a class or the module. `markers`: statement id -> a fact its starting makes
        true; `exits`: statement id -> a fact its finishing (normally) makes true."""
        self.owner = owner
        self.overlay = overlay or Overlay()
        self.markers = markers or {}
        self.exits = exits or {}
        self._before: dict[int, State] = {}
        self._frames: list[list[State]] = []  # what held anywhere inside the enclosing try bodies
        self._loops: list[tuple[list[State], list[State]]] = []  # (breaks, continues) of enclosing loops
        self._returns: list[State] = []
        self.walked: list[ast.stmt] = []  # every statement walked, in the order first reached
        self.instance = instance_name(owner)
        self.class_body = isinstance(owner, ast.ClassDef)
        entry: set[str] = set()
        if isinstance(owner, (*_FUNCTIONS, ast.Lambda)):
            entry.update(f"n:{name}" for name in parameters(owner.args))
        body = getattr(owner, "body", [])
        end = self._block(body, frozenset(entry))
        self.exit: State = meet_all([end, *self._returns])

    def before(self, stmt: ast.stmt) -> State:
        """What holds on every path to the statement (None: no path reaches it, or it is not in this body)."""
        return self._before.get(id(stmt))

    # -- statements -----------------------------------------------------------------------

    def _block(self, stmts: Sequence[ast.stmt], state: State) -> State:
        for stmt in stmts:
            state = self._statement(stmt, state)
        return state

    def _statement(self, stmt: ast.stmt, state: State, *, kept: bool = False) -> State:
        """One statement with what the overlay puts around it or in its place; `kept`: a statement
        a rewrite template keeps (walked as it is written, inside the template)."""
        overlay = self.overlay
        real = overlay.substitute.get(id(stmt))
        if real is not None:
            self._record(stmt, state)
            for kept_stmt in real:
                state = self._statement(kept_stmt, state, kept=True)
            return state
        # the region's first statement had its inserts walked before the template
        inserts = not (kept and id(stmt) in overlay.rewrites)
        neighbour = overlay.around.get(id(stmt), id(stmt))
        for inserted in overlay.before.get(neighbour, ()) if inserts else ():
            state = self._block(inserted, state)
        if not kept and id(stmt) in overlay.covered:
            pass  # part of a region a rewrite replaces: walked with the template
        elif not kept and id(stmt) in overlay.rewrites:
            self._record(stmt, state)
            state = self._block(overlay.rewrites[id(stmt)], state)
        else:
            state = self._one(stmt, state)
            finished = self.exits.get(id(stmt))
            if finished is not None and state is not None:
                state = state | {finished}
        for inserted in overlay.after.get(neighbour, ()) if inserts else ():
            state = self._block(inserted, state)
        return state

    def _record(self, stmt: ast.stmt, state: State) -> None:
        key = id(stmt)
        if key in self._before:
            self._before[key] = meet(self._before[key], state)
        else:
            self._before[key] = state
            self.walked.append(stmt)
        for frame in self._frames:
            frame[0] = meet(frame[0], state)

    def _one(self, stmt: ast.stmt, state: State) -> State:
        self._record(stmt, state)
        marker = self.markers.get(id(stmt))
        if marker is not None and state is not None:
            state = state | {marker}
        handler = getattr(self, f"_{type(stmt).__name__}", None)
        if handler is not None:
            result: State = handler(stmt, state)
            return result
        return _gain(state, *self._writes(stmt))

    def _writes(self, stmt: ast.stmt) -> tuple[set[str], set[str]]:
        """(facts made true, fact prefixes made false) by a simple statement."""
        made: set[str] = set()
        lost: set[str] = set()
        if isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                self._target(target, made, lost)
        elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign)) and (
            not isinstance(stmt, ast.AnnAssign) or stmt.value is not None
        ):
            self._target(stmt.target, made, lost)
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            for alias in stmt.names:
                if alias.name != "*":
                    self._name(alias.asname or alias.name.split(".")[0], made, lost)
        elif isinstance(stmt, (*_FUNCTIONS, ast.ClassDef)):
            self._name(stmt.name, made, lost)
        elif isinstance(stmt, ast.Delete):
            for target in stmt.targets:
                self._target(target, set(), lost)
                if isinstance(target, ast.Name):
                    lost.add(f"n:{target.id}")
                if isinstance(target, ast.Attribute) and dotted(target.value) == self.instance:
                    lost.add(f"a:{target.attr}")
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            self._setattr(stmt.value, made)
        return made, lost

    def _target(self, target: ast.expr, made: set[str], lost: set[str]) -> None:
        if isinstance(target, ast.Name):
            self._name(target.id, made, lost)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self._target(element, made, lost)
        elif isinstance(target, ast.Starred):
            self._target(target.value, made, lost)
        elif isinstance(target, ast.Attribute):
            chain = dotted(target)
            if chain is not None:
                lost.update({f"k:{chain}|", f"k:{chain}."})
            if self.instance is not None and dotted(target.value) == self.instance:
                made.add(f"a:{target.attr}")
        elif isinstance(target, ast.Subscript):
            read = item_read(ast.Subscript(value=target.value, slice=target.slice, ctx=ast.Load()))
            if read is not None:
                made.add(item_fact(*read))

    def _name(self, name: str, made: set[str], lost: set[str]) -> None:
        made.add(f"n:{name}")
        if self.class_body:
            made.add(f"a:{name}")
        lost.update({f"k:{name}|", f"k:{name}."})

    def _setattr(self, call: ast.Call, made: set[str]) -> None:
        if (
            isinstance(call.func, ast.Name)
            and call.func.id == "setattr"
            and len(call.args) >= 2
            and dotted(call.args[0]) == self.instance
            and isinstance(call.args[1], ast.Constant)
            and isinstance(call.args[1].value, str)
        ):
            made.add(f"a:{call.args[1].value}")

    def _targets_of(self, target: ast.expr | None, state: State) -> State:
        if target is None:
            return state
        made: set[str] = set()
        lost: set[str] = set()
        self._target(target, made, lost)
        return _gain(state, made, lost)

    # -- compound statements --------------------------------------------------------------

    def _If(self, stmt: ast.If, state: State) -> State:
        truth = constant_truth(stmt.test)
        body = self._block(stmt.body, None if truth is False else state)
        orelse = self._block(stmt.orelse, None if truth is True else state)
        return meet(body, orelse)

    def _loop(self, stmt: ast.For | ast.AsyncFor | ast.While, state: State, endless: bool) -> State:
        head = state
        while True:
            breaks: list[State] = []
            continues: list[State] = []
            self._loops.append((breaks, continues))
            try:
                entry = self._targets_of(getattr(stmt, "target", None), head)
                end = self._block(stmt.body, entry)
            finally:
                self._loops.pop()
            again = meet(state, meet_all([end, *continues]))
            if again == head:
                break
            head = again
        finished = None if endless else self._block(stmt.orelse, head)
        return meet_all([finished, *breaks])

    def _For(self, stmt: ast.For, state: State) -> State:
        return self._loop(stmt, state, endless=False)

    _AsyncFor = _For

    def _While(self, stmt: ast.While, state: State) -> State:
        return self._loop(stmt, state, endless=constant_truth(stmt.test) is True)

    def _With(self, stmt: ast.With | ast.AsyncWith, state: State) -> State:
        entry = state
        for item in stmt.items:
            entry = self._targets_of(item.optional_vars, entry)
        frame: list[State] = [None]
        swallows = suppresses(stmt)
        if swallows:
            self._frames.append(frame)
        try:
            end = self._block(stmt.body, entry)
        finally:
            if swallows:
                self._frames.pop()
        out = _gain(end, set(with_products(stmt)), set())
        return meet(out, frame[0]) if swallows else out

    _AsyncWith = _With

    def _Try(self, stmt: ast.Try, state: State) -> State:
        anywhere: list[State] = [None]  # for finally: what held at any point of body, handlers, else
        in_body: list[State] = [None]  # for the handlers: what held at any point of the body
        self._frames.append(anywhere)
        try:
            self._frames.append(in_body)
            try:
                body = self._block(stmt.body, state)
            finally:
                self._frames.pop()
            outs = [self._block(stmt.orelse, body)]
            for handler in stmt.handlers:
                entry = in_body[0]
                if handler.name:
                    entry = _gain(entry, {f"n:{handler.name}"}, set())
                end = self._block(handler.body, entry)
                outs.append(_gain(end, set(), {f"n:{handler.name}"}) if handler.name else end)
        finally:
            self._frames.pop()
        normal = meet_all(outs)
        if not stmt.finalbody:
            return normal
        # finally runs on every way out: walked from what holds on all of them, and once more from
        # the normal way out, which is what the code after the statement sees
        every_way = self._block(stmt.finalbody, meet(normal, anywhere[0]))
        if normal is None:
            return None
        return every_way if normal == meet(normal, anywhere[0]) else self._block(stmt.finalbody, normal)

    _TryStar = _Try

    def _Match(self, stmt: ast.Match, state: State) -> State:
        outs: list[State] = []
        exhaustive = False
        for case in stmt.cases:
            entry = _gain(state, {f"n:{name}" for name in _captured_names(case.pattern)}, set())
            outs.append(self._block(case.body, entry))
            exhaustive = exhaustive or (case.guard is None and _irrefutable(case.pattern))
        if not exhaustive:
            outs.append(state)
        return meet_all(outs)

    def _Return(self, stmt: ast.Return, state: State) -> State:
        self._returns.append(state)
        return None

    def _Raise(self, stmt: ast.Raise, state: State) -> State:
        return None

    def _Break(self, stmt: ast.Break, state: State) -> State:
        if self._loops:
            self._loops[-1][0].append(state)
        return None

    def _Continue(self, stmt: ast.Continue, state: State) -> State:
        if self._loops:
            self._loops[-1][1].append(state)
        return None

    def _Assert(self, stmt: ast.Assert, state: State) -> State:
        return None if constant_truth(stmt.test) is False else state


def _gain(state: State, made: set[str], lost: set[str]) -> State:
    if state is None:
        return None
    if lost:
        prefixes = tuple(p for p in lost if p.endswith(("|", ".")))
        exact = lost - set(prefixes)
        state = frozenset(f for f in state if f not in exact and not (prefixes and f.startswith(prefixes)))
    return state | made if made else state


def instance_name(owner: ast.AST) -> str | None:
    """The name a method calls its instance by (its first parameter), for `self.A = ...` facts."""
    if not isinstance(owner, _FUNCTIONS):
        return None
    positional = [*owner.args.posonlyargs, *owner.args.args]
    if not positional:
        return None
    decorators = {dotted(d) for d in owner.decorator_list}
    if "staticmethod" in decorators or "classmethod" in decorators:
        return None
    return positional[0].arg
