"""Aligning a pattern with a statement that spells some of its names otherwise.

`gen_batch.repeat(repeat_times=rollout_n, interleave=True)` aligns with
`gen_batch.repeat(repeat_times=self.config.actor_rollout_ref.rollout.n, interleave=True)` by
reading `rollout_n` as `self.config.actor_rollout_ref.rollout.n`: everything else is the same
tree. Port uses it to find a point whose anchor's names a fork renamed (or a release computed
inline), and to learn how this tree spells a name the point's code reads (`bind`).
"""

from __future__ import annotations

import ast

from trace_instrument.spec.code import is_ellipsis

_IGNORED_FIELDS = frozenset({"ctx", "type_comment", "kind"})


def aligned(pattern: ast.AST, node: ast.AST) -> dict[str, str] | None:
    """How `node` spells each name `pattern` reads or assigns, where it spells it otherwise
    (name -> the code standing in its place), when the two are the same tree but for those
    names (each name read alike everywhere); None when they differ anywhere else. A `...` in
    the pattern matches anything, as in an anchor."""
    mapping: dict[str, str] = {}
    if not _align(pattern, node, mapping):
        return None
    renamed = {name: spelled for name, spelled in mapping.items() if spelled != name}
    if renamed and len(renamed) * 2 > _words(pattern):
        return None  # as much renamed as kept: two different statements of one shape
    return renamed


def _words(pattern: ast.AST) -> int:
    """How many words the pattern says: names, attributes, keywords and constants."""
    count = 0
    for sub in ast.walk(pattern):
        if isinstance(sub, (ast.Name, ast.Attribute, ast.keyword)) or (
            isinstance(sub, ast.Constant) and not is_ellipsis(sub)
        ):
            count += 1
    return count


def _align(pattern: ast.AST, node: ast.AST, mapping: dict[str, str]) -> bool:
    if isinstance(pattern, ast.Call) and isinstance(pattern.func, ast.Name) and not _same_callee(pattern.func, node):
        return False  # what is called is the statement's meaning: a function of another name is another call
    if isinstance(pattern, ast.Name):
        return _align_name(pattern, node, mapping)
    if is_ellipsis(pattern):
        return True
    if type(pattern) is not type(node):
        return False
    for name in pattern._fields:
        if name in _IGNORED_FIELDS:
            continue
        if not _align_field(getattr(pattern, name, None), getattr(node, name, None), mapping):
            return False
    return True


def _same_callee(callee: ast.Name, node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == callee.id


def _align_field(want: object, got: object, mapping: dict[str, str]) -> bool:
    if isinstance(want, list) and isinstance(got, list):
        if want and _is_wildcard(want[-1]):  # `f(a, ...)`, `if x: ...`: the rest is anything
            want = want[:-1]
            got = got[: len(want)] if len(got) >= len(want) else None
            if got is None:
                return False
        if len(want) != len(got):
            return False
        return all(_align_field(w, g, mapping) for w, g in zip(want, got))
    if isinstance(want, ast.AST) and isinstance(got, ast.AST):
        return _align(want, got, mapping)
    return want == got


def _is_wildcard(node: object) -> bool:
    return is_ellipsis(node) or (isinstance(node, ast.Expr) and is_ellipsis(node.value))


def _align_name(pattern: ast.Name, node: ast.AST, mapping: dict[str, str]) -> bool:
    if isinstance(node, ast.Name) and node.id == pattern.id and type(node.ctx) is type(pattern.ctx):
        spelled = pattern.id  # as itself (recorded: read otherwise elsewhere, it differs)
    elif isinstance(pattern.ctx, ast.Load):
        if not isinstance(node, ast.expr) or isinstance(node, ast.Starred):
            return False
        spelled = ast.unparse(node)
    elif isinstance(node, ast.Name) and type(node.ctx) is type(pattern.ctx):
        spelled = node.id  # an assigned name is renamed, never replaced by an expression
    else:
        return False
    return mapping.setdefault(pattern.id, spelled) == spelled


def pure_read(code: str) -> bool:
    """Does the code only read a value (names, attributes, constant subscripts), calling nothing?
    Such code means the same wherever it is evaluated again while its names hold."""
    try:
        node = ast.parse(code, mode="eval").body
    except SyntaxError:
        return False
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        if isinstance(node, ast.Subscript) and not isinstance(node.slice, ast.Constant):
            return False
        node = node.value
    return isinstance(node, (ast.Name, ast.Constant))


def repeatable(code: str) -> bool:
    """Does evaluating the code again only read a value: a pure read, or a `.get` of a constant
    key (and constant default) on one? Code that calls anything else (`next(it)`, `q.pop()`)
    would do verl's work a second time wherever a point's code reads it."""
    if pure_read(code):
        return True
    try:
        node = ast.parse(code, mode="eval").body
    except SyntaxError:
        return False
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and not node.keywords
        and 1 <= len(node.args) <= 2
        and all(isinstance(arg, ast.Constant) for arg in node.args)
        and pure_read(ast.unparse(node.func.value))
    )
