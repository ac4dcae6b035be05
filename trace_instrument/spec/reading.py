"""Checked reading of spec YAML: known keys, strings, lists of strings, anchors.

Shared by the point reader (loader.py) and the override reader (overrides.py).
Every problem is recorded on the load's context with file, line and key, and
reading goes on, so one load reports every problem at once.
"""

from __future__ import annotations

import ast
import collections
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from trace_instrument.model import Anchor, CodePattern, EditKind, SpecSource, Template
from trace_instrument.spec.code import (
    DEFINITIONS,
    PLACEHOLDER,
    CodeError,
    bad_captures,
    is_ellipsis,
    is_wild_body,
    parse_pattern,
    placeholders,
)
from trace_instrument.spec.errors import SpecProblem, did_you_mean
from trace_instrument.spec.yamlnodes import Node

ANCHOR_KINDS = frozenset(kind.value for kind in EditKind)
ANCHOR_KEYS = ANCHOR_KINDS | {"inside", "expr"}
PLACE_KEYS = ANCHOR_KEYS | {"alternatives"}  # everything that says where an edit goes
EDIT_KEYS = PLACE_KEYS | {"template", "code"}
POINT_ID = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")
SCOPE = re.compile(r"^(<module>|[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*)$")


@dataclass
class Context:
    """State of one load: where templates are, problems so far, edit ranks per file."""

    templates: Path
    problems: list[SpecProblem] = field(default_factory=list)
    template_cache: dict[tuple[str, bool], Template] = field(default_factory=dict)
    next_rank: collections.Counter[str] = field(default_factory=collections.Counter)
    user_dir: Path | None = None  # the user anchor folder being read (its templates come first)

    def problem(self, source: SpecSource, message: str) -> None:
        self.problems.append(SpecProblem(source, message))

    def take_rank(self, target: str) -> int:
        """The next rank among the edits of one target file (the order they are declared in)."""
        rank = self.next_rank[target]
        self.next_rank[target] += 1
        return rank


def mapping(
    ctx: Context,
    node: Node,
    allowed: Iterable[str],
    required: Iterable[str] = (),
    refused: Mapping[str, str] | None = None,
) -> dict[str, Node]:
    """The node's keys and values; unknown, repeated and missing keys are problems.

    `refused` maps keys that are known elsewhere but wrong here to the reason.
    """
    if not node.is_mapping:
        ctx.problem(node.where(), "must be a mapping")
        return {}
    allowed = set(allowed)
    data: dict[str, Node] = {}
    for key, value in node.items():
        if refused and key in refused:
            ctx.problem(value.where(key), refused[key])
            continue
        if key not in allowed:
            hint = did_you_mean(key, sorted(allowed))
            ctx.problem(value.where(key), f"unknown key {key!r}{hint} (allowed: {', '.join(sorted(allowed))})")
            continue
        if key in data:
            ctx.problem(value.where(key), f"key {key!r} given twice")
        data[key] = value
    for key in required:
        if key not in data:
            ctx.problem(node.where(key), f"missing required key {key!r}")
    return data


def string(ctx: Context, node: Node, key: str) -> str | None:
    """The node's text when it is a YAML string (quoted, plain or a block); else a problem."""
    if not node.is_string:
        ctx.problem(node.where(key), f"must be a string, not {node.kind_name}")
        return None
    return node.text


def strings(ctx: Context, node: Node, key: str) -> list[tuple[str, Node]] | None:
    """A YAML list of strings, each with its node (for error lines); else a problem."""
    if not node.is_sequence:
        ctx.problem(node.where(key), f"must be a list of strings, not {node.kind_name}")
        return None
    items = [(item, string(ctx, item, key)) for item in node.elements()]
    if any(text is None for _, text in items):
        return None
    return [(text, item) for item, text in items if text is not None]


def is_safe_relative(text: str) -> bool:
    """A relative posix path that stays inside its folder."""
    path = PurePosixPath(text)
    return bool(text) and not path.is_absolute() and ".." not in path.parts and "\\" not in text


# -- anchors ------------------------------------------------------------------------


def read_places(ctx: Context, node: Node, data: dict[str, Node]) -> list[Anchor] | None:
    """An edit's anchor and its alternatives (the ways of finding where it goes)."""
    primary = read_anchor(ctx, node, data)
    if primary is None:
        return None
    anchors = [primary]
    if "alternatives" not in data:
        return anchors
    alt_list = data["alternatives"]
    if not alt_list.is_sequence:
        ctx.problem(alt_list.where("alternatives"), "must be a list of anchors")
        return None
    for alt_node in alt_list.elements():
        alt = read_anchor(ctx, alt_node, mapping(ctx, alt_node, ANCHOR_KEYS))
        if alt is None:
            return None
        if not same_kind_of_edit(primary.kind, alt.kind):
            ctx.problem(alt.source, f"an alternative of a '{primary.kind.value}' anchor must do the same kind of edit")
            return None
        anchors.append(alt)
    return anchors


def same_kind_of_edit(first: EditKind, second: EditKind) -> bool:
    """Can one template serve both? Any two inserts can; a rewrite or swap only its own kind."""
    if first.inserts or second.inserts:
        return first.inserts == second.inserts
    return first is second


def read_anchor(ctx: Context, node: Node, data: dict[str, Node]) -> Anchor | None:
    """One anchor: exactly one edit kind, an optional `inside`, `expr` for replace_expr."""
    kinds = [k for k in data if k in ANCHOR_KINDS]
    if len(kinds) != 1:
        ctx.problem(node.where("anchor"), f"needs exactly one of {', '.join(sorted(ANCHOR_KINDS))}")
        return None
    kind = EditKind(kinds[0])
    target = pattern(ctx, data[kind.value], kind.value)
    inside = pattern(ctx, data["inside"], "inside") if "inside" in data else None
    expr = pattern(ctx, data["expr"], "expr") if "expr" in data else None
    if target is None or ("inside" in data and inside is None) or ("expr" in data and expr is None):
        return None
    source = data[kind.value].where(kind.value)
    if (kind is EditKind.REPLACE_EXPR) != (expr is not None):
        ctx.problem(source, "'expr' goes with 'replace_expr' and only with it")
        return None
    if kind in (EditKind.BODY_START, EditKind.BODY_END, EditKind.REPLACE_EXPR) and len(target.stmts) != 1:
        ctx.problem(source, f"a '{kind.value}' anchor is a single statement")
        return None
    if kind in (EditKind.BODY_START, EditKind.BODY_END) and not hasattr(target.stmts[0], "body"):
        ctx.problem(source, f"a '{kind.value}' anchor must be a block statement (def, for, with, if, ...)")
        return None
    if expr is not None and not isinstance(expr.stmts[0], ast.Expr):
        ctx.problem(data["expr"].where("expr"), "must be a single expression")
        return None
    if expr is not None and wildcard_expressions(expr.stmts[0]):
        ctx.problem(
            data["expr"].where("expr"), "holds a `...` wildcard; remove puts this expression back: write it out"
        )
        return None
    if kind is EditKind.REPLACE_EXPR and isinstance(target.stmts[0], DEFINITIONS):
        ctx.problem(
            source,
            "a 'replace_expr' anchor cannot be a def or class (they are found by name; "
            "an expression in their header is never compared): anchor a statement that holds the expression",
        )
        return None
    return Anchor(kind=kind, target=target, inside=inside, expr=expr, source=source)


def pattern(ctx: Context, node: Node, key: str) -> CodePattern | None:
    """Python code to find, parsed; a parse error names the line inside a block scalar."""
    if not node.is_string:
        ctx.problem(node.where(key), f"must be a string of Python code, not {node.kind_name}")
        return None
    try:
        return parse_pattern(node.text, node.where(key))
    except CodeError as exc:
        ctx.problem(SpecSource(node.file, node.block_first_line + exc.line - 1, key), f"code {exc}")
        return None


def template_fits(ctx: Context, where: SpecSource, anchors: list[Anchor], template: Template) -> bool:
    """A rewrite template must keep every anchored statement (captures); others use none."""
    misspelt = bad_captures(template.stmts)
    if misspelt:
        ctx.problem(
            where,
            f"{misspelt[0]!r} is not a capture name (__anchor_N__, __anchor_N_value__ or __anchor_N_body__)",
        )
        return False
    used = placeholders(template.stmts)
    if anchors[0].kind is not EditKind.REWRITE:
        if used:
            ctx.problem(where, "only 'rewrite' templates may use __anchor_N__ captures")
            return False
        return True
    indexes = [index for index, _ in used]
    if len(set(indexes)) != len(indexes):
        ctx.problem(where, "a rewrite template captures each anchored statement at most once")
        return False
    if all(_bare_capture(stmt) for stmt in template.stmts):
        # it would match the business code it keeps on any tree (present before apply ran), and
        # remove would build the anchor around that code again
        ctx.problem(where, "a rewrite template needs code of its own besides its captures")
        return False
    return all(_captures_fit(ctx, where, anchor, used) for anchor in anchors)


def _bare_capture(stmt: ast.stmt) -> bool:
    """A statement that is a capture alone (`__anchor_N__`, `__anchor_N_body__`): no code of the template's."""
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Name) and bool(PLACEHOLDER.match(stmt.value.id))


def _captures_fit(ctx: Context, where: SpecSource, anchor: Anchor, used: list[tuple[int, str]]) -> bool:
    count = len(anchor.target.stmts)
    if any(index >= count for index, _ in used):
        ctx.problem(where, f"captures beyond the {count} anchored statements (__anchor_0__ .. __anchor_{count - 1}__)")
        return False
    roles = dict(used)
    for index, role in used:
        stmt = anchor.target.stmts[index]
        if role == "body" and not hasattr(stmt, "body"):
            ctx.problem(where, f"__anchor_{index}_body__ needs a block statement at anchor position {index}")
            return False
        if role == "value" and not isinstance(stmt, (ast.Return, ast.Assign, ast.Expr, ast.AnnAssign)):
            ctx.problem(where, f"__anchor_{index}_value__ needs a return/assignment/expression at position {index}")
            return False
    for index, stmt in enumerate(anchor.target.stmts):
        # remove rebuilds every anchored statement not captured whole from the anchor's text
        kept = roles.get(index)
        if kept == "":
            continue
        if is_wild_body(getattr(stmt, "body", ())) and kept != "body":
            ctx.problem(
                anchor.source,
                f"anchored statement {index} has the body `...` but the template neither keeps it "
                f"(__anchor_{index}_body__) nor the whole statement (__anchor_{index}__): remove could not put it back",
            )
            return False
        if wildcard_expressions(stmt):
            ctx.problem(
                anchor.source,
                f"anchored statement {index} holds a `...` wildcard; a rewrite can only rebuild exact code: "
                f"write it out, or keep the statement whole with __anchor_{index}__",
            )
            return False
    return True


def wildcard_expressions(stmt: ast.stmt) -> list[ast.expr]:
    """`...` wildcards in a statement's code, but for a body that is `...` alone (which a body capture
    keeps, see _captures_fit). An `else: ...`, `finally: ...` or a nested block's `...` is one:
    nothing keeps those, and the rewrite rebuilds them from the anchor's text."""
    found: list[ast.expr] = []
    pending: list[ast.AST] = [stmt]
    while pending:
        node = pending.pop()
        for name, value in ast.iter_fields(node):
            if node is stmt and name == "body" and is_wild_body(value):
                continue
            children = value if isinstance(value, list) else [value]
            for child in children:
                if is_ellipsis(child):
                    found.append(child)
                elif isinstance(child, ast.AST):
                    pending.append(child)
    return found


# -- identities ------------------------------------------------------------------------


def point_id(ctx: Context, node: Node, key: str) -> str | None:
    """A point id: lower-case letters, digits, '.', '_', '-' (a bad one is a problem, read on)."""
    text = string(ctx, node, key)
    if text is not None and not POINT_ID.match(text):
        ctx.problem(node.where(key), f"{text!r}: ids are lower-case letters, digits, '.', '_', '-'")
    return text


def scope(ctx: Context, node: Node) -> str | None:
    """A dotted Class.method path, or <module> (a bad one is a problem, read on)."""
    text = string(ctx, node, "scope")
    if text is not None and not SCOPE.match(text):
        ctx.problem(node.where("scope"), f"{text!r} is not a dotted Class.method path or <module>")
    return text
