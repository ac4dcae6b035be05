"""The name table agrees with the compiler's own symbol table (`symtable`) on real verl code.

For every function and class scope of every module of the verl releases the
catalog targets, the names the table says are local are exactly the names the
compiler binds in that scope; and for every name read in a function, the table
resolves it to a local, enclosing, global or builtin binding just as the
compiler classifies it.
"""

from __future__ import annotations

import ast
import symtable
from pathlib import Path

from trace_instrument.locate.names import NameTable, Scope, ScopeKind

_COMPREHENSIONS = {"listcomp", "setcomp", "dictcomp", "genexpr"}


def _mangle(name: str, class_name: str | None) -> str:
    """The compiler renames __private names inside classes; the table keeps them as written."""
    if class_name and name.startswith("__") and not name.endswith("__"):
        return f"_{class_name.lstrip('_')}{name}"
    return name


def _our_scopes(table: NameTable) -> dict[tuple[str, int, str], Scope]:
    found = {}
    for scope in table.scopes:
        if scope.kind is ScopeKind.COMPREHENSION:
            continue
        if scope.kind is ScopeKind.MODULE:
            found[("module", 0, "top")] = scope
            continue
        node = scope.node
        kind = "class" if scope.kind is ScopeKind.CLASS else "function"
        found[(kind, node.lineno, getattr(node, "name", "lambda"))] = scope  # type: ignore[attr-defined]
    return found


def _enclosing_class(scope: Scope) -> str | None:
    current: Scope | None = scope
    while current is not None:
        if current.kind is ScopeKind.CLASS:
            return current.node.name  # type: ignore[attr-defined]
        current = current.parent
    return None


def _compare(path: Path) -> list[str]:
    source = path.read_text(encoding="utf-8")
    table = NameTable(ast.parse(source)).complete()
    ours = _our_scopes(table)
    problems: list[str] = []

    def walk(st: symtable.SymbolTable) -> None:
        kind = st.get_type()
        kind = getattr(kind, "value", kind)
        if st.get_name() not in _COMPREHENSIONS and kind in ("module", "class", "function"):
            key = (kind, 0 if kind == "module" else st.get_lineno(), "top" if kind == "module" else st.get_name())
            scope = ours.get(key)
            if scope is None:
                problems.append(f"{path}: scope {key} not in the table")
            else:
                problems.extend(_compare_scope(path, st, scope, table))
        for child in st.get_children():
            walk(child)

    walk(symtable.symtable(source, str(path), "exec"))
    return problems


def _compare_scope(path: Path, st: symtable.SymbolTable, scope: Scope, table: NameTable) -> list[str]:
    owner_class = (
        scope.node.name if scope.kind is ScopeKind.CLASS else _enclosing_class(scope.parent) if scope.parent else None
    )  # type: ignore[attr-defined]
    bound = {
        s.get_name()
        for s in st.get_symbols()
        if s.is_local() and (s.is_assigned() or s.is_imported() or s.is_parameter() or s.is_namespace())
    }
    mine = set(scope.bindings) if scope.kind is ScopeKind.MODULE else table.local_names(scope)
    mine = {_mangle(n, owner_class) for n in mine}
    problems = []
    if bound != mine:
        problems.append(f"{path}:{scope.name}: compiler-only {sorted(bound - mine)}, table-only {sorted(mine - bound)}")
    if scope.kind is ScopeKind.FUNCTION:
        problems.extend(_compare_reads(path, st, scope, table, owner_class))
    return problems


def _compare_reads(
    path: Path, st: symtable.SymbolTable, scope: Scope, table: NameTable, owner_class: str | None
) -> list[str]:
    problems = []
    reads = {use.node.id for uses in table.uses.values() for use in uses if use.scope is scope}
    known = {s.get_name() for s in st.get_symbols()}
    for name in reads:
        if _mangle(name, owner_class) not in known:
            continue  # read in an annotation that `from __future__ import annotations` never evaluates
        symbol = st.lookup(_mangle(name, owner_class))
        resolved = table.resolve(name, scope)
        if symbol.is_local():
            expected = "local"
        elif symbol.is_free():
            expected = "enclosing"
        else:
            expected = "global"  # global or builtin
        actual = (
            "local"
            if resolved is scope
            else "global"
            if resolved is None or resolved.kind is ScopeKind.MODULE
            else "enclosing"
        )
        if expected != actual:
            problems.append(f"{path}:{scope.name}: {name!r} is {expected} to the compiler, {actual} to the table")
    return problems


def test_the_table_agrees_with_symtable_on_every_verl_module(verl_080: Path, verl_090: Path, verl_091: Path):
    """Every module of the three releases, each distinct source once (most are the same bytes in two
    or three releases)."""
    seen: set[bytes] = set()
    problems = []
    for root in (verl_080, verl_090, verl_091):
        modules = sorted((root / "verl").rglob("*.py"))
        assert len(modules) > 300, "the wheel should hold the whole package"
        for path in modules:
            source = path.read_bytes()
            if source not in seen:
                seen.add(source)
                problems.extend(_compare(path))
    assert problems == [], "\n".join(problems[:20])


CASES = """
import os
from time import time as now
x = 1

def f(a, *args, b=x, **kw):
    global x
    x = a
    y = [z for z in args if (w := z)]
    with open(a) as handle:
        pass
    for i, (j, k) in enumerate(kw):
        pass
    try:
        pass
    except ValueError as err:
        pass
    match a:
        case [first, *rest]:
            pass
        case {"k": v, **others}:
            pass
    def inner():
        nonlocal y
        y = 2
        return now() + os.sep.count("x")
    lambda q: q + y
    del k
    return w, handle, i, j, err, first, rest, v, others, inner

class C:
    attr = 1
    def method(self):
        return attr
"""


def test_a_module_with_every_kind_of_binding():
    table = NameTable(ast.parse(CASES)).complete()
    function = next(s for s in table.scopes if s.name == "f")
    assert table.local_names(function) == {
        "a", "args", "b", "kw", "y", "w", "handle", "i", "j", "k", "err", "first", "rest", "v", "others", "inner",
    }  # fmt: skip
    assert function.declared_global == {"x"}
    assert {b.kind.value for b in table.module.bindings["x"]} == {"assignment"}
    assert [b.line for b in table.module.bindings["x"]] == [4, 8]  # `x = a` under `global x` binds the module's x
    inner = next(s for s in table.scopes if s.name == "f.inner")
    assert table.resolve("y", inner) is function  # nonlocal
    assert table.resolve("now", inner) is table.module
    assert table.resolve("len", inner) is None  # a builtin
    method = next(s for s in table.scopes if s.name == "C.method")
    assert table.resolve("attr", method) is None  # class bodies are not enclosing scopes
    (binding,) = table.module.bindings["now"]
    assert binding.code == "from time import time as now"
    assert binding.imports("time", "time")
    assert not binding.imports("time", None)
