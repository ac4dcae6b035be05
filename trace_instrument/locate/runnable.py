"""Can a point's code run where it stands? Every name it uses or binds, checked.

A point's code means something by each name it uses: a tracing name means the
runtime package's function, `time` means the `time` module the point imports,
`batch` means whatever the business code around it calls `batch`. Its code is
runnable when each name resolves, through the enclosing scopes, to bindings
that give it that meaning; and it is harmless when the names it binds are not
bound or used by the business code sharing its scope.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from trace_instrument.locate.anchors import Placement
from trace_instrument.locate.attributes import ClassAttributes
from trace_instrument.locate.context import ContextChecks
from trace_instrument.locate.names import (
    BUILTINS,
    COMPREHENSIONS,
    Binding,
    BindingKind,
    NameTable,
    Scope,
    ScopeKind,
    Use,
    one_line,
)
from trace_instrument.locate.owned import instrumentation_node_ids, owned_nodes, template_table
from trace_instrument.locate.recognize import Recognition
from trace_instrument.model import TRACING_MODULE, TRACING_NAMES, Edit, NameIssue, Point, Reason, Relations
from trace_instrument.spec.code import PLACEHOLDER, placeholders

Planned = frozenset[tuple[int, str]]  # (id of a scope's node, name) bound by points being placed


@dataclass(frozen=True)
class Expectation:
    """What a point's code means by a name it imports."""

    name: str
    module: str
    member: str | None  # None: `import module`
    text: str  # the import statement, e.g. "from verl.utils.tracing import trace_flow"

    def met_by(self, binding: Binding) -> bool:
        return binding.imports(self.module, self.member)


@functools.lru_cache(maxsize=4096)  # one entry per point or edit of the catalog
def expectations(point: Point) -> dict[str, Expectation]:
    """The names a point's code imports (tracing names and its declared imports), by name."""
    wanted: dict[str, Expectation] = {}
    for name in sorted(point.tracing_names):
        wanted[name] = Expectation(name, TRACING_MODULE, name, f"from {TRACING_MODULE} import {name}")
    for text in point.imports:
        stmt = ast.parse(text).body[0]
        assert isinstance(stmt, (ast.Import, ast.ImportFrom))
        for alias in stmt.names:
            if isinstance(stmt, ast.Import):
                bound = alias.asname or alias.name.split(".")[0]
                wanted[bound] = Expectation(bound, alias.name if alias.asname else bound, None, text)
            else:
                bound = alias.asname or alias.name
                wanted[bound] = Expectation(bound, stmt.module or "", alias.name, text)
    return wanted


# expressions that open a scope of their own
_OWN_SCOPES = (ast.Lambda, *COMPREHENSIONS)


# -- the checks ----------------------------------------------------------------------------------


class PointNames:
    """Name checks for the points of one file."""

    def __init__(
        self, table: NameTable, recognition: Recognition, relations: Relations, classes: ClassAttributes | None
    ):
        """`classes`: what the file's classes set (None: attributes read on self are not judged)."""
        self.table = table
        self.recognition = recognition
        self.relations = relations
        self.classes = classes
        self.owned = instrumentation_node_ids(recognition)
        self._checks: ContextChecks | None = None

    def checks(
        self, points: Sequence[Point], planned: Sequence[Placement] = (), focus: frozenset[str] | None = None
    ) -> ContextChecks:
        """The control-flow checks of the file's points (locate/context.py), with `planned`: where
        apply would put the points not in the file yet, and `focus`: the points whose findings are
        asked for (the plain ones are made once)."""
        plain = not planned and focus is None
        if plain and self._checks is not None:
            return self._checks
        imported = {p.id: frozenset(expectations(p)) for p in points}
        index = self.recognition.index
        made = ContextChecks(
            index, self.recognition, self.table, self.relations, self.classes, imported, planned, focus
        )
        if plain:
            self._checks = made
        return made

    def issues(self, point: Point) -> list[NameIssue]:
        """Names the point's code uses or binds that would not mean, at run time, what it means."""
        wanted = expectations(point)
        found: dict[tuple[str, Reason], NameIssue] = {}
        # another point's code nested in this one's block (a point inside C1's try) is judged as its own
        others = frozenset(
            id(stmt)
            for other, state in self.recognition.states.items()
            if other != point.id
            for block in state.blocks
            for stmt in block.instrumentation
        )
        for block in self.recognition.states[point.id].blocks:
            takeover = taken_over(block.edit)
            for node in owned_nodes(block, others):
                if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load) and node.id in takeover:
                    continue
                for issue in self._node_issues(node, wanted):
                    found.setdefault((issue.name, issue.problem), issue)
        return sorted(found.values(), key=lambda i: (i.line, i.name))

    def hand_edited_imports(self, point: Point) -> list[NameIssue]:
        """The imports the point's hand-edited code needs and the module lacks (a merge can drop a
        drifted point's import as well as a present one's): only names the point's template imports."""
        state = self.recognition.states[point.id]
        wanted = expectations(point)
        found: dict[str, NameIssue] = {}
        stmts = [*state.marker_nodes, *(stmt for run in state.edited for stmt in run.own)]
        for node in (n for stmt in stmts for n in ast.walk(stmt)):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in wanted:
                scope = self.table.scope_of(node)
                for issue in self._use_issues(node, scope, wanted) if scope is not None else ():
                    if issue.problem is Reason.MISSING_IMPORT:
                        found.setdefault(issue.name, issue)
        return sorted(found.values(), key=lambda i: (i.line, i.name))

    def _node_issues(self, node: ast.AST, wanted: dict[str, Expectation]) -> Iterable[NameIssue]:
        if isinstance(node, ast.Name):
            scope = self.table.scope_of(node)
            if scope is None:
                return ()
            if isinstance(node.ctx, ast.Load):
                return self._use_issues(node, scope, wanted)
            return self._binding_issues(node.id, node.lineno, scope)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            scope = self.table.scope_of(node)
            outer = scope.parent if scope is not None else None
            return self._binding_issues(node.name, node.lineno, outer) if outer is not None else ()
        if isinstance(node, ast.alias) and node.name != "*":  # an import in the point's code binds its name
            scope = self.table.scope_of(node)
            name = node.asname or node.name.split(".")[0]
            return self._binding_issues(name, node.lineno, scope) if scope is not None else ()
        if isinstance(node, (ast.MatchAs, ast.MatchStar, ast.ExceptHandler)) and node.name is not None:
            scope = self.table.scope_of(node)
            return self._binding_issues(node.name, node.lineno, scope) if scope is not None else ()
        return ()

    def _use_issues(self, node: ast.Name, scope: Scope, wanted: dict[str, Expectation]) -> list[NameIssue]:
        name = node.id
        # an import under `if TYPE_CHECKING:` binds nothing when the code runs
        bindings = [
            b for b in self.table.bindings_of(name, scope) if b.kind is not BindingKind.GLOBAL and b.at_run_time
        ]
        expected = wanted.get(name)
        if expected is not None:
            if not bindings:
                return [NameIssue(name, node.lineno, Reason.MISSING_IMPORT, expected=expected.text)]
            wrong = [b for b in bindings if not expected.met_by(b)]
            return [_conflict(name, node.lineno, wrong[0], expected.text)] if wrong else []
        if not bindings:
            return [] if name in BUILTINS else [NameIssue(name, node.lineno, Reason.UNBOUND_NAME)]
        ours = [b for b in bindings if id(b.node) in self.owned]
        theirs = [b for b in bindings if id(b.node) not in self.owned]
        return [_conflict(name, node.lineno, theirs[0])] if ours and theirs else []

    def _binding_issues(
        self, name: str, line: int, scope: Scope, replaced: frozenset[int] = frozenset()
    ) -> list[NameIssue]:
        """The point binds `name` in `scope`'s code: business code must neither bind the name in the
        scope the binding lands in, nor read it where the point's binding is what it would read.

        A binding lands in `scope` itself (Python makes an assigned name local to its function),
        unless business code there declares the name `global` or `nonlocal`: then the point would
        assign a variable the business code owns. `replaced`: nodes of business code a rewrite
        takes out (their bindings go with them).
        """
        declared = [b for b in scope.bindings.get(name, []) if b.kind in (BindingKind.GLOBAL, BindingKind.NONLOCAL)]
        if declared and scope.kind is not ScopeKind.MODULE:
            return [_conflict(name, line, declared[0])]
        owner = self.table.binding_scope(name, scope)
        theirs = [b for b in owner.bindings.get(name, []) if id(b.node) not in self.owned | replaced]
        if theirs:
            return [_conflict(name, line, theirs[0])]
        if owner.kind is ScopeKind.CLASS:
            return []  # class attributes are read through self, not as names
        for use in self.table.uses_in(name, owner):
            business = id(use.node) not in self.owned and id(use.node) not in replaced
            if business and self.table.would_resolve_to(name, use.scope, owner):
                code = one_line(use.stmt) if use.stmt is not None else name
                return [NameIssue(name, line, Reason.NAME_CONFLICT, code, use.node.lineno, relation="used by")]
        return []

    # -- before inserting: the template against the code around where it would go -------------

    def placement_issues(
        self, point: Point, stmts: Sequence[ast.stmt], placement: Placement, planned: Planned = frozenset()
    ) -> list[NameIssue]:
        """Names the template would use or bind wrongly, inserted where `placement` puts it.

        `planned` are (scope node id, name) pairs other points of this run bind (a
        requirement's variables, a helper function): they count as bound.
        """
        scope = self._expression_scope(placement) or self.scope_for(placement.scope_node)
        replaced = replaced_nodes(placement, stmts)
        takeover = taken_over(placement.edit)
        template = template_table(tuple(stmts))
        wanted = expectations(point)
        found: dict[tuple[str, Reason], NameIssue] = {}
        for name, uses in template.uses.items():
            if _is_placeholder(name):
                continue
            for use in uses:
                if template.resolve(name, use.scope) is not None:
                    continue  # the template binds it itself
                start = scope if use.scope is template.module else _function_view(scope)
                for issue in self._free_use(name, start, placement.line, wanted, planned, replaced):
                    found.setdefault((issue.name, issue.problem), issue)
        for name in template.local_names(template.module):
            if not _is_placeholder(name) and name not in takeover:
                for issue in self._binding_issues(name, placement.line, scope, replaced):
                    found.setdefault((issue.name, issue.problem), issue)
        return sorted(found.values(), key=lambda i: i.name)

    def planned_bindings(self, stmts: Sequence[ast.stmt], placement: Placement) -> Planned:
        """(scope node id, name) for every name a template binds where `placement` puts it."""
        template = template_table(tuple(stmts))
        scope = self.scope_for(placement.scope_node)
        return frozenset((id(scope.node), name) for name in template.local_names(template.module))

    def _expression_scope(self, placement: Placement) -> Scope | None:
        """A swapped expression runs where the one it replaces ran: inside a lambda or a
        comprehension, that scope (its parameters and loop variables are bound there)."""
        if placement.expr is None:
            return None
        pending: list[ast.AST] = [placement.expr]
        while pending:  # breadth first, not into a lambda or comprehension of the expression's own
            node = pending.pop(0)
            if isinstance(node, ast.Name):
                return self.table.scope_of(node)
            if not isinstance(node, _OWN_SCOPES):
                pending.extend(ast.iter_child_nodes(node))
        return None

    def scope_for(self, scope_node: ast.AST | None) -> Scope:
        """The scope a def or class opens (the module for anything else, and for None)."""
        if scope_node is None:
            return self.table.module
        return self.table.scope_of_def(scope_node) or self.table.module

    def _free_use(
        self,
        name: str,
        start: Scope,
        line: int,
        wanted: dict[str, Expectation],
        planned: Planned,
        replaced: frozenset[int],
    ) -> list[NameIssue]:
        bindings = [
            b
            for b in self.table.bindings_of(name, start)
            if b.kind is not BindingKind.GLOBAL and id(b.node) not in replaced
        ]
        expected = wanted.get(name)
        if expected is not None:
            # an import not there yet is added by apply at module level
            wrong = [b for b in bindings if not expected.met_by(b)]
            if wrong:
                return [_conflict(name, line, wrong[0], expected.text)]
            if not bindings and name in BUILTINS and self._builtin_users(name):
                use = self._builtin_users(name)[0]
                code = one_line(use.stmt) if use.stmt is not None else name
                return [NameIssue(name, line, Reason.NAME_CONFLICT, code, use.node.lineno, expected.text, "used by")]
            return []
        if not bindings:
            known = name in BUILTINS or self._planned_in_reach(name, start, planned)
            return [] if known else [NameIssue(name, line, Reason.UNBOUND_NAME)]
        ours = [b for b in bindings if id(b.node) in self.owned]
        theirs = [b for b in bindings if id(b.node) not in self.owned]
        return [_conflict(name, line, theirs[0])] if ours and theirs else []

    def _planned_in_reach(self, name: str, start: Scope, planned: Planned) -> bool:
        """Does a point of this run bind `name` in a scope code at `start` can see?"""
        scope: Scope | None = start
        first = True
        while scope is not None:
            visible = first or scope.kind is not ScopeKind.CLASS
            if visible and (id(scope.node), name) in planned:
                return True
            scope, first = scope.parent, False
        return False

    def _builtin_users(self, name: str) -> list[Use]:
        """Business code reading the builtin `name` (an added `import name` would change it)."""
        return [u for u in self.table.uses.get(name, ()) if self.table.resolve(name, u.scope) is None]


def replaced_nodes(placement: Placement, stmts: Sequence[ast.stmt]) -> frozenset[int]:
    """Nodes of business code a rewrite or an expression swap takes out (captured code stays)."""
    if placement.expr is not None:
        return frozenset(id(n) for n in ast.walk(placement.expr))
    kept: set[int] = set()
    for index, role in placeholders(tuple(stmts)):
        if index >= len(placement.anchored):
            continue
        anchored = placement.anchored[index]
        if role == "":
            kept.update(id(n) for n in ast.walk(anchored))
        elif role == "value" and (value := getattr(anchored, "value", None)) is not None:
            kept.update(id(n) for n in ast.walk(value))
        elif role == "body":
            kept.update(id(n) for s in getattr(anchored, "body", []) for n in ast.walk(s))
    return frozenset(id(n) for s in placement.region for n in ast.walk(s) if id(n) not in kept)


@functools.lru_cache(maxsize=4096)  # one entry per point or edit of the catalog
def taken_over(edit: Edit) -> frozenset[str]:
    """Names the anchor code of a rewrite binds that the template binds instead (by design)."""
    if edit.kind.inserts:
        return frozenset()
    whole = {index for index, role in placeholders(edit.template.stmts) if role in ("", "body")}
    names: set[str] = set()
    for index, stmt in enumerate(edit.anchors[0].target.stmts):
        if index not in whole:
            names.update(n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load))
    return frozenset(names)


def _is_placeholder(name: str) -> bool:
    return PLACEHOLDER.match(name) is not None


def _function_view(scope: Scope) -> Scope:
    """Where a def nested in the template looks up free names: class bodies are skipped."""
    while scope.kind is ScopeKind.CLASS and scope.parent is not None:
        scope = scope.parent
    return scope


def _conflict(name: str, line: int, binding: Binding, expected: str = "") -> NameIssue:
    return NameIssue(name, line, Reason.NAME_CONFLICT, binding.code, binding.line, expected=expected)


def rebinding_issues(table: NameTable, added: Iterable[str]) -> list[NameIssue]:
    """Imports the tool adds at module level that rebind a name the module binds otherwise.

    `added` are the import statements instrumentation brings (tracing imports are
    always among them). A business `from time import time` next to an added
    `import time` makes the business code's `time()` call a module.
    """
    wanted = set(added)
    issues = []
    for name, bindings in table.module.bindings.items():
        ours = [b for b in bindings if _is_added_import(b, wanted)]
        theirs = [b for b in bindings if b not in ours and b.kind is not BindingKind.GLOBAL]
        if ours and theirs:
            issues.append(_conflict(name, ours[0].line, theirs[0], ours[0].code))
    return issues


def _is_added_import(binding: Binding, added: set[str]) -> bool:
    stmt = binding.stmt
    if binding.kind is not BindingKind.IMPORT or stmt is None:
        return False
    if isinstance(stmt, ast.ImportFrom) and stmt.module == TRACING_MODULE and stmt.level == 0:
        return binding.name in TRACING_NAMES
    return one_line(stmt) in added
