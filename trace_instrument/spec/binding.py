"""`bind`: a point's code reads a name this tree spells otherwise.

`bind: {rollout_n: self.config.actor_rollout_ref.rollout.n}` makes every template of the point
read the expression where it read the name: the text is rewritten once, at load, so apply
inserts the tree's spelling and check, verify and remove recognise the point by the same text
(the manifest records it). The name keeps nothing of its own: no statement binding it is added
to the fork's function, so nothing of the fork's is shadowed.

The rewrite is proven: the template's text with each read replaced must parse to the template's
tree with each read replaced (a binding whose text would change anything else is refused), and
a template that binds the name itself (an assignment, a parameter, a loop target, `except ... as`,
a `case` capture, `global`) cannot have it bound. Whether the expression's own names exist where the code goes is the name
proof apply runs on every point's code (`unbound-name`).
"""

from __future__ import annotations

import ast
import copy
import hashlib
import keyword
from collections.abc import Mapping
from dataclasses import replace

from trace_instrument.model import CodePattern, Point, SpecSource, Template
from trace_instrument.spec.reading import Context
from trace_instrument.spec.yamlnodes import Node

# expressions that need no parentheses wherever a name stands (a primary or an atom)
_PRIMARY = (ast.Name, ast.Attribute, ast.Subscript, ast.Call, ast.Constant, ast.List, ast.Tuple, ast.Dict, ast.Set)
# what an expression standing for a value may not do: bind a name, or leave the function's flow
_NOT_A_READ = (ast.NamedExpr, ast.Yield, ast.YieldFrom, ast.Await)


class BindError(ValueError):
    """A binding that cannot be made (the message says why)."""


def read_bind(ctx: Context, node: Node) -> dict[str, str] | None:
    """`bind:` as name -> expression text; None after a problem (each one recorded)."""
    if not node.is_mapping or not node.items():
        ctx.problem(node.where("bind"), "must be a mapping of names to expressions ({name: expression})")
        return None
    bindings: dict[str, str] = {}
    ok = True
    for name, value in node.items():
        where = value.where(f"bind.{name}")
        if not _bindable(name):
            ctx.problem(where, f"{name!r} is not a Python name (nor `self.` and one)")
            ok = False
            continue
        if not value.is_string or not value.text.strip():
            ctx.problem(where, "must be an expression, written as a string")
            ok = False
            continue
        problem = expression_problem(value.text)
        if problem:
            ctx.problem(where, problem)
            ok = False
            continue
        bindings[name] = value.text.strip()
    return bindings if ok else None


def _bindable(key: str) -> bool:
    """A name, or an attribute of `self` (`self.steps_per_epoch`: a value the class no longer keeps)."""
    name = key.removeprefix("self.")
    return name.isidentifier() and not keyword.iskeyword(name)


def expression_problem(text: str) -> str:
    """Why `text` cannot stand for a name's value ("" when it can)."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        return f"{text.strip()!r} does not parse as an expression: {exc.msg}"
    bad = next((n for n in ast.walk(tree) if isinstance(n, _NOT_A_READ)), None)
    if bad is not None:
        return f"{text.strip()!r} does more than read a value ({type(bad).__name__.lower()})"
    return ""


def bind_point(ctx: Context, point: Point, bindings: Mapping[str, str], where: SpecSource) -> Point | None:
    """The point with its templates reading each bound name's expression; None after a problem."""
    read = {name for edit in point.edits for name in reads(edit.template)}
    unread = [name for name in bindings if name not in read]
    if unread:
        ctx.problem(where, f"binds {', '.join(map(repr, unread))}, which the code of {point.id} does not read")
        return None
    edits = []
    for edit in point.edits:
        try:
            edits.append(replace(edit, template=bound_template(edit.template, bindings)))
        except BindError as exc:
            ctx.problem(where, f"{point.id}, template {edit.template.name}: {exc}")
            return None
    markers = []
    for number, marker in enumerate(point.marker_patterns, start=1):
        try:  # a marker says the code: it reads what the code reads (else a hand edit is not told)
            markers.append(bound_marker(marker, bindings))
        except BindError as exc:
            ctx.problem(where, f"{point.id}, marker {number}: {exc}")
            return None
    return replace(point, edits=tuple(edits), marker_patterns=tuple(markers), bindings=tuple(sorted(bindings.items())))


def names_read(code: Template | CodePattern) -> set[str]:
    """The names the code reads (loads), anywhere in it."""
    return {n.id for s in code.stmts for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def reads(code: Template | CodePattern) -> set[str]:
    """What a binding may stand for in the code: the names it reads and the `self.NAME` it reads."""
    return names_read(code) | {_key(n) for s in code.stmts for n in ast.walk(s) if _self_read(n)}


def _self_read(node: ast.AST) -> bool:
    """Is the node a read of an attribute of `self` (`self.x`, not `self.x = ...`)?"""
    return (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
        and isinstance(node.ctx, ast.Load)
    )


def _key(node: ast.AST) -> str:
    """The binding key a read stands for: its name, or `self.` and its attribute."""
    return f"self.{node.attr}" if isinstance(node, ast.Attribute) else getattr(node, "id", "")


def bound_template(template: Template, bindings: Mapping[str, str]) -> Template:
    """The template with every read of a bound name replaced by its expression (text and tree)."""
    used = {name: text for name, text in bindings.items() if name in reads(template)}
    if not used:
        return template
    _refuse_own_bindings(template.stmts, used)
    new_text = _rewritten(template.text, used, template.expression)
    if template.expression:
        new_tree = ast.parse(new_text, mode="eval")
        stmts: tuple[ast.stmt, ...] = (ast.Expr(new_tree.body),)
    else:
        stmts = tuple(ast.parse(new_text).body)
    sha = hashlib.sha256(new_text.encode("utf-8")).hexdigest()[:16]
    return replace(template, text=new_text, stmts=stmts, sha=sha)


def bound_marker(marker: CodePattern, bindings: Mapping[str, str]) -> CodePattern:
    """The declared marker with every read of a bound name replaced, as the template's are."""
    used = {name: text for name, text in bindings.items() if name in reads(marker)}
    if not used:
        return marker
    _refuse_own_bindings(marker.stmts, used)
    new_text = _rewritten(marker.text + "\n", used, expression=False)
    return replace(marker, text=new_text.rstrip("\n"), stmts=tuple(ast.parse(new_text).body))


def _rewritten(source: str, used: Mapping[str, str], expression: bool) -> str:
    """The code's text with every read of a name in `used` replaced by its expression (proven)."""
    tree = ast.parse(source, mode="eval") if expression else ast.parse(source)
    found = sorted(
        (n for n in ast.walk(tree) if _is_read(n) and _key(n) in used),
        key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0)),
        reverse=True,
    )
    lines = source.splitlines(keepends=True)
    for node in found:  # from the end, so earlier positions stay right
        if not isinstance(node, (ast.Name, ast.Attribute)):
            continue  # (_is_read holds for these alone)
        if node.end_lineno != node.lineno or node.end_col_offset is None:
            raise BindError(f"cannot place {_key(node)!r}: its position is not known")
        raw = lines[node.lineno - 1].encode("utf-8")
        replacement = _spelled(used[_key(node)]).encode("utf-8")
        raw = raw[: node.col_offset] + replacement + raw[node.end_col_offset :]
        lines[node.lineno - 1] = raw.decode("utf-8")
    new_text = "".join(lines)
    _prove(tree, new_text, used, expression)
    return new_text


def _is_read(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)) or _self_read(node)


def _spelled(expression: str) -> str:
    """The expression as it may stand where a name stood (parenthesised unless a primary)."""
    node = ast.parse(expression, mode="eval").body
    if isinstance(node, _PRIMARY) and not (isinstance(node, ast.Constant) and _signed(node)):
        return expression
    return f"({expression})"


def _signed(node: ast.Constant) -> bool:
    return isinstance(node.value, (int, float, complex)) and not isinstance(node.value, bool)


def _refuse_own_bindings(stmts: tuple[ast.stmt, ...], used: Mapping[str, str]) -> None:
    """A name the code binds itself is the code's: binding it would change what it means."""
    for stmt in stmts:
        for node in ast.walk(stmt):
            bound = ""
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load) and node.id in used:
                bound = node.id
            elif isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Load) and _key(node) in used:
                bound = _key(node) if isinstance(node.value, ast.Name) and node.value.id == "self" else ""
            elif isinstance(node, ast.arg) and node.arg in used:
                bound = node.arg
            elif isinstance(node, (ast.Global, ast.Nonlocal)):
                bound = next((n for n in node.names if n in used), "")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name in used:
                bound = node.name
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                bound = next((n for n in (a.asname or a.name.split(".")[0] for a in node.names) if n in used), "")
            elif isinstance(node, ast.ExceptHandler) and node.name in used:
                bound = node.name or ""
            elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name in used:
                bound = node.name or ""  # `case [n]:`, `case [*n]:` bind n
            elif isinstance(node, ast.MatchMapping) and node.rest in used:
                bound = node.rest or ""  # `case {**n}:`
            if bound:
                raise BindError(f"the template binds {bound!r} itself (line {getattr(node, 'lineno', '?')})")


class _Substitute(ast.NodeTransformer):
    def __init__(self, used: Mapping[str, str]) -> None:
        self.used = {name: ast.parse(text, mode="eval").body for name, text in used.items()}

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in self.used and isinstance(node.ctx, ast.Load):
            return copy.deepcopy(self.used[node.id])
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if _self_read(node) and _key(node) in self.used:
            return copy.deepcopy(self.used[_key(node)])
        return self.generic_visit(node)


def _prove(tree: ast.AST, new_text: str, used: Mapping[str, str], expression: bool) -> None:
    """The rewritten text parses to the template's tree with the reads replaced, and to nothing else."""
    expected = _Substitute(used).visit(copy.deepcopy(tree))
    try:
        got = ast.parse(new_text, mode="eval") if expression else ast.parse(new_text)
    except SyntaxError as exc:
        raise BindError(f"the code with the binding does not parse: {exc.msg}") from None
    if ast.dump(expected) != ast.dump(got):
        raise BindError("the binding would change more of the code than the name's reads")
