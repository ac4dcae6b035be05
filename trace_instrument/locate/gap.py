"""Business code between a point's block and its anchor: does it change what the block reads or
whether the block runs?

A fork may add business code between an anchor and the code apply put next to it (a line after
`extract_reward(batch)`, a comment, a blank line). The block still traces what it traced when
nothing in between changes a value it reads and nothing in between can leave the body before
it runs: then it is in place. This module judges one such statement, on the `ast` the analysis
already has (as names.py does, for the same reason: a LibCST parse costs more than `check` may).

What a block reads is every dotted chain it loads (`batch.non_tensor_batch`, `self.global_steps`,
`np.array`); a statement changes a chain when it rebinds its root name, assigns or deletes
through it (`batch["uid"] = ...`, `self.x = ...` changes `self.x`), calls a method on it or
passes it to a call (either may change the object in place; the builtins that only look at
their arguments, `len` or `print`, do not). Two chains meet when one starts with the other.
Aliasing is not followed (`b = batch; b.x = 1` is not seen as changing `batch`), as the rest of
the analysis does not follow it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from trace_instrument.locate.flow import constant_truth, dotted
from trace_instrument.locate.names import COMPREHENSIONS, one_line

# builtins that read their arguments and change none of them
_LOOKING = frozenset(
    {
        "abs", "all", "any", "ascii", "bool", "bytes", "callable", "chr", "dict", "dir", "divmod", "enumerate",
        "float", "format", "frozenset", "getattr", "hasattr", "hash", "hex", "id", "int", "isinstance",
        "issubclass", "iter", "len", "list", "max", "min", "oct", "ord", "pow", "print", "range", "repr",
        "reversed", "round", "set", "sorted", "str", "sum", "tuple", "type", "zip",
    }
)  # fmt: skip
_LATER = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)  # bodies that run later, not here
_LOOPS = (ast.For, ast.AsyncFor, ast.While)


@dataclass(frozen=True)
class Change:
    """A chain a statement may change, and how (`rebinds`, `changes`, `may change`)."""

    chain: str
    how: str


def reads(stmts: Iterable[ast.stmt]) -> frozenset[str]:
    """The dotted chains the code loads, each whole (`self.global_steps`, not also `self`)."""
    found: set[str] = set()
    for stmt in stmts:
        _chains(stmt, found)
    return frozenset(found)


def _chains(node: ast.AST, found: set[str]) -> None:
    if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load):
        chain = dotted(node)
        if chain is not None:
            found.add(chain)
            return
    for child in ast.iter_child_nodes(node):
        _chains(child, found)


def meets(chain: str, other: str) -> bool:
    """Does one chain start with the other (`batch` and `batch.meta_info`, not `self.a` and `self.ab`)?"""
    short, long = sorted((chain, other), key=len)
    return long == short or long.startswith(short + ".")


def first_change(stmt: ast.stmt, read: frozenset[str], imported: frozenset[str]) -> str:
    """Why the statement may give the code after (or before) it other values of what it reads, or
    may leave the body so that the code does not run where its anchor runs ("": neither).
    `imported`: the names the module binds by import (a call on them changes no local object)."""
    leaving = _leaving(stmt)
    if leaving is not None:
        return f"`{one_line(leaving)}` (line {leaving.lineno}) may leave the body between its anchor and the code"
    for change in changes(stmt, imported):
        met = sorted(r for r in read if meets(r, change.chain))
        if met:
            return f"`{one_line(stmt)}` (line {stmt.lineno}) {change.how} {_what(change.chain, met)}"
    return ""


def _what(chain: str, met: list[str]) -> str:
    """`batch`, which the code reads; or `batch.meta_info`, part of `batch`, which the code reads."""
    whole = [r for r in met if len(r) < len(chain)]  # the code reads an object the chain is part of
    if len(whole) == len(met):
        return f"`{chain}`, part of `{whole[0]}`, which the code reads"
    return f"`{chain}`, which the code reads"


def changes(stmt: ast.stmt, imported: frozenset[str]) -> Iterator[Change]:
    """The chains a statement (its nested blocks included, its nested defs' bodies not) may change."""
    ignored = _comprehension_targets(stmt)
    for node in _evaluated(stmt):
        yield from _node_changes(node, imported, ignored)


def _node_changes(node: ast.AST, imported: frozenset[str], ignored: set[int]) -> Iterator[Change]:
    if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load) and id(node) not in ignored:
        yield Change(node.id, "rebinds")
    elif isinstance(node, (ast.Attribute, ast.Subscript)) and not isinstance(node.ctx, ast.Load):
        chain = dotted(node) if isinstance(node, ast.Attribute) else None
        yield Change(chain or _root(node.value), "changes")
    elif isinstance(node, ast.alias):
        yield Change(node.asname or node.name.split(".")[0], "rebinds")
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        yield Change(node.name, "rebinds")
    elif isinstance(node, (ast.Global, ast.Nonlocal)):
        yield from (Change(name, "rebinds") for name in node.names)
    elif isinstance(node, ast.Call):
        yield from _call_changes(node, imported)
    elif _clause_name(node):
        yield Change(_clause_name(node), "rebinds")


def _clause_name(node: ast.AST) -> str:
    """The name an `except ... as name` clause or a capture pattern binds ("": none)."""
    if isinstance(node, ast.MatchMapping):
        return node.rest or ""
    if isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)):
        return node.name or ""
    return ""


def _call_changes(call: ast.Call, imported: frozenset[str]) -> Iterator[Change]:
    """A method may change its object; a function may change what it is given."""
    func = call.func
    if isinstance(func, ast.Name) and func.id in _LOOKING and func.id not in imported:
        return
    if isinstance(func, ast.Attribute):
        receiver = _root(func.value)
        if receiver and receiver.split(".")[0] not in imported:
            yield Change(receiver, "may change")
    for argument in [*call.args, *(k.value for k in call.keywords)]:
        if isinstance(argument, ast.Starred):
            argument = argument.value
        if isinstance(argument, (ast.Name, ast.Attribute, ast.Subscript)):
            passed = _root(argument)
            if passed:
                yield Change(passed, "may change")


def _root(node: ast.AST) -> str:
    """The longest chain an expression's object is reached by (`batch` for `batch["a"].b()`)."""
    while True:
        chain = dotted(node)
        if chain is not None:
            return chain
        if isinstance(node, (ast.Attribute, ast.Subscript, ast.Starred)):
            node = node.value
        elif isinstance(node, ast.Call):
            node = node.func
        else:
            return ""


def _evaluated(node: ast.AST) -> Iterator[ast.AST]:
    """Every node of the statement that runs with it (a def's or lambda's body runs later; its
    name, decorators and defaults run here)."""
    yield node
    if isinstance(node, _LATER):
        later = [*(node.body if isinstance(node.body, list) else [node.body])]
        children = [c for c in ast.iter_child_nodes(node) if not any(c is b for b in later)]
    else:
        children = list(ast.iter_child_nodes(node))
    for child in children:
        yield from _evaluated(child)


def _comprehension_targets(stmt: ast.stmt) -> set[int]:
    """The names a comprehension binds in its own scope (they rebind nothing outside it)."""
    ignored: set[int] = set()
    for node in ast.walk(stmt):
        if isinstance(node, COMPREHENSIONS):
            for generator in node.generators:
                ignored.update(id(n) for n in ast.walk(generator.target) if isinstance(n, ast.Name))
    return ignored


def _leaving(stmt: ast.stmt, loops: int = 0) -> ast.stmt | None:
    """A `return`, `raise`, a `break` / `continue` of a loop around the statement, or an endless
    loop, in it: the body may stop there (a call that raises is not counted, as in the rest of the
    analysis, locate/flow.py)."""
    if isinstance(stmt, (ast.Return, ast.Raise)):
        return stmt
    if isinstance(stmt, (ast.Break, ast.Continue)):
        return stmt if loops == 0 else None
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return None
    if isinstance(stmt, ast.While) and constant_truth(stmt.test) is True and not _breaks(stmt.body):
        return stmt  # `while True:` with no `break` of its own: nothing after it runs
    inner = loops + 1 if isinstance(stmt, _LOOPS) else loops
    for child in _children(stmt):
        found = _leaving(child, loops if _in_orelse(stmt, child) else inner)
        if found is not None:
            return found
    return None


def _breaks(body: Sequence[ast.stmt]) -> bool:
    """Does a `break` of the loop whose body this is stand in it (not in a loop nested in it)?"""
    for stmt in body:
        if isinstance(stmt, ast.Break):
            return True
        if not isinstance(stmt, (*_LOOPS, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and _breaks(
            _children(stmt)
        ):
            return True
        if isinstance(stmt, _LOOPS) and _breaks(stmt.orelse):
            return True
    return False


def _children(stmt: ast.stmt) -> Sequence[ast.stmt]:
    found: list[ast.stmt] = []
    for name in ("body", "orelse", "finalbody"):
        found += getattr(stmt, name, None) or []
    for clause in [*getattr(stmt, "handlers", []), *getattr(stmt, "cases", [])]:
        found += clause.body
    return found


def _in_orelse(stmt: ast.stmt, child: ast.stmt) -> bool:
    """A loop's `else` runs outside the loop: a `break` there leaves the enclosing one."""
    return isinstance(stmt, _LOOPS) and any(child is s for s in stmt.orelse)
