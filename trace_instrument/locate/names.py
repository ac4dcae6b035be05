"""Name bindings of a module: which statement gives a name its meaning where code uses it.

Python's own scoping rules, on the `ast`: a name bound anywhere in a function body
is local to the whole function unless the function declares it `global` or
`nonlocal`; a free name is looked up in the enclosing function scopes (class
bodies are not enclosing scopes for the functions in them), then in the module,
then in the builtins. Comprehensions are scopes of their own, except that an
assignment expression (`:=`) inside one binds in the enclosing function.

LibCST's ScopeProvider knows the same rules, but `check` must stay well below the
cost of one LibCST parse of the files it reads, so the table is built on the `ast`
the operations already have. A test compares it with the compiler's `symtable`
on every module of the verl releases the catalog targets.
"""

from __future__ import annotations

import ast
import bisect
import builtins
import enum
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from trace_instrument.locate.flow import constant_truth
from trace_instrument.spec.code import source_lines

BUILTINS = frozenset(dir(builtins))
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


class BindingKind(str, enum.Enum):
    IMPORT = "import"
    STAR_IMPORT = "star import"
    ASSIGNMENT = "assignment"
    PARAMETER = "parameter"
    GLOBAL = "global declaration"
    NONLOCAL = "nonlocal declaration"
    LOOP_TARGET = "loop target"
    WITH_TARGET = "with target"
    EXCEPT_TARGET = "except target"
    DEFINITION = "definition"  # def / class
    MATCH_CAPTURE = "match capture"
    DELETION = "del"
    COMPREHENSION_TARGET = "comprehension target"


class ScopeKind(str, enum.Enum):
    MODULE = "module"
    FUNCTION = "function"
    CLASS = "class"
    COMPREHENSION = "comprehension"


@dataclass(frozen=True, eq=False)
class Binding:
    """One place that binds a name in a scope."""

    name: str
    kind: BindingKind
    node: ast.AST  # the Name, alias, arg, def or clause that binds it
    stmt: ast.stmt | None  # the innermost statement holding the binding (None for a lambda's parameters)
    line: int
    clause: ast.excepthandler | ast.match_case | None = None  # an except or case clause binding it
    at_run_time: bool = True  # False under `if TYPE_CHECKING:` or `if False:` (never executed)

    @property
    def code(self) -> str:
        """The binding's code on one line, for messages ("from time import time")."""
        if self.clause is not None:
            return clause_header(self.clause)
        if self.stmt is None:
            return f"lambda parameter {self.name}"
        return one_line(self.stmt)

    def imports(self, module: str, name: str | None) -> bool:
        """Is this `import module` (name None) or `from module import name`?"""
        if self.kind is not BindingKind.IMPORT or not isinstance(self.node, ast.alias):
            return False
        if isinstance(self.stmt, ast.Import):
            return (
                name is None
                and self.node.name.split(".")[0] == module.split(".")[0]
                and (self.node.asname is None or self.node.name == module)
            )
        if isinstance(self.stmt, ast.ImportFrom):
            return self.stmt.level == 0 and self.stmt.module == module and self.node.name == name
        return False


@dataclass(eq=False)
class Scope:
    node: ast.AST
    kind: ScopeKind
    parent: Scope | None
    name: str  # dotted path, "<module>" for the module
    bindings: dict[str, list[Binding]] = field(default_factory=dict)
    declared_global: set[str] = field(default_factory=set)
    declared_nonlocal: set[str] = field(default_factory=set)
    stars: list[Binding] = field(default_factory=list)

    def binds(self, name: str) -> bool:
        """Is the name local here (bound, and not declared global or nonlocal)?"""
        return name in self.bindings and name not in self.declared_global and name not in self.declared_nonlocal


@dataclass(frozen=True)
class Use:
    """A name read by code."""

    node: ast.Name
    scope: Scope
    stmt: ast.stmt | None


class NameTable:
    """Every scope of a module, the bindings in each, and every name read.

    The bodies of functions defined at module or class level are read when a
    question first reaches into them (most questions concern a few functions of a
    large module); `complete()` reads them all. A function declaring `global` is
    read at once, since it binds module names.
    """

    def __init__(self, tree: ast.Module, *, lazy: bool = True, source: str | None = None):
        """`source`, the text the tree was parsed from, lets the table find `global` declarations
        without walking every function."""
        self.module = Scope(tree, ScopeKind.MODULE, None, "<module>")
        self.scopes: list[Scope] = [self.module]
        self.scope_of_node: dict[int, Scope] = {}  # Name / alias / arg node -> the scope its code runs in
        self._uses: dict[str, list[Use]] = {}
        self._stmt: ast.stmt | None = None
        self._lazy = lazy
        self._pending: dict[int, tuple[ast.FunctionDef | ast.AsyncFunctionDef, Scope]] = {}  # def -> inner scope
        self._clause: ast.excepthandler | ast.match_case | None = None  # binding except / case clause
        self._never_run = False  # inside the body of `if TYPE_CHECKING:` / `if False:`
        for stmt in tree.body:
            self._statement(stmt, self.module)
        declaring = _global_lines(source_lines(source)) if source is not None else None
        for node, _inner in list(self._pending.values()):
            if _declares_global(node, declaring):
                self._read_body(node)

    # -- reading bodies on demand ---------------------------------------------------------

    def complete(self) -> NameTable:
        """Read every function body not read yet; returns the table."""
        while self._pending:  # reading a body may find classes whose methods wait in turn
            node, _inner = next(iter(self._pending.values()))
            self._read_body(node)
        return self

    def _read_body(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        entry = self._pending.pop(id(node), None)
        if entry is None:
            return
        _node, inner = entry
        outer, self._stmt = self._stmt, node
        try:
            self._parameters(node.args, inner)
        finally:
            self._stmt = outer
        for stmt in node.body:
            self._statement(stmt, inner)

    def _read_around(self, line: int) -> None:
        """Read the pending bodies whose lines hold `line` (and, in them, those of nested classes' methods)."""
        while True:
            holding = [n for n, _ in self._pending.values() if n.lineno <= line <= (n.end_lineno or n.lineno)]
            if not holding:
                return
            for node in holding:
                self._read_body(node)

    @property
    def uses(self) -> dict[str, list[Use]]:
        """Every name read, in every scope (reads all bodies)."""
        self.complete()
        return self._uses

    def uses_in(self, name: str, scope: Scope) -> list[Use]:
        """Reads of `name` in `scope`'s code and in the scopes nested in it."""
        if scope.kind is ScopeKind.MODULE:
            self.complete()
        else:
            self._read_around(getattr(scope.node, "lineno", 0))
        return self._uses.get(name, [])

    # -- queries -------------------------------------------------------------------------

    def scope_of(self, node: ast.AST) -> Scope | None:
        found = self.scope_of_node.get(id(node))
        if found is None and self._pending and hasattr(node, "lineno"):
            self._read_around(node.lineno)
            found = self.scope_of_node.get(id(node))
        return found

    def scope_of_def(self, node: ast.AST) -> Scope | None:
        """The scope a def, class or lambda opens (its body is read first if need be)."""
        if id(node) in self._pending:
            self._read_body(self._pending[id(node)][0])
        elif self._pending and hasattr(node, "lineno"):
            self._read_around(node.lineno)
        found = self.scope_of_node.get(id(node))
        return found if found is not None and found.node is node else None

    def resolve(self, name: str, scope: Scope) -> Scope | None:
        """The scope whose bindings give `name` its meaning in `scope`'s code (None: builtins)."""
        if name in scope.declared_global:
            return self.module if name in self.module.bindings or self.module.stars else None
        if scope.binds(name):
            return scope
        current = scope.parent
        while current is not None:
            if current.kind is ScopeKind.MODULE:
                return current if name in current.bindings or current.stars else None
            if current.kind is not ScopeKind.CLASS and current.binds(name):
                return current
            current = current.parent
        return None

    def bindings_of(self, name: str, scope: Scope) -> list[Binding]:
        """Every binding that may give `name` its meaning in `scope`'s code."""
        owner = self.resolve(name, scope)
        if owner is None:
            return []
        return [*owner.bindings.get(name, []), *(owner.stars if owner.kind is ScopeKind.MODULE else [])]

    def local_names(self, scope: Scope) -> set[str]:
        return {name for name in scope.bindings if scope.binds(name)}

    def would_resolve_to(self, name: str, scope: Scope, owner: Scope) -> bool:
        """Would `name`, read by `scope`'s code, resolve to `owner` once `owner` binds it?"""
        current: Scope | None = scope
        first = True
        while current is not None:
            if name in current.declared_global:
                return owner is self.module
            visible = first or current.kind is not ScopeKind.CLASS  # class bodies hide from nested code
            if current is owner:
                return visible
            if visible and current.binds(name):
                return False
            current, first = current.parent, False
        return False

    # -- building ------------------------------------------------------------------------

    def _bind(self, scope: Scope, name: str, kind: BindingKind, node: ast.AST, line: int) -> None:
        binding = Binding(name, kind, node, self._stmt, line, self._clause, at_run_time=not self._never_run)
        if kind is BindingKind.STAR_IMPORT:
            scope.stars.append(binding)
            return
        scope.bindings.setdefault(name, []).append(binding)
        self.scope_of_node[id(node)] = scope

    def _statement(self, stmt: ast.stmt, scope: Scope) -> None:
        outer, self._stmt = self._stmt, stmt
        try:
            handler = getattr(self, f"_stmt_{type(stmt).__name__}", None)
            if handler is not None:
                handler(stmt, scope)
            else:
                self._generic(stmt, scope)
        finally:
            self._stmt = outer

    def _stmt_If(self, stmt: ast.If, scope: Scope) -> None:
        if constant_truth(stmt.test) is not False:  # (TYPE_CHECKING, a false constant: never runs)
            self._generic(stmt, scope)
            return
        # the body still makes its names local (Python's scoping), but binds nothing when the code runs
        self._expression(stmt.test, scope)
        outer, self._never_run = self._never_run, True
        try:
            for child in stmt.body:
                self._statement(child, scope)
        finally:
            self._never_run = outer
        for child in stmt.orelse:
            self._statement(child, scope)

    def _generic(self, node: ast.AST, scope: Scope, role: BindingKind = BindingKind.ASSIGNMENT) -> None:
        """Visit the fields of node in order; statements start their own context."""
        for child in _children(node):
            if isinstance(child, ast.stmt):
                self._statement(child, scope)
            elif isinstance(child, ast.excepthandler):
                self._handler(child, scope)
            elif isinstance(child, ast.match_case):
                self._match_case(child, scope)
            else:
                self._expression(child, scope, role)

    def _expression(self, node: ast.AST, scope: Scope, role: BindingKind = BindingKind.ASSIGNMENT) -> None:
        if isinstance(node, ast.Name):
            self._name(node, scope, role)
        elif isinstance(node, ast.Lambda):
            self._lambda(node, scope)
        elif isinstance(node, COMPREHENSIONS):
            self._comprehension(node, scope)
        elif isinstance(node, ast.NamedExpr):
            self._expression(node.value, scope)
            target = _walrus_scope(scope)
            self._name(node.target, scope, BindingKind.ASSIGNMENT, bind_in=target)
        elif isinstance(node, ast.pattern):
            self._pattern(node, scope)
        else:
            self._generic(node, scope, role)

    def _name(self, node: ast.Name, scope: Scope, role: BindingKind, bind_in: Scope | None = None) -> None:
        if isinstance(node.ctx, ast.Load):
            self.scope_of_node[id(node)] = scope
            self._uses.setdefault(node.id, []).append(Use(node, scope, self._stmt))
            return
        kind = BindingKind.DELETION if isinstance(node.ctx, ast.Del) else role
        self._bind(self.binding_scope(node.id, bind_in or scope), node.id, kind, node, node.lineno)
        self.scope_of_node[id(node)] = scope

    def binding_scope(self, name: str, scope: Scope) -> Scope:
        """Where an assignment to `name` in `scope`'s code lands (`global` / `nonlocal` move it)."""
        if name in scope.declared_global:
            return self.module
        if name in scope.declared_nonlocal:
            outer = scope.parent
            while outer is not None and not (outer.kind is ScopeKind.FUNCTION and outer.binds(name)):
                outer = outer.parent
            return outer or scope
        return scope

    # -- statements with scoping rules of their own ----------------------------------------

    def _stmt_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef, scope: Scope) -> None:
        for decorator in node.decorator_list:
            self._expression(decorator, scope)
        self._arguments_outside(node.args, scope)
        if node.returns is not None:
            self._expression(node.returns, scope)
        self._bind(scope, node.name, BindingKind.DEFINITION, node, node.lineno)
        inner = self._new_scope(node, ScopeKind.FUNCTION, scope, node.name)
        self._pending[id(node)] = (node, inner)
        if not self._lazy or scope.kind not in (ScopeKind.MODULE, ScopeKind.CLASS):
            self._read_body(node)  # nested functions are read with the function holding them

    _stmt_AsyncFunctionDef = _stmt_FunctionDef

    def _stmt_ClassDef(self, node: ast.ClassDef, scope: Scope) -> None:
        for child in [*node.decorator_list, *node.bases, *(k.value for k in node.keywords)]:
            self._expression(child, scope)
        self._bind(scope, node.name, BindingKind.DEFINITION, node, node.lineno)
        inner = self._new_scope(node, ScopeKind.CLASS, scope, node.name)
        for stmt in node.body:
            self._statement(stmt, inner)

    def _stmt_Import(self, node: ast.Import, scope: Scope) -> None:
        for alias in node.names:
            self._bind(scope, alias.asname or alias.name.split(".")[0], BindingKind.IMPORT, alias, node.lineno)

    def _stmt_ImportFrom(self, node: ast.ImportFrom, scope: Scope) -> None:
        for alias in node.names:
            if alias.name == "*":
                self._bind(scope, "*", BindingKind.STAR_IMPORT, alias, node.lineno)
            else:
                self._bind(scope, alias.asname or alias.name, BindingKind.IMPORT, alias, node.lineno)

    def _stmt_Global(self, node: ast.Global, scope: Scope) -> None:
        scope.declared_global.update(node.names)
        for name in node.names:
            scope.bindings.setdefault(name, []).append(Binding(name, BindingKind.GLOBAL, node, node, node.lineno))

    def _stmt_Nonlocal(self, node: ast.Nonlocal, scope: Scope) -> None:
        scope.declared_nonlocal.update(node.names)
        for name in node.names:
            scope.bindings.setdefault(name, []).append(Binding(name, BindingKind.NONLOCAL, node, node, node.lineno))

    def _stmt_For(self, node: ast.For | ast.AsyncFor, scope: Scope) -> None:
        self._expression(node.iter, scope)
        self._expression(node.target, scope, BindingKind.LOOP_TARGET)
        for stmt in [*node.body, *node.orelse]:
            self._statement(stmt, scope)

    _stmt_AsyncFor = _stmt_For

    def _stmt_With(self, node: ast.With | ast.AsyncWith, scope: Scope) -> None:
        for item in node.items:
            self._expression(item.context_expr, scope)
            if item.optional_vars is not None:
                self._expression(item.optional_vars, scope, BindingKind.WITH_TARGET)
        for stmt in node.body:
            self._statement(stmt, scope)

    _stmt_AsyncWith = _stmt_With

    def _handler(self, handler: ast.excepthandler, scope: Scope) -> None:
        assert isinstance(handler, ast.ExceptHandler)
        if handler.type is not None:
            self._expression(handler.type, scope)
        if handler.name:
            self._clause = handler
            try:
                self._bind(scope, handler.name, BindingKind.EXCEPT_TARGET, handler, handler.lineno)
            finally:
                self._clause = None
        for stmt in handler.body:
            self._statement(stmt, scope)

    def _match_case(self, case: ast.match_case, scope: Scope) -> None:
        self._clause = case
        try:
            self._pattern(case.pattern, scope)
        finally:
            self._clause = None
        if case.guard is not None:
            self._expression(case.guard, scope)
        for stmt in case.body:
            self._statement(stmt, scope)

    def _pattern(self, pattern: ast.pattern, scope: Scope) -> None:
        captured = getattr(pattern, "name", None) or getattr(pattern, "rest", None)
        if isinstance(captured, str):
            self._bind(scope, captured, BindingKind.MATCH_CAPTURE, pattern, pattern.lineno)
        for child in ast.iter_child_nodes(pattern):
            self._expression(child, scope)

    # -- expressions with scopes -----------------------------------------------------------

    def _lambda(self, node: ast.Lambda, scope: Scope) -> None:
        self._arguments_outside(node.args, scope)
        inner = self._new_scope(node, ScopeKind.FUNCTION, scope, "<lambda>")
        outer, self._stmt = self._stmt, None
        try:
            self._parameters(node.args, inner)
        finally:
            self._stmt = outer
        self._expression(node.body, inner)

    def _comprehension(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp, scope: Scope) -> None:
        generators = node.generators
        self._expression(generators[0].iter, scope)  # the first iterable is evaluated outside
        inner = self._new_scope(node, ScopeKind.COMPREHENSION, scope, "<comprehension>")
        for index, generator in enumerate(generators):
            if index:
                self._expression(generator.iter, inner)
            self._expression(generator.target, inner, BindingKind.COMPREHENSION_TARGET)
            for condition in generator.ifs:
                self._expression(condition, inner)
        parts = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
        for part in parts:
            self._expression(part, inner)

    def _arguments_outside(self, args: ast.arguments, scope: Scope) -> None:
        """Defaults and annotations are evaluated where the def or lambda stands."""
        for default in [*args.defaults, *(d for d in args.kw_defaults if d is not None)]:
            self._expression(default, scope)
        for arg in _all_args(args):
            if arg.annotation is not None:
                self._expression(arg.annotation, scope)

    def _parameters(self, args: ast.arguments, scope: Scope) -> None:
        for arg in _all_args(args):
            self._bind(scope, arg.arg, BindingKind.PARAMETER, arg, arg.lineno)

    def _new_scope(self, node: ast.AST, kind: ScopeKind, parent: Scope, name: str) -> Scope:
        path = name if parent.kind is ScopeKind.MODULE else f"{parent.name}.{name}"
        scope = Scope(node, kind, parent, path)
        self.scopes.append(scope)
        self.scope_of_node[id(node)] = scope
        return scope


_GLOBAL = re.compile(r"(^|[;:]\s*)global\s")


def _children(node: ast.AST) -> Iterator[ast.AST]:
    """ast.iter_child_nodes without contexts and operators (a third of all nodes, none holding a name)."""
    for name in _FIELDS_WITH_NODES.get(type(node)) or _fields_with_nodes(type(node)):
        value = getattr(node, name, None)
        if isinstance(value, ast.AST):
            yield value
        elif isinstance(value, list):
            yield from (item for item in value if isinstance(item, ast.AST))


_FIELDS_WITH_NODES: dict[type, tuple[str, ...]] = {}
_NAMELESS_FIELDS = frozenset({"ctx", "op", "ops"})  # contexts and operators: nodes that never hold a name


def _fields_with_nodes(kind: type) -> tuple[str, ...]:
    fields = tuple(name for name in getattr(kind, "_fields", ()) if name not in _NAMELESS_FIELDS)
    _FIELDS_WITH_NODES[kind] = fields
    return fields


def _global_lines(lines: list[str]) -> list[int]:
    """The (0-based) numbers of the lines that may declare a name global."""
    return [i for i, line in enumerate(lines) if "global" in line and _GLOBAL.search(line.lstrip())]


def _declares_global(node: ast.FunctionDef | ast.AsyncFunctionDef, declaring: list[int] | None) -> bool:
    """Does a function (or one nested in it) declare a name global? (its text says, when known:
    `declaring`, the lines that may)"""
    if declaring is not None:
        first = bisect.bisect_left(declaring, node.lineno - 1)
        if first == len(declaring) or declaring[first] >= (node.end_lineno or node.lineno):
            return False
    return any(isinstance(n, ast.Global) for n in ast.walk(node))


def _all_args(args: ast.arguments) -> Iterator[ast.arg]:
    yield from args.posonlyargs
    yield from args.args
    if args.vararg is not None:
        yield args.vararg
    yield from args.kwonlyargs
    if args.kwarg is not None:
        yield args.kwarg


def _walrus_scope(scope: Scope) -> Scope:
    """`:=` in a comprehension binds in the nearest enclosing non-comprehension scope."""
    while scope.kind is ScopeKind.COMPREHENSION and scope.parent is not None:
        scope = scope.parent
    return scope


def one_line(stmt: ast.stmt, limit: int = 100) -> str:
    """A statement's code on one line (a block: its header), cut to `limit` characters."""
    if isinstance(stmt, (*_FUNCTIONS, ast.ClassDef)):
        text = ast.unparse(stmt).split("\n")
        header = next((line for line in text if line.lstrip().startswith(("def ", "async def ", "class "))), text[0])
        text_line = header.strip()
    else:
        shallow = stmt
        for name in ("body", "orelse", "handlers", "finalbody", "cases"):
            if isinstance(getattr(stmt, name, None), list):
                shallow = _header_copy(stmt)
                break
        text_line = ast.unparse(shallow).split("\n")[0].strip()
    return text_line if len(text_line) <= limit else text_line[: limit - 3] + "..."


def clause_header(clause: ast.excepthandler | ast.match_case, limit: int = 100) -> str:
    """`except OSError as exc:` or `case {'time': t}:`, the line of a clause that binds a name."""
    if isinstance(clause, ast.ExceptHandler):
        kind = f" {ast.unparse(clause.type)}" if clause.type is not None else ""
        name = f" as {clause.name}" if clause.name else ""
        text = f"except{kind}{name}:"
    else:
        assert isinstance(clause, ast.match_case)
        guard = f" if {ast.unparse(clause.guard)}" if clause.guard is not None else ""
        text = f"case {ast.unparse(clause.pattern)}{guard}:"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _header_copy(stmt: ast.stmt) -> ast.stmt:
    import copy

    shallow = copy.copy(stmt)
    for name in ("body", "orelse", "handlers", "finalbody", "cases"):
        if isinstance(getattr(shallow, name, None), list):
            setattr(shallow, name, [])
    if hasattr(shallow, "body"):
        shallow.body = [ast.Pass()]
    return shallow
