"""Does each point's code run where it must? The control flow around it, judged.

A point's code may follow its anchor into a new `if`, `try`, loop or `with`, or land after an
early `return`. For a plain trace call that is usually right: the event is traced where it
happens. It is wrong when

- the code sets up what other code reads (`self._traj_tracker`, a local `_pp`, a helper def)
  and no longer runs on every path to the readers: readers in the same function need it on
  every path to them; readers elsewhere need it on every normal way out of `__init__`, of a
  class body or of the module, and, for other methods, on every path to the calls of the
  reading function;
- the code reads a local the business code binds later or on some paths only (a fork's
  `import os` at the end of the function makes `os` local to all of it);
- the code reads what a `with` block writes when it exits (`timing_raw.get("gen")` inside or
  before `with marked_timer("gen", timing_raw):`).

Which code sets up what for whom is derived from the templates (spec/relations.py) and the
file's own code; the flow itself knows nothing of specs (locate/flow.py). Code apply has not
placed yet is judged where apply would put it, with every other point of the run in place.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from trace_instrument.locate.anchors import Placement
from trace_instrument.locate.attributes import ClassAttributes, methods
from trace_instrument.locate.flow import (
    Flow,
    Overlay,
    State,
    child_statements,
    constant_truth,
    dotted,
    instance_name,
    item_fact,
    item_read,
    statements,
    suppresses,
    with_products,
)
from trace_instrument.locate.index import FileIndex, Site
from trace_instrument.locate.match import Matcher
from trace_instrument.locate.names import COMPREHENSIONS, BindingKind, NameTable, Scope, ScopeKind, one_line
from trace_instrument.locate.owned import owned_ids, template_table
from trace_instrument.locate.recognize import Recognition
from trace_instrument.model import ContextIssue, Edit, EditKind, NameIssue, Point, Reader, Reason, Relations
from trace_instrument.spec.code import PLACEHOLDER

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_NESTED = (*_FUNCTIONS, ast.ClassDef, ast.Lambda)
_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")


@dataclass(eq=False)
class _Piece:
    """One edit's code: in the file (a recognised block) or where apply would put it (planned)."""

    point: Point
    edit: Edit
    owner: ast.AST  # the def, class or module it runs in
    stmts: Sequence[ast.stmt]  # its statements (a swapped expression: the statement holding it)
    own: frozenset[int]  # ids of the nodes that are its code (captured business code left out)
    position: ast.stmt  # a real statement: where the code is, or the one it goes next to
    placement: Placement | None = None  # planned: where apply would put it
    expr: ast.expr | None = None  # a swapped expression (evaluated in `stmts[0]`)

    @property
    def planned(self) -> bool:
        return self.placement is not None

    @property
    def line(self) -> int:
        """Its first line in the file (planned: the line its anchor is on)."""
        return self.placement.line if self.placement is not None else self.position.lineno

    def node_line(self, node: ast.AST) -> int:
        """A node's line in the file (planned code is not in it: the piece's line)."""
        return self.line if self.planned else getattr(node, "lineno", self.line)

    @functools.cached_property
    def reads(self) -> list[tuple[ast.AST, ast.stmt, ast.AST]]:
        """(node, the statement evaluating it, the def or module that runs it) for its own code."""
        return list(_reads(self))

    @functools.cached_property
    def stores(self) -> tuple[tuple[str, str], ...]:
        """(object, attribute) of every attribute its code sets, `setattr(obj, "A", ...)` included."""
        return tuple(_stores(self))

    @functools.cached_property
    def bound(self) -> list[str]:
        """Names its code binds in the scope it runs in, in order."""
        return _names_bound(self)


@dataclass
class _Findings:
    names: dict[str, list[NameIssue]] = field(default_factory=dict)
    context: dict[str, list[ContextIssue]] = field(default_factory=dict)

    def name(self, point: Point, issue: NameIssue) -> None:
        found = self.names.setdefault(point.id, [])
        if all((i.name, i.problem) != (issue.name, issue.problem) for i in found):
            found.append(issue)

    def ctx(self, point: Point, issue: ContextIssue) -> None:
        found = self.context.setdefault(point.id, [])
        if all((i.subject, i.problem) != (issue.subject, issue.problem) for i in found):
            found.append(issue)


class ContextChecks:
    """The control-flow judgement for every point of one file, recognised or planned."""

    def __init__(
        self,
        index: FileIndex,
        recognition: Recognition,
        table: NameTable,
        relations: Relations,
        classes: ClassAttributes | None,
        imported: dict[str, frozenset[str]],
        planned: Sequence[Placement] = (),
        focus: frozenset[str] | None = None,
    ):
        """`imported`: point id -> the names its code imports (tracing names, declared imports);
        `planned`: where apply would put the points that are not in the file yet; `classes`: what the
        file's classes set (None: attributes are not judged); `focus`: the points whose findings are
        asked for (None: all), so only the code running with theirs is judged."""
        self.index = index
        self.table = table
        self.relations = relations
        self.classes = classes
        self.imported = imported
        self.pieces = [*_present(recognition, index), *(_planned(p, index) for p in planned)]
        self._piece_of_node = {n: piece for piece in self.pieces if not piece.planned for n in piece.own}
        # statements of planned code (not in the file): the piece they belong to
        self._planned_of = {
            id(stmt): piece
            for piece in self.pieces
            if piece.planned
            for top in piece.stmts
            for stmt in statements([top], into_definitions=True)
        }
        self._flows: dict[int, Flow] = {}
        self._planned_bound: dict[int, frozenset[str]] = {}
        self._made: dict[int, frozenset[str]] = {}  # a def's id -> the items its with blocks write
        self._scopes: dict[int, Scope | None] = {}  # a def's id -> its name-table scope
        self._findings: _Findings | None = None
        self._focus = focus

    def name_issues(self, point: Point) -> list[NameIssue]:
        """Locals the point's code reads that may be unassigned where it reads them."""
        return list(self._judged().names.get(point.id, []))

    def context_issues(self, point: Point) -> list[ContextIssue]:
        """What the point's code must make true on every path, or read after a block, and may not."""
        return list(self._judged().context.get(point.id, []))

    def flow(self, owner: ast.AST) -> Flow:
        """The flow through a def, class or module, with the planned pieces in it, and the facts the
        points' declarations need (`must_run`: the code started; `after_block`: a block finished)."""
        if id(owner) not in self._flows:
            overlay = Overlay()
            markers: dict[int, str] = {}
            exits: dict[int, str] = {}
            for piece in self.pieces:
                if piece.owner is not owner:
                    continue
                if piece.placement is not None:
                    _put(overlay, piece, piece.placement)
                if piece.point.must_run and piece.stmts:
                    markers[id(piece.stmts[0])] = _ran(piece)
                for index, block in enumerate(piece.point.after_blocks):
                    for stmt in self._blocks_like(block.stmts[0], owner):
                        exits[id(stmt)] = _finished(piece.point, index)
            self._flows[id(owner)] = Flow(owner, overlay, markers, exits)
        return self._flows[id(owner)]

    def _blocks_like(self, pattern: ast.stmt, owner: ast.AST) -> list[ast.stmt]:
        """Statements of the owner's own code whose header matches a block pattern."""
        sites = self._sites_in(owner)
        return [s.node for s in sites if type(s.node) is type(pattern) and Matcher().statement(pattern, s.node)]

    # -- the judgement ----------------------------------------------------------------------------

    def _judged(self) -> _Findings:
        if self._findings is None:
            findings = _Findings()
            focus = self._focus
            owners = {id(p.owner) for p in self.pieces if focus is None or p.point.id in focus}
            for piece in (p for p in self.pieces if id(p.owner) in owners):
                self._judge_reads(piece, findings)
                self._judge_setup(piece, findings)
                if piece.point.must_run or piece.point.after_blocks:
                    self._judge_declared(piece, findings)
            self._findings = findings
        return self._findings

    def _judge_reads(self, piece: _Piece, found: _Findings) -> None:
        """Each read of the piece's code that needs what holds where it runs (the flow is made only
        for functions where some read does)."""
        for node, stmt, owner in piece.reads:
            if not isinstance(owner, (*_FUNCTIONS, ast.Module)):
                continue
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                if self._needs_flow(piece, node, owner):
                    state = self.flow(owner).before(stmt)
                    if state is not None:
                        self._judge_name(piece, node, stmt, owner, state, found)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                self._judge_attribute(piece, node, stmt, owner, found)
            read = item_read(node)
            if read is not None and item_fact(*read) in self._products(owner):
                state = self.flow(owner).before(stmt)
                if state is not None:
                    self._judge_item(piece, node, read, owner, state, found)

    def _needs_flow(self, piece: _Piece, node: ast.Name, owner: ast.AST) -> bool:
        """A name read needs the flow when it is a local of its function that is not a parameter
        (a parameter is bound on every path unless the function deletes it)."""
        if not self._local(piece, node, owner):
            return False
        scope = self._scope(owner)
        bindings = scope.bindings.get(node.id, []) if scope is not None else []
        kinds = {b.kind for b in bindings}
        return not (kinds and BindingKind.PARAMETER in kinds and BindingKind.DELETION not in kinds)

    def _products(self, owner: ast.AST) -> frozenset[str]:
        """The items the `with` blocks of a function (planned code's too) write when they exit."""
        if id(owner) not in self._made:
            blocks = [s.node for s in self._sites_in(owner) if isinstance(s.node, (ast.With, ast.AsyncWith))]
            blocks += [
                s
                for p in self.pieces
                if p.planned and p.owner is owner
                for top in p.stmts
                for s in statements([top], into_definitions=True)
                if isinstance(s, (ast.With, ast.AsyncWith))
            ]
            self._made[id(owner)] = frozenset(f for b in blocks for f in with_products(b))
        return self._made[id(owner)]

    def _sites_in(self, owner: ast.AST) -> list[Site]:
        return list(self.index.sites_in(owner)) if not isinstance(owner, ast.Module) else list(self.index.sites)

    def _judge_name(
        self, piece: _Piece, node: ast.Name, stmt: ast.stmt, owner: ast.AST, state: frozenset[str], found: _Findings
    ) -> None:
        """A local read where it may not be assigned yet: whose binding does not reach it?"""
        name = node.id
        if f"n:{name}" in state or not self._local(piece, node, owner):
            return
        line = piece.node_line(node)
        binders = self._binders(name, owner)
        business = self._business_bindings(name, owner)
        if binders and not business:
            for binder, binder_line in binders:
                issue = self._not_reaching(binder, binder_line, name, stmt, line, reader=piece)
                found.ctx(binder.point, issue)
            others = [b for b, _ in binders if b.point is not piece.point]
            if others:
                by = ", ".join(dict.fromkeys(b.point.id for b in others))
                unset = NameIssue(name, line, Reason.UNBOUND_NAME, by, others[0].line, relation="set up by")
                found.name(piece.point, unset)
            return
        if not business:
            return  # bound nowhere in the function: the name checks say so
        binding_line, binding = business[0]
        imported = name in self.imported.get(piece.point.id, frozenset())
        problem = Reason.NAME_CONFLICT if imported else Reason.UNBOUND_NAME
        relation = "made local by" if imported else "assigned by"
        found.name(piece.point, NameIssue(name, line, problem, one_line(binding), binding_line, relation=relation))

    def _judge_attribute(
        self, piece: _Piece, node: ast.Attribute, stmt: ast.stmt, owner: ast.AST, found: _Findings
    ) -> None:
        """`self.A` read where point code of the same function sets `self.A`: set before, on every path;
        an attribute no point sets must be set by the class or its bases somewhere."""
        instance = instance_name(owner)
        if instance is None or dotted(node.value) != instance:
            return
        if node.attr not in self.relations.set_attributes:
            if self.classes is not None:
                self._judge_class_sets(piece, node, owner, found)
            return
        setters = [p for p in self.pieces if p.owner is owner and node.attr in _attributes_set(p, instance)]
        if not setters:
            return
        state = self.flow(owner).before(stmt)
        if state is None or f"a:{node.attr}" in state:
            return
        for setter in setters:
            subject = f"{instance}.{node.attr}"
            issue = self._not_reaching(setter, setter.line, subject, stmt, piece.node_line(node), reader=piece)
            found.ctx(setter.point, issue)

    def _judge_class_sets(self, piece: _Piece, node: ast.Attribute, method: ast.AST, found: _Findings) -> None:
        """A business attribute the code reads on self: the class, or one of its bases, sets it. A
        method (or class) the point defines is judged as inline code is: it runs when called, and
        then raises as surely. Not judged: attributes the class's business code reads too (the
        tracing is no worse off than the code around it)."""
        owner = self._class_of(piece, method)
        assert self.classes is not None  # (judged only with them)
        if owner is not None and piece.planned and id(owner) in piece.own:
            self.classes.learn(owner, piece.edit.template.text)  # a class the point inserts: its own text
        # what the class's own code does first: its bases may be in other files, parsed when asked
        if owner is None or self.classes.sets_itself(owner, node.attr) is not False:
            return
        if id(owner) not in piece.own and self.classes.read_by(owner, node.attr, self._piece_of_node):
            return  # (a class the point defines is no business code)
        if self.classes.sets(owner, node.attr) is not False:
            return  # set somewhere, or cannot tell
        issue = NameIssue(f"self.{node.attr}", piece.node_line(node), Reason.UNSET_ATTRIBUTE, owner.name)
        found.name(piece.point, issue)

    def _class_of(self, piece: _Piece, method: ast.AST) -> ast.ClassDef | None:
        """The class a method is defined in: a class of the point's own code holding it, else the
        class the point's code goes in (a def of planned code), else the file's class around it."""
        inserted = next((c for c in _own_classes(piece) if any(m is method for m in methods(c.body))), None)
        if inserted is not None:
            return inserted
        if isinstance(piece.owner, ast.ClassDef) and method is not piece.owner:
            return piece.owner
        try:
            ancestors = self.index.site(method).ancestors if isinstance(method, ast.stmt) else ()
        except KeyError:
            return None
        parent = ancestors[-1] if ancestors else None
        return parent if isinstance(parent, ast.ClassDef) else None

    def _judge_item(
        self,
        piece: _Piece,
        node: ast.AST,
        read: tuple[str, str],
        owner: ast.AST,
        state: frozenset[str],
        found: _Findings,
    ) -> None:
        """`S[K]` read where a `with` block of the function writes it on exit: only after that block."""
        fact = item_fact(*read)
        if fact in state:
            return
        producers = [w for w in self.flow(owner).walked if isinstance(w, (ast.With, ast.AsyncWith))]
        producers = [w for w in producers if fact in with_products(w)]
        around = [w for a in self._ancestors(piece.position, owner) for w in producers if a is w]
        block = around[-1] if around else producers[0]
        why = (
            "inside that block it reads the value before the block writes it (missing, or the one before)"
            if around
            else "that block does not run on every path before it"
        )
        subject = f"{read[0]}[{read[1]!r}]"
        issue = ContextIssue(
            subject, piece.node_line(node), Reason.BEFORE_BLOCK_EXIT, one_line(block), block.lineno, why
        )
        found.ctx(piece.point, issue)

    def _judge_declared(self, piece: _Piece, found: _Findings) -> None:
        """What the point declares: `must_run` (on every normal way out), `after_block` (after each such block)."""
        flow = self.flow(piece.owner)
        if piece.point.must_run and not _holds(flow.exit, _ran(piece)):
            statement, statement_line, why = self._culprit(piece, None, 0, _ran(piece))
            subject = "must_run"
            found.ctx(
                piece.point, ContextIssue(subject, piece.line, Reason.NOT_ON_EVERY_PATH, statement, statement_line, why)
            )
        first = piece.stmts[0] if piece.stmts else None
        state = flow.before(first) if first is not None else None
        subject = "the value of its after_block"
        for index, block in enumerate(piece.point.after_blocks):
            header = one_line(block.stmts[0])
            blocks = self._blocks_like(block.stmts[0], piece.owner)
            if not blocks:
                why = "no such block is in its function"
                issue = ContextIssue(subject, piece.line, Reason.BEFORE_BLOCK_EXIT, header, 0, why)
                found.ctx(piece.point, issue)
            elif state is not None and _finished(piece.point, index) not in state:
                around = [b for a in self._ancestors(piece.position, piece.owner) for b in blocks if a is b]
                at = around[-1] if around else blocks[0]
                why = "the code is inside that block" if around else "that block does not run on every path before it"
                issue = ContextIssue(subject, piece.line, Reason.BEFORE_BLOCK_EXIT, one_line(at), at.lineno, why)
                found.ctx(piece.point, issue)

    def _judge_setup(self, piece: _Piece, found: _Findings) -> None:
        """What the piece sets up for code elsewhere must hold on every way out, or at every call."""
        owner = piece.owner
        flow = self.flow(owner)
        lasting = isinstance(owner, ast.ClassDef) or (isinstance(owner, _FUNCTIONS) and owner.name == "__init__")
        if lasting:
            class_body = isinstance(owner, ast.ClassDef)
            for name in _attributes_set(piece, flow.instance, class_body=class_body):
                readers = self.relations.attribute_readers(name, piece.point.id, getattr(owner, "name", ""))
                if readers and not _holds(flow.exit, f"a:{name}"):
                    subject = name if class_body else f"{flow.instance}.{name}"
                    found.ctx(piece.point, self._not_at_exit(piece, subject, f"a:{name}", readers[0]))
        elif isinstance(owner, _FUNCTIONS) and flow.instance is not None:
            for name in _attributes_set(piece, flow.instance):
                for reader in self.relations.attribute_readers(name, piece.point.id, owner.name):
                    for call in self._calls_of(flow, reader.function):
                        if not _holds(flow.before(call), f"a:{name}"):
                            subject = f"{flow.instance}.{name}"
                            caller = self._planned_of.get(id(call))
                            at = caller.position if caller is not None else call
                            line = caller.line if caller is not None else call.lineno
                            issue = self._not_reaching(piece, piece.line, subject, at, line, caller=reader)
                            found.ctx(piece.point, issue)
        if isinstance(owner, ast.Module):
            for name in piece.bound:
                readers = self.relations.name_readers(piece.point.file, name, piece.point.id)
                if readers and not _holds(flow.exit, f"n:{name}"):
                    found.ctx(piece.point, self._not_at_exit(piece, name, f"n:{name}", readers[0]))

    # -- messages -----------------------------------------------------------------------------------

    def _not_reaching(
        self,
        binder: _Piece,
        binder_line: int,
        subject: str,
        target: ast.stmt,
        target_line: int,
        reader: _Piece | None = None,
        caller: Reader | None = None,
    ) -> ContextIssue:
        """`binder` does not run on every path to `target`: a reader's statement, or a call of the
        function that reads (`caller`)."""
        # planned code is not in the file: its control context is that of where it goes
        where_read = reader.position if reader is not None and reader.planned else target
        statement, statement_line, why = self._culprit(binder, where_read, target_line)
        if caller is not None:
            who, where = caller.point, f"{caller.scope}, called at line {target_line}"
        elif reader is not None and reader.point is not binder.point:
            who, where = reader.point.id, f"line {target_line}"
        else:
            who, where = binder.point.id, f"its own code, line {target_line}"
        return ContextIssue(subject, binder_line, Reason.NOT_ON_EVERY_PATH, statement, statement_line, why, who, where)

    def _not_at_exit(self, binder: _Piece, subject: str, fact: str, reader: Reader) -> ContextIssue:
        statement, statement_line, why = self._culprit(binder, None, 0, fact)
        where = reader.scope if reader.file == binder.point.file else f"{reader.scope} in {reader.file}"
        return ContextIssue(
            subject, binder.line, Reason.NOT_ON_EVERY_PATH, statement, statement_line, why, reader.point, where
        )

    def _culprit(
        self, binder: _Piece, target: ast.stmt | None, target_line: int, fact: str = ""
    ) -> tuple[str, int, str]:
        """What keeps the binder from running on every path to `target` (None: the way out of its
        function): an enclosing statement the target is not in that may skip it, else an early
        `return` (or `break`, `continue`), else the target coming first."""
        owner = binder.owner
        flow = self.flow(owner)
        mine = self._ancestors(binder.position, owner)
        theirs = self._ancestors(target, owner) if target is not None else []
        shared = {id(a) for a in theirs}
        for ancestor, inner in zip(mine, [*mine[1:], binder.position]):
            if id(ancestor) in shared:
                # in the same statement: a try whose handler or finally reads what its body sets up
                why = _how_try_cuts(ancestor, inner, _inner_of(theirs, ancestor, target))
            else:
                why = _how_it_skips(ancestor, inner)
            if why:
                return _header(ancestor), _line(ancestor), why
        for stmt in flow.walked:
            if not isinstance(stmt, (ast.Return, ast.Break, ast.Continue)) or _within(stmt, binder):
                continue
            if target is not None and stmt.lineno >= target_line:
                continue
            state = flow.before(stmt)
            if state is not None and (not fact or fact not in state):
                return one_line(stmt), stmt.lineno, "leaves before it runs"
        if target is not None and binder.line > target_line:
            return "", target_line, f"the code at line {target_line} that reads it runs first"
        return "", 0, "does not run on every path to where it is read"

    # -- the file's code ---------------------------------------------------------------------------

    def _ancestors(self, stmt: ast.stmt, owner: ast.AST) -> list[ast.AST]:
        """Compound statements and clauses around a statement of the file, inside `owner`, outermost first."""
        try:
            chain = list(self.index.site(stmt).ancestors)
        except KeyError:
            return []  # a statement of a planned template: not in the file
        if owner in chain:
            chain = chain[chain.index(owner) + 1 :]
        return chain

    def _scope(self, owner: ast.AST) -> Scope | None:
        """The name-table scope of a def (or the module), looked up once."""
        if id(owner) not in self._scopes:
            module = isinstance(owner, ast.Module)
            self._scopes[id(owner)] = self.table.module if module else self.table.scope_of_def(owner)
        return self._scopes[id(owner)]

    def _local(self, piece: _Piece, node: ast.Name, owner: ast.AST) -> bool:
        """Does the name, read by the piece's code, mean a variable of `owner`'s own scope?"""
        scope = self._scope(owner)
        if scope is None or scope.kind is ScopeKind.CLASS:
            return False
        if piece.planned:
            return _planned_local(node.id, scope, piece, self._planned_names(piece.owner))
        start = self.table.scope_of(node)
        while start is not None and start is not scope and start.kind is ScopeKind.COMPREHENSION:
            if start.binds(node.id):
                return False
            start = start.parent
        return start is scope and scope.binds(node.id) and self.table.resolve(node.id, scope) is scope

    def _planned_names(self, owner: ast.AST) -> frozenset[str]:
        """Names the planned pieces of a def, class or module bind there."""
        if id(owner) not in self._planned_bound:
            names = {n for p in self.pieces if p.planned and p.owner is owner for n in p.bound}
            self._planned_bound[id(owner)] = frozenset(names)
        return self._planned_bound[id(owner)]

    def _binders(self, name: str, owner: ast.AST) -> list[tuple[_Piece, int]]:
        """Point code binding the name in the owner's scope (in the file, or planned), with its line."""
        found: list[tuple[_Piece, int]] = []
        scope = self._scope(owner)
        for binding in scope.bindings.get(name, []) if scope is not None else []:
            piece = self._piece_of_node.get(id(binding.node))
            if piece is not None:
                found.append((piece, binding.line))
        found += [(p, p.line) for p in self.pieces if p.planned and p.owner is owner and name in p.bound]
        return found

    def _business_bindings(self, name: str, owner: ast.AST) -> list[tuple[int, ast.stmt]]:
        scope = self._scope(owner)
        return [
            (b.line, b.stmt)
            for b in (scope.bindings.get(name, []) if scope is not None else [])
            if id(b.node) not in self._piece_of_node and b.stmt is not None and b.at_run_time
        ]

    def _calls_of(self, flow: Flow, function: str) -> list[ast.stmt]:
        """Statements of the flow's body that call `<x>.function(...)` themselves."""
        if not function:
            return []
        return [s for s in flow.walked if any(_calls(n, function) for n in _evaluated(s))]


# -- the pieces --------------------------------------------------------------------------------------


def _present(recognition: Recognition, index: FileIndex) -> Iterator[_Piece]:
    for state in recognition.states.values():
        for block in state.blocks:
            if not block.top:
                continue
            own = owned_ids(block)
            owner = index.enclosing_scope(block.top[0])
            swapped = block.edit.kind is EditKind.REPLACE_EXPR
            stmts = [block.top[0]] if swapped else block.top
            yield _Piece(state.point, block.edit, owner, stmts, own, block.top[0], expr=block.expr if swapped else None)


def _planned(placement: Placement, index: FileIndex) -> _Piece:
    edit = placement.edit
    owner = placement.scope_node if placement.scope_node is not None else index.tree
    template = list(edit.template.stmts)
    if edit.kind is EditKind.REPLACE_EXPR:
        holder = placement.anchored[0]
        expr = template[0].value if isinstance(template[0], ast.Expr) else None
        own = frozenset(id(n) for n in ast.walk(template[0]))
        return _Piece(placement.point, edit, owner, [holder], own, holder, placement, expr)
    position = placement.region[0] if placement.region else placement.neighbor
    assert position is not None  # an insert goes next to a statement; a rewrite replaces some
    own = frozenset(
        id(n) for s in template for n in ast.walk(s) if not (isinstance(n, ast.Name) and PLACEHOLDER.match(n.id))
    )
    return _Piece(placement.point, edit, owner, template, own, position, placement)


def _put(overlay: Overlay, piece: _Piece, placement: Placement) -> None:
    """Put a planned piece in its function's overlay, where apply would put it."""
    if piece.expr is not None:
        return  # a swapped expression changes no statement
    if placement.region:
        overlay.rewrite(placement.region, placement.anchored, piece.stmts)
    elif placement.neighbor is not None:
        overlay.insert(placement.neighbor, piece.stmts, after=placement.after)


def _reads(piece: _Piece) -> Iterator[tuple[ast.AST, ast.stmt, ast.AST]]:
    """(node, the statement evaluating it, the def or module that statement runs in) for each
    node of the piece's own code."""
    if piece.expr is not None:
        for node in ast.walk(piece.expr):
            if piece.planned or id(node) in piece.own:
                yield node, piece.stmts[0], piece.owner
        return
    for stmt in piece.stmts:
        yield from _statement_reads(stmt, piece.owner, piece.own)


def _statement_reads(
    stmt: ast.stmt, owner: ast.AST, own: frozenset[int]
) -> Iterator[tuple[ast.AST, ast.stmt, ast.AST]]:
    for node in _evaluated(stmt):
        if id(node) in own:
            yield node, stmt, owner
    inner = stmt if isinstance(stmt, _FUNCTIONS) else owner
    if isinstance(stmt, ast.ClassDef):
        inner = stmt
    for child in child_statements(stmt):
        yield from _statement_reads(child, inner, own)


def _evaluated(stmt: ast.stmt) -> Iterator[ast.AST]:
    """The expression nodes a statement evaluates itself: not its nested statements, not the
    bodies of lambdas (which run later)."""
    pending: list[ast.AST] = []
    for name, value in ast.iter_fields(stmt):
        if name == "handlers":
            pending.extend(h.type for h in value if isinstance(h, ast.ExceptHandler) and h.type is not None)
        elif name == "cases":
            pending.extend(c.guard for c in value if c.guard is not None)
        elif name not in _BLOCKS and not (isinstance(stmt, _FUNCTIONS) and name == "args"):
            pending.extend(v for v in (value if isinstance(value, list) else [value]) if isinstance(v, ast.AST))
    while pending:
        node = pending.pop()
        yield node
        if not isinstance(node, ast.Lambda):
            pending.extend(ast.iter_child_nodes(node))


def _own_classes(piece: _Piece) -> Iterator[ast.ClassDef]:
    """The classes the piece's own code defines (at any depth)."""
    for top in piece.stmts:
        for node in ast.walk(top):
            if isinstance(node, ast.ClassDef) and id(node) in piece.own:
                yield node


def _ran(piece: _Piece) -> str:
    return f"p:{piece.point.id}:{piece.edit.rank}"


def _finished(point: Point, index: int) -> str:
    return f"b:{point.id}:{index}"


def _attributes_set(piece: _Piece, instance: str | None, *, class_body: bool = False) -> list[str]:
    """Attributes the piece's code sets on the instance (`self.A = ...`, `setattr(self, "A", ...)`),
    in the order the code sets them; in a class body, the names it defines there."""
    if class_body:
        return piece.bound
    return list(dict.fromkeys(name for holder, name in piece.stores if holder == instance))


def _stores(piece: _Piece) -> Iterator[tuple[str, str]]:
    for node, _stmt, _owner in piece.reads:
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            holder = dotted(node.value)
            if holder is not None:
                yield holder, node.attr
        elif _is_setattr(node):
            assert isinstance(node, ast.Call)
            holder, argument = dotted(node.args[0]), node.args[1]
            assert isinstance(argument, ast.Constant)
            if holder is not None:
                yield holder, str(argument.value)


def _is_setattr(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "setattr"
        and len(node.args) >= 2
        and isinstance(node.args[1], ast.Constant)
        and isinstance(node.args[1].value, str)
    )


def _names_bound(piece: _Piece) -> list[str]:
    """Names the piece's code binds in the scope it runs in (its statements and their blocks), in
    the order it binds them."""
    names: dict[str, None] = {}
    pending: list[ast.AST] = list(reversed(piece.stmts))
    while pending:
        node = pending.pop()
        if isinstance(node, (*_FUNCTIONS, ast.ClassDef)):
            if id(node) in piece.own:
                names[node.name] = None
            continue
        if isinstance(node, (ast.Lambda, *COMPREHENSIONS)):
            continue
        if id(node) in piece.own:
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names[node.id] = None
            elif isinstance(node, ast.alias):
                names[node.asname or node.name.split(".")[0]] = None
        pending.extend(reversed(list(ast.iter_child_nodes(node))))
    return [n for n in names if not PLACEHOLDER.match(n)]


def _planned_local(name: str, scope: Scope, piece: _Piece, planned_names: frozenset[str]) -> bool:
    """A name a planned template reads is local to its function when the function binds it, or
    the template or another planned piece there does (the template's own comprehensions aside)."""
    template = template_table(tuple(piece.edit.template.stmts))
    return scope.binds(name) or template.module.binds(name) or name in planned_names


def _holds(state: State, fact: str) -> bool:
    return state is None or fact in state


def _calls(node: ast.AST, function: str) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == function


def _within(stmt: ast.stmt, piece: _Piece) -> bool:
    return any(stmt is n for s in piece.stmts for n in ast.walk(s))


def _line(node: ast.AST) -> int:
    """A statement's or clause's line (a `case` clause has none of its own: its pattern's)."""
    if isinstance(node, ast.match_case):
        return node.pattern.lineno
    return getattr(node, "lineno", 0)


def _header(node: ast.AST) -> str:
    if isinstance(node, ast.ExceptHandler):
        kind = f" {ast.unparse(node.type)}" if node.type is not None else ""
        return f"except{kind}:"
    if isinstance(node, ast.match_case):
        return f"case {ast.unparse(node.pattern)}:"
    assert isinstance(node, ast.stmt)
    return one_line(node)


def _how_it_skips(ancestor: ast.AST, inner: ast.AST) -> str:
    """How an enclosing statement or clause may keep `inner` (in it) from running ("": it never does)."""
    if isinstance(ancestor, ast.If):
        in_body = inner in ancestor.body
        truth = constant_truth(ancestor.test)
        if truth is not None:  # known without running it: the branch always runs, or never
            return "" if truth == in_body else "never runs it (its test is known without running it)"
        return "may skip it (when its test is false)" if in_body else "may skip it (when its test is true)"
    if isinstance(ancestor, (ast.For, ast.AsyncFor, ast.While)):
        if inner in ancestor.orelse:
            return "may skip it (a `break` skips the loop's else)"
        if isinstance(ancestor, ast.While) and constant_truth(ancestor.test):
            return ""
        return "may skip it (the loop may run no time at all)"
    if type(ancestor).__name__ in ("Try", "TryStar"):  # (TryStar: Python 3.11 on)
        assert isinstance(ancestor, ast.stmt)
        return _how_try_skips(ancestor, inner)
    if isinstance(ancestor, ast.ExceptHandler):
        return "may skip it (it runs only when that exception is raised)"
    if isinstance(ancestor, (ast.With, ast.AsyncWith)):
        return "may skip it: the block swallows an exception raised before it" if suppresses(ancestor) else ""
    if isinstance(ancestor, ast.match_case):
        return "may skip it (it runs for that case only)"
    return ""


def _how_try_skips(statement: ast.stmt, inner: ast.AST) -> str:
    """A `try` skips code in its body when a handler catches an exception raised before it and
    carries on; its else runs only without an exception; its finally always runs."""
    body: list[ast.stmt] = getattr(statement, "body", [])
    handlers: list[ast.ExceptHandler] = getattr(statement, "handlers", [])
    if inner in body:
        carrying_on = [h for h in handlers if _completes(h.body)]
        if not carrying_on:
            return ""
        what = ast.unparse(carrying_on[0].type) if carrying_on[0].type is not None else ""
        return (
            f"may skip it: an exception before it is caught by `except{' ' + what if what else ''}:` "
            f"(line {carrying_on[0].lineno}), which carries on"
        )
    if inner in getattr(statement, "orelse", []):
        return "may skip it (its else runs only when no exception was raised)"
    return ""


def _inner_of(chain: list[ast.AST], ancestor: ast.AST, target: ast.stmt | None) -> ast.AST | None:
    """What of `ancestor` holds the target: the next statement or clause in the target's chain."""
    for outer, inner in zip(chain, [*chain[1:], target]):
        if outer is ancestor:
            return inner
    return None


def _how_try_cuts(statement: ast.AST, binder: ast.AST, reader: ast.AST | None) -> str:
    """Code in a try's body does not run before its handlers and finally when an exception is raised
    before it: a reader there may find it not set up."""
    if type(statement).__name__ not in ("Try", "TryStar") or reader is None:
        return ""
    if binder not in getattr(statement, "body", []):
        return ""
    if reader in getattr(statement, "finalbody", []):
        return "may skip it: an exception raised before it still runs the finally block that reads it"
    if isinstance(reader, ast.ExceptHandler):
        return (
            f"may skip it: an exception raised before it goes to the except clause (line {reader.lineno}) that reads it"
        )
    return ""


def _completes(body: list[ast.stmt]) -> bool:
    """Can a handler's body finish normally, carrying on after the try? (its last statement says)"""
    return not isinstance(body[-1], (ast.Raise, ast.Return, ast.Continue, ast.Break))
