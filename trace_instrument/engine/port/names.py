"""Names a point's code reads that nothing defines where it goes: known before apply proves the
place, so the point is bound as the tree spells them in the same round of apply.

Only a name bound nowhere Python could find it from the new place counts (no binding in the def
or a def around it, at the module's top level, by a `global` anywhere, by the catalog's own code,
nor a builtin): apply would refuse the point for it (unbound-name). Any doubt (a star import) and
nothing is said: apply's proof finds it, and port binds it in a second round as before.
"""

from __future__ import annotations

import ast
import builtins
import functools
from collections.abc import Callable
from dataclasses import replace

from trace_instrument.engine.analysis import FileWork
from trace_instrument.engine.port.decide import _rebound
from trace_instrument.engine.port.evidence import _Spellings
from trace_instrument.model import TRACING_NAMES, Catalog, Point, PortStatus, PortSuggestion
from trace_instrument.spec.binding import names_read

_KNOWN = frozenset(dir(builtins)) | TRACING_NAMES  # apply imports the runtime's names the code uses


def _prebound(catalog: Catalog, suggestions: list[PortSuggestion], known: _Spellings) -> list[PortSuggestion]:
    """Each suggestion to be proven whose code reads names nothing defines at its new place, bound
    as the tree spells them (as a second round would, once apply refused it); the others as they are."""
    ours = functools.cache(lambda: _catalog_names(catalog))  # read only when a name is left to bind
    return [_bound_ahead(s, catalog.point(s.point_id), known, ours) for s in suggestions]


def _bound_ahead(
    suggestion: PortSuggestion, point: Point, known: _Spellings, ours: Callable[[], frozenset[str]]
) -> PortSuggestion:
    work = known.works.get(suggestion.file)
    if suggestion.status is not PortStatus.PORTED or work is None or suggestion.file != point.file:
        return suggestion
    names = _surely_unbound(work, point, suggestion.new_scope, frozenset(n for n, _ in suggestion.bindings))
    names = tuple(n for n in names if n not in ours())
    if not names:
        return suggestion
    bound = _rebound(replace(suggestion, status=PortStatus.REFUSED), names, known)
    # a name the tree gives no spelling for: left for apply's proof to refuse, in its words
    return bound if bound.status is PortStatus.PORTED else suggestion


def _surely_unbound(work: FileWork, point: Point, scope: str, defined: frozenset[str]) -> tuple[str, ...]:
    """The names the point's code reads that nothing binds where `scope` runs it (() in doubt)."""
    read = {n for edit in point.edits for n in names_read(edit.template) if not n.startswith("__anchor")}
    read -= defined | _KNOWN
    module = _module_names(work.tree)
    if not read or module is None:
        return ()
    visible = set(module)
    parts = [] if scope == "<module>" else scope.split(".")
    for end in range(1, len(parts) + 1):
        nodes = work.locator.index.scope_nodes(".".join(parts[:end]))
        if len(nodes) != 1:
            return ()
        # a class's own names are not seen from its methods, only from its body
        if not isinstance(nodes[0], ast.ClassDef) or end == len(parts):
            visible |= _bound_in_def(nodes[0])
    return tuple(sorted(read - visible))


@functools.lru_cache(maxsize=32)  # per module (nodes hash by identity): each suggestion of a file asks
def _module_names(tree: ast.Module) -> frozenset[str] | None:
    """The names the module binds at its top level, or declares `global` anywhere (None: a star import)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            return None
        if isinstance(node, ast.Global):
            names.update(node.names)
    for stmt in tree.body:
        names |= _bound_here(stmt)
    return frozenset(names)


@functools.lru_cache(maxsize=256)  # per def (nodes hash by identity): the scope's points ask alike
def _bound_in_def(node: ast.AST) -> frozenset[str]:
    return frozenset(_bound_in(node))


def _bound_here(stmt: ast.stmt) -> set[str]:
    """The names a module-level statement binds, blocks included, not the defs' and classes' own."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    names = _bound_in(stmt, descend=False)
    for child in ast.iter_child_nodes(stmt):
        if isinstance(child, ast.stmt):
            names |= _bound_here(child)
        elif isinstance(child, ast.ExceptHandler):
            names |= {child.name} if child.name else set()
            for inner in child.body:
                names |= _bound_here(inner)
    return names


def _bound_in(node: ast.AST, *, descend: bool = True) -> set[str]:
    """Every name bound in a node (with `descend`, in all it holds, nested defs too: more than
    Python sees, which only makes fewer names surely unbound)."""
    found: set[str] = set()
    nodes = ast.walk(node) if descend else [node, *_expressions(node)]
    for sub in nodes:
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, (ast.Store, ast.Del)):
            found.add(sub.id)
        elif isinstance(sub, ast.arg):
            found.add(sub.arg)
        elif isinstance(sub, (ast.Import, ast.ImportFrom)):
            found.update((a.asname or a.name).split(".")[0] for a in sub.names)
        elif isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(sub.name)
        elif isinstance(sub, (ast.Global, ast.Nonlocal)):
            found.update(sub.names)
        elif (
            isinstance(sub, ast.ExceptHandler)
            and sub.name
            or isinstance(sub, (ast.MatchAs, ast.MatchStar))
            and sub.name
        ):
            found.add(sub.name)
        elif isinstance(sub, ast.MatchMapping) and sub.rest:
            found.add(sub.rest)
    return found


def _expressions(stmt: ast.AST) -> list[ast.AST]:
    """The nodes of a statement outside the statements it holds (its targets, tests, items)."""
    found: list[ast.AST] = []
    stack = [c for c in ast.iter_child_nodes(stmt) if not isinstance(c, (ast.stmt, ast.excepthandler))]
    while stack:
        node = stack.pop()
        found.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return found


def _catalog_names(catalog: Catalog) -> frozenset[str]:
    """The names the catalog's own code binds (its templates, the imports its points add), and the
    functions its templates define: a point may read what another point's code sets up."""
    names: set[str] = set(catalog.helpers)
    for point in catalog.points:
        for edit in point.edits:
            for stmt in edit.template.stmts:
                names |= _bound_in(stmt)
        for text in point.imports:
            names |= _bound_in(ast.parse(text))
    return frozenset(names)
