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
from collections.abc import Callable
from dataclasses import dataclass

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
# bases that give an instance no attributes of its own
_EMPTY_BASES = frozenset({"object", "ABC", "abc.ABC", "Generic", "typing.Generic", "Protocol", "typing.Protocol"})
_DYNAMIC = frozenset({"__getattr__", "__getattribute__", "__setattr__"})

# module name ("verl.trainer.ppo.ray_trainer") -> its parsed code, or None when not in the checkout
ModuleLoader = Callable[[str], ast.Module | None]


@dataclass(frozen=True)
class _Class:
    attributes: frozenset[str]
    bases: tuple[ast.expr, ...]
    dynamic: bool  # sets or serves attributes it does not name


class ClassAttributes:
    """The attributes of the classes of one module and of their bases in the checkout."""

    def __init__(self, tree: ast.Module, module: str, load: ModuleLoader):
        self.tree = tree
        self.module = module
        self.load = load

    def sets(self, class_node: ast.ClassDef, name: str) -> bool | None:
        """Does the class (or a base) set attribute `name` on its instances? None: cannot tell."""
        return self._sets(class_node, self.tree, self.module, name, set())

    def read_by(self, class_node: ast.ClassDef, name: str, skip: frozenset[int]) -> bool:
        """Does the class's own code (nodes in `skip` aside: tracing code) read `self.<name>`?"""
        for method in (s for s in ast.walk(class_node) if isinstance(s, _FUNCTIONS)):
            instance = _instance(method)
            for node in ast.walk(method) if instance is not None else ():
                if (
                    isinstance(node, ast.Attribute)
                    and node.attr == name
                    and isinstance(node.ctx, ast.Load)
                    and id(node) not in skip
                    and _dotted(node.value) == instance
                ):
                    return True
        return False

    def _sets(self, node: ast.ClassDef, tree: ast.Module, module: str, name: str, seen: set[int]) -> bool | None:
        if id(node) in seen:
            return False
        seen.add(id(node))
        info = _read(node)
        if name in info.attributes:
            return True
        if info.dynamic:
            return None
        unknown = False
        for base in info.bases:
            found = self._base(base, tree, module)
            if isinstance(found, str):
                continue  # object, ABC, Generic[...]: nothing of their own
            if found is None:
                unknown = True
                continue
            base_node, base_tree, base_module = found
            answer = self._sets(base_node, base_tree, base_module, name, seen)
            if answer:
                return True
            unknown = unknown or answer is None
        return None if unknown else False

    def _base(self, base: ast.expr, tree: ast.Module, module: str) -> tuple[ast.ClassDef, ast.Module, str] | str | None:
        """The class a base expression names (the string "empty" for object, ABC, Generic[...]; None: unknown)."""
        if isinstance(base, ast.Subscript):
            base = base.value
        dotted = _dotted(base)
        if dotted is None:
            return None
        if dotted in _EMPTY_BASES:
            return "empty"
        head, _, rest = dotted.partition(".")
        for stmt in tree.body:
            if isinstance(stmt, ast.ClassDef) and stmt.name == dotted:
                return stmt, tree, module
        origin = _imported(tree, module, head)
        if origin is None:
            return None
        source_module, source_name = origin
        if rest:  # `module.Class` after `import module`
            source_module, source_name = (f"{source_module}.{source_name}" if source_name else source_module), rest
        return self._class_in(source_module, source_name, depth=0)

    def _class_in(self, module: str, name: str, depth: int) -> tuple[ast.ClassDef, ast.Module, str] | None:
        loaded = self.load(module)
        if loaded is None or depth > 3:
            return None
        for stmt in loaded.body:
            if isinstance(stmt, ast.ClassDef) and stmt.name == name:
                return stmt, loaded, module
        origin = _imported(loaded, module, name)  # re-exported (`from .agent_loop import AgentLoopBase`)
        if origin is None or not origin[1]:
            return None
        return self._class_in(origin[0], origin[1], depth + 1)


def _read(node: ast.ClassDef) -> _Class:
    attributes: set[str] = set()
    dynamic = False
    for stmt in node.body:
        if isinstance(stmt, (*_FUNCTIONS, ast.ClassDef)):
            attributes.add(stmt.name)
            dynamic = dynamic or stmt.name in _DYNAMIC
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            attributes.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    for method in (s for s in ast.walk(node) if isinstance(s, _FUNCTIONS)):
        instance = _instance(method)
        if instance is None:
            continue
        for sub in ast.walk(method):
            if isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Store) and _dotted(sub.value) == instance:
                attributes.add(sub.attr)
            elif isinstance(sub, ast.Attribute) and sub.attr == "__dict__" and _dotted(sub.value) == instance:
                dynamic = True
            elif _called_on(sub, instance, ("setattr", "vars")):
                assert isinstance(sub, ast.Call)
                key = sub.args[1] if len(sub.args) > 1 else None
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    attributes.add(key.value)
                else:
                    dynamic = True
    return _Class(frozenset(attributes), tuple(node.bases), dynamic)


def _called_on(node: ast.AST, instance: str, functions: tuple[str, ...]) -> bool:
    """`setattr(self, ...)` / `vars(self)`: a call of one of the builtins with the instance first."""
    return (
        isinstance(node, ast.Call)
        and getattr(node.func, "id", None) in functions
        and bool(node.args)
        and _dotted(node.args[0]) == instance
    )


def _instance(method: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    positional = [*method.args.posonlyargs, *method.args.args]
    decorators = {_dotted(d) for d in method.decorator_list}
    if not positional or decorators & {"staticmethod", "classmethod"}:
        return None
    return positional[0].arg


def _imported(tree: ast.Module, module: str, name: str) -> tuple[str, str] | None:
    """(module, name) that a top-level import binds `name` to (name "" for `import module`)."""
    package = module.rsplit(".", 1)[0] if "." in module else ""
    for stmt in tree.body:
        if isinstance(stmt, ast.ImportFrom):
            source = _absolute(stmt, package)
            for alias in stmt.names:
                if (alias.asname or alias.name) == name and source is not None:
                    return source, alias.name
        elif isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if (alias.asname or alias.name.split(".")[0]) == name:
                    return (alias.name if alias.asname else alias.name.split(".")[0]), ""
    return None


def _absolute(node: ast.ImportFrom, package: str) -> str | None:
    if node.level == 0:
        return node.module
    parts = package.split(".") if package else []
    if node.level - 1 > len(parts):
        return None
    base = parts[: len(parts) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _dotted(node: ast.AST) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))
