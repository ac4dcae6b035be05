"""Which attributes a class's instances get: set in its methods, defined in its body, or by its bases.

A point's code that reads `self.global_steps` needs the class (or a base) to set it somewhere. A
fork that renames the attribute leaves the code reading a name nothing sets: an AttributeError at
run time that no name check sees. This answers, for a class of a file, whether an attribute is set
by the class or its bases — found in the same module or in the checkout's own modules — and says
"cannot tell" (None) when a base is not in the checkout, or a class sets attributes it does not
name (`setattr(self, name, ...)`, `self.__dict__`, `__getattr__`).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Container, Iterator
from dataclasses import dataclass, replace

from trace_instrument.locate.flow import dotted, instance_name, statements
from trace_instrument.spec.code import absolute_module

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
# bases that give an instance no attributes of its own
_EMPTY_BASES = frozenset({"object", "ABC", "abc.ABC", "Generic", "typing.Generic", "Protocol", "typing.Protocol"})
_DYNAMIC = frozenset({"__getattr__", "__getattribute__", "__setattr__"})


@dataclass(frozen=True, eq=False)
class Module:
    """A module's code: parsed, and its lines (where the cheap tests look)."""

    tree: ast.Module
    lines: list[str]


# module name ("verl.trainer.ppo.ray_trainer") -> its code, or None when not in the checkout
ModuleLoader = Callable[[str], Module | None]
_DYNAMIC_WORDS = ("__dict__", "setattr", "vars(")  # a class whose text has none sets only attributes it names


@dataclass(frozen=True)
class _Class:
    attributes: frozenset[str]
    bases: tuple[ast.expr, ...]
    dynamic: bool  # sets or serves attributes it does not name
    reads: dict[str, tuple[int, ...]] | None  # attribute -> ids of the nodes reading it (None: not read yet)


# a class's node id -> the node (kept, so its id stays its own) and what it holds
_READ: dict[int, tuple[ast.ClassDef, _Class]] = {}


class ClassAttributes:
    """The attributes of the classes of one module and of their bases in the checkout."""

    def __init__(self, code: Module, module: str, load: ModuleLoader):
        self.code = code
        self.module = module
        self.load = load

    def _info(self, node: ast.ClassDef, code: Module | None = None) -> _Class:
        """A class read once per process (a base module's tree is shared by the files that need it)."""
        entry = _READ.get(id(node))
        if entry is None or entry[0] is not node:
            entry = _READ[id(node)] = (node, _read(node, code or self.code))
            if len(_READ) > 256:
                _READ.pop(next(iter(_READ)))
        return entry[1]

    def learn(self, class_node: ast.ClassDef, text: str) -> None:
        """Read a class that is not in the module yet (a point inserts it) from `text`, the code it
        comes from; its bases are looked up in the module it goes in."""
        entry = _READ.get(id(class_node))
        if entry is None or entry[0] is not class_node:
            self._info(class_node, Module(ast.Module(body=[], type_ignores=[]), text.splitlines()))

    def sets(self, class_node: ast.ClassDef, name: str) -> bool | None:
        """Does the class (or a base) set attribute `name` on its instances? None: cannot tell."""
        return self._sets(class_node, self.code, self.module, name, set())

    def sets_itself(self, class_node: ast.ClassDef, name: str) -> bool | None:
        """Does the class's own code set attribute `name` (its bases not asked)? None: cannot tell."""
        info = self._info(class_node)
        return True if name in info.attributes else (None if info.dynamic else False)

    def read_by(self, class_node: ast.ClassDef, name: str, skip: Container[int]) -> bool:
        """Does the class's own code (nodes in `skip` aside: tracing code) read `self.<name>`?"""
        info = self._info(class_node)
        if info.reads is None:  # walked once, when first asked
            info = replace(info, reads=_reads(class_node))
            _READ[id(class_node)] = (class_node, info)
        assert info.reads is not None
        return any(node not in skip for node in info.reads.get(name, ()))

    def _sets(self, node: ast.ClassDef, code: Module, module: str, name: str, seen: set[int]) -> bool | None:
        if id(node) in seen:
            return False
        seen.add(id(node))
        info = self._info(node, code)
        if name in info.attributes:
            return True
        if info.dynamic:
            return None
        unknown = False
        for base in info.bases:
            found = self._base(base, code, module)
            if isinstance(found, str):
                continue  # object, ABC, Generic[...]: nothing of their own
            if found is None:
                unknown = True
                continue
            base_node, base_code, base_module = found
            answer = self._sets(base_node, base_code, base_module, name, seen)
            if answer:
                return True
            unknown = unknown or answer is None
        return None if unknown else False

    def _base(self, base: ast.expr, code: Module, module: str) -> tuple[ast.ClassDef, Module, str] | str | None:
        """The class a base expression names (the string "empty" for object, ABC, Generic[...]; None: unknown)."""
        if isinstance(base, ast.Subscript):
            base = base.value
        name = dotted(base)
        if name is None:
            return None
        if name in _EMPTY_BASES:
            return "empty"
        head, _, rest = name.partition(".")
        for stmt in code.tree.body:
            if isinstance(stmt, ast.ClassDef) and stmt.name == name:
                return stmt, code, module
        origin = _imported(code.tree, module, head)
        if origin is None:
            return None
        source_module, source_name = origin
        if rest:  # `module.Class` after `import module`
            source_module, source_name = (f"{source_module}.{source_name}" if source_name else source_module), rest
        return self._class_in(source_module, source_name, depth=0)

    def _class_in(self, module: str, name: str, depth: int) -> tuple[ast.ClassDef, Module, str] | None:
        loaded = self.load(module)
        if loaded is None or depth > 3:
            return None
        for stmt in loaded.tree.body:
            if isinstance(stmt, ast.ClassDef) and stmt.name == name:
                return stmt, loaded, module
        origin = _imported(loaded.tree, module, name)  # re-exported (`from .agent_loop import AgentLoopBase`)
        if origin is None or not origin[1]:
            return None
        return self._class_in(origin[0], origin[1], depth + 1)


def _read(node: ast.ClassDef, code: Module) -> _Class:
    """What a class's body defines and its methods set on the instance. Attributes are set in
    assignment, loop, `with` and `del` targets, which a walk of the statements finds; only a class
    whose text mentions `__dict__`, `setattr` or `vars(` is walked whole."""
    attributes: set[str] = set()
    dynamic = False
    for stmt in node.body:
        if isinstance(stmt, (*_FUNCTIONS, ast.ClassDef)):
            attributes.add(stmt.name)
            dynamic = dynamic or stmt.name in _DYNAMIC
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            attributes.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    text = code.lines[node.lineno - 1 : node.end_lineno or node.lineno]
    maybe_dynamic = any(word in line for line in text for word in _DYNAMIC_WORDS)
    for method in methods(node.body):
        instance = instance_name(method)
        if instance is None:
            continue
        for stmt in statements(method.body, into_definitions=True):  # closures share self
            for target in _targets(stmt):
                attributes.update(_set_on(target, instance))
        if maybe_dynamic:
            found, unnamed = _set_by_name(method, instance)
            attributes |= found
            dynamic = dynamic or unnamed
    return _Class(frozenset(attributes), tuple(node.bases), dynamic, None)


def _set_by_name(method: ast.FunctionDef | ast.AsyncFunctionDef, instance: str) -> tuple[set[str], bool]:
    """Attributes `setattr(self, "A", ...)` sets; and whether it sets or serves some it does not name
    (`setattr` with a computed name, `vars(self)`, `self.__dict__`)."""
    found: set[str] = set()
    unnamed = False
    for sub in ast.walk(method):
        if isinstance(sub, ast.Attribute) and sub.attr == "__dict__" and dotted(sub.value) == instance:
            unnamed = True
        elif _called_on(sub, instance, ("setattr", "vars")):
            assert isinstance(sub, ast.Call)
            key = sub.args[1] if len(sub.args) > 1 else None
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                found.add(key.value)
            else:
                unnamed = True
    return found, unnamed


def _reads(node: ast.ClassDef) -> dict[str, tuple[int, ...]]:
    """attribute -> ids of the nodes of the class's methods that read it on the instance."""
    reads: dict[str, list[int]] = {}
    for method in methods(node.body):
        instance = instance_name(method)
        for sub in ast.walk(method) if instance is not None else ():
            if isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Load) and dotted(sub.value) == instance:
                reads.setdefault(sub.attr, []).append(id(sub))
    return {k: tuple(v) for k, v in reads.items()}


def _set_on(target: ast.expr, instance: str) -> Iterator[str]:
    """The attributes an assignment target sets on the instance (`self.a`, `self.a, self.b = ...`)."""
    if isinstance(target, ast.Attribute):
        value = target.value
        if isinstance(value, ast.Name) and value.id == instance:
            yield target.attr
    elif isinstance(target, (ast.Tuple, ast.List)):
        for element in target.elts:
            yield from _set_on(element, instance)
    elif isinstance(target, ast.Starred):
        yield from _set_on(target.value, instance)


def _targets(stmt: ast.stmt) -> list[ast.expr]:
    """The expressions a statement assigns to (or deletes)."""
    if isinstance(stmt, ast.Assign):
        return list(stmt.targets)
    if isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
        return [stmt.target]
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        return [stmt.target]
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        return [i.optional_vars for i in stmt.items if i.optional_vars is not None]
    if isinstance(stmt, ast.Delete):
        return list(stmt.targets)
    return []


def methods(stmts: list[ast.stmt]) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The defs of a class body (under its `if`s and `try`s too), not those nested in them."""
    found: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
    for stmt in stmts:
        if isinstance(stmt, _FUNCTIONS):
            found.append(stmt)
        elif not isinstance(stmt, ast.ClassDef):
            for name in ("body", "orelse", "finalbody"):
                found += methods(getattr(stmt, name, None) or [])
            for handler in getattr(stmt, "handlers", []):
                found += methods(handler.body)
    return found


def _called_on(node: ast.AST, instance: str, functions: tuple[str, ...]) -> bool:
    """`setattr(self, ...)` / `vars(self)`: a call of one of the builtins with the instance first."""
    return (
        isinstance(node, ast.Call)
        and getattr(node.func, "id", None) in functions
        and bool(node.args)
        and dotted(node.args[0]) == instance
    )


def _imported(tree: ast.Module, module: str, name: str) -> tuple[str, str] | None:
    """(module, name) that a top-level import binds `name` to (name "" for `import module`)."""
    package = module.rsplit(".", 1)[0] if "." in module else ""
    for stmt in tree.body:
        if isinstance(stmt, ast.ImportFrom):
            source = absolute_module(stmt, package)
            for alias in stmt.names:
                if (alias.asname or alias.name) == name and source is not None:
                    return source, alias.name
        elif isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if (alias.asname or alias.name.split(".")[0]) == name:
                    return (alias.name if alias.asname else alias.name.split(".")[0]), ""
    return None
