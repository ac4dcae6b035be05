"""One LibCST pass that makes every planned edit of a file.

All statement-level work happens where a statement list is rebuilt (a block
or the module), so inserts, removals and rewrites of neighbouring statements
compose; the traversal only descends into the blocks that hold a target.
"""

from __future__ import annotations

import ast
import functools
import textwrap
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import libcst as cst

from trace_instrument.edit import formatting
from trace_instrument.edit.cstmap import CstMap, pair
from trace_instrument.edit.digests import digest
from trace_instrument.edit.imports import ImportChanges, Statement, add_imports, prune_imports
from trace_instrument.edit.modules import parse_file
from trace_instrument.edit.regions import (
    Original,
    expression_text,
    placeholder_name,
    splice,
    split_lines,
    statements_span,
)
from trace_instrument.edit.render import (
    Captured,
    CapturedValue,
    Statements,
    body_placeholder,
    fill_template,
    native_newlines,
    own_leading_count,
    pattern_statements,
    restore_originals,
    template_expression,
    template_nodes,
    with_leading,
)
from trace_instrument.locate import Block, Placement
from trace_instrument.locate.match import Matcher, canonical
from trace_instrument.model import Anchor, EditKind, Template
from trace_instrument.spec.code import expr_pattern, placeholders

_NodeT = TypeVar("_NodeT", bound=cst.CSTNode)
UpdatedOf = Callable[[cst.CSTNode], Statement]  # an original statement as it stands after this pass
Expand = Callable[[cst.CSTNode], Statements]  # ... with what this pass inserts around it (none if removed)


class EditError(Exception):
    """An edit that cannot be made safely here (a crowded line, an expression found twice)."""


@dataclass(eq=False)
class _Rewrite:
    region: list[cst.CSTNode]  # original statements replaced, in order
    render: Callable[[UpdatedOf, Expand], Statements]


@dataclass
class _EditsByStatement:
    before: dict[int, list[tuple[int, Statements, bool, int]]] = field(default_factory=dict)  # rank, stmts, take, keep
    after: dict[int, list[tuple[int, Statements]]] = field(default_factory=dict)
    removed: dict[int, int] = field(default_factory=dict)  # statement -> leading lines it owns
    kept: dict[int, list[cst.CSTNode]] = field(default_factory=dict)  # removed statement -> what stays of it
    rewrites: dict[int, _Rewrite] = field(default_factory=dict)  # keyed by the region's first statement
    swaps: dict[int, cst.BaseExpression] = field(default_factory=dict)  # expression -> replacement
    targets: set[int] = field(default_factory=set)  # statements the pass must reach
    deep: set[int] = field(default_factory=set)  # statements whose whole subtree the pass must visit
    newline: str = "\n"  # the file's line ending, for line breaks inside inserted string literals
    layout: formatting.Layout | None = None  # the checkout's formatter, for the templates' statements
    unit: str = "    "  # one level of the file's indentation
    lines: Sequence[str] = ()  # the lines the ast's positions are in
    restored: dict[str, str] = field(default_factory=dict)  # placeholder name -> original text
    restored_lines: set[str] = field(default_factory=set)  # ... of those standing for whole lines

    def template(self, template: Template, stmt: ast.stmt) -> Statements:
        """A template's statements as the checkout's formatter writes them where `stmt` stands."""
        return list(formatting.statements(self.layout, template, indent_of(self.lines, stmt), self.unit))

    def placeholder(self, text: str, *, lines: bool) -> str:
        """A fresh name standing for `text` until the edited code is spliced."""
        name = placeholder_name(len(self.restored))
        self.restored[name] = text
        if lines:
            self.restored_lines.add(name)
        return name


class _Recorded:
    """The originals apply recorded for some removed blocks, given back where the file still holds
    exactly what apply made (the digest of the region's current text matches)."""

    def __init__(
        self,
        module: cst.Module,
        mapping: CstMap,
        originals: Mapping[Block, Original],
        text: str | None = None,
        positions: str | None = None,
        headers: Mapping[Block, str] | None = None,
    ) -> None:
        self.module = module
        self.mapping = mapping
        self.originals = originals
        self.headers = headers or {}  # what rewritten regions held before apply, exact or not
        self._text = text
        self._positions = positions

    @functools.cached_property
    def source(self) -> str:
        """The module's text (printed only when the caller did not give it)."""
        return self._text if self._text is not None else self.module.code

    @property
    def positions(self) -> str:
        """The text the ast's line and column numbers are in (a region is measured in it)."""
        return self._positions if self._positions is not None else self.source

    @functools.cached_property
    def lines(self) -> list[str]:
        return split_lines(self.positions)

    def region(self, block: Block) -> str | None:
        """The original text of a rewrite's region, when the region is as apply left it."""
        original = self.originals.get(block)
        if original is None or not block.top:
            return None
        start, end = statements_span(self.mapping, self.module, block.top)
        return original.text if digest("".join(self.lines[start:end])) == original.digest else None

    def expression(self, block: Block) -> str | None:
        """The original text of a replaced expression, when the replacement is as apply wrote it."""
        original = self.originals.get(block)
        if original is None or block.expr is None:
            return None
        return original.text if digest(expression_text(self.positions, block.expr)) == original.digest else None


def edit_module(
    module: cst.Module,
    tree: ast.Module,
    placements: Sequence[Placement] = (),
    removals: Sequence[Block] = (),
    imports: ImportChanges | None = None,
    originals: Mapping[Block, Original] | None = None,
    *,
    text: str | None = None,
    positions: str | None = None,
    headers: Mapping[Block, str] | None = None,
    layout: formatting.Layout | None = None,
) -> cst.Module:
    """The module with the placements made, the removals' blocks taken out (rewrites and swaps turned
    back), and the imports changed.

    `tree` is the ast of the same text: the placements and blocks name its statements. A removed
    block with an entry in `originals` gets that text back exactly when its region still holds
    what apply made; otherwise it is rebuilt from the anchor and what the placeholders captured.
    `text`: the module's text, when the caller has it (printing a module is costly);
    `positions`: the text the ast's positions are in, when not that (a chunk's statements keep
    their lines in the file). `headers`: what a removed rewrite's region held before apply, when
    it cannot go back whole: the statements it rebuilds take their headers from it (a fork's
    comment or quotes on a rebuilt line stay), where it still matches the anchor. `layout`: the
    checkout's formatter, which writes the templates' statements (None: as they are written).
    """
    mapping = pair(module, tree)
    recorded = _Recorded(module, mapping, originals or {}, text, positions, headers)
    plan = _EditsByStatement(
        newline=module.default_newline,
        layout=layout,
        unit=module.default_indent,
        lines=recorded.lines if layout else (),
    )
    formatting.prepare(layout, templates_at(placements, plan.lines), plan.unit)
    for placement in placements:
        _plan_placement(plan, mapping, placement)
    for block in removals:
        _plan_removal(plan, mapping, block, recorded)
    needed = {id(module)}
    for target in plan.targets | plan.deep:
        needed.add(target)
        needed.update(mapping.path_of.get(target, ()))
    result = module.visit(_Editor(plan, needed)) if plan.targets or plan.deep else module
    if plan.restored:
        result = parse_file(splice(result.code, plan.restored, frozenset(plan.restored_lines)))
    if imports is not None:
        result = prune_imports(result, imports) if imports.prune else add_imports(result, imports)
    return result


# -- planning -----------------------------------------------------------------------------------


def templates_at(placements: Sequence[Placement], lines: Sequence[str]) -> list[tuple[Template, str]]:
    """The statement templates the placements put in, each with the indentation it goes to
    (`lines`: the text the placements' positions are in), for formatting them in one go."""
    wanted = []
    for placement in placements:
        if placement.edit.kind.inserts and placement.neighbor is not None:
            wanted.append((placement.edit.template, indent_of(lines, placement.neighbor)))
        elif placement.edit.kind is not EditKind.REPLACE_EXPR and placement.region:
            wanted.append((placement.edit.template, indent_of(lines, placement.region[0])))
    return wanted


def indent_of(lines: Sequence[str], stmt: ast.stmt) -> str:
    """The indentation of a statement's line ("x" where other code shares the line before it)."""
    line = lines[stmt.lineno - 1] if 0 < stmt.lineno <= len(lines) else ""
    return line[: stmt.col_offset] if not line[: stmt.col_offset].strip() else "x"


def _plan_placement(plan: _EditsByStatement, mapping: CstMap, placement: Placement) -> None:
    edit = placement.edit
    if edit.kind.inserts:
        assert placement.neighbor is not None  # an insert goes next to a statement (AnchorFinder._insertion)
        neighbour = mapping.statement(placement.neighbor)
        _require_line(neighbour, placement)
        stmts = native_newlines(plan.template(edit.template, placement.neighbor), plan.newline)
        if placement.after:
            plan.after.setdefault(id(neighbour), []).append((edit.rank, stmts))
        else:
            plan.before.setdefault(id(neighbour), []).append(
                (edit.rank, stmts, placement.take_leading, placement.keep_leading)
            )
        plan.targets.add(id(neighbour))
    elif edit.kind is EditKind.REPLACE_EXPR:
        statement = mapping.statement(placement.anchored[0])
        assert placement.expr is not None  # a replace_expr placement names its expression (AnchorFinder)
        target = _find_expression(statement, placement.expr)
        plan.swaps[id(target)] = template_expression(edit.template)
        plan.deep.add(id(statement))
    else:
        _plan_rewrite(plan, mapping, placement)


def _plan_rewrite(plan: _EditsByStatement, mapping: CstMap, placement: Placement) -> None:
    region = [mapping.statement(s) for s in placement.region]
    for line in region:
        _require_line(line, placement)
    anchored = [mapping.statement(s) for s in placement.anchored]
    template = placement.edit.template

    def render(updated_of: UpdatedOf, expand: Expand) -> Statements:
        travelling: dict[int, Statements] = {}
        pending: Statements = []
        for line in region:
            if any(line is a for a in anchored):
                travelling[id(line)] = pending
                pending = []
            else:
                pending.extend(expand(line))
        captured = _captures_for_apply(template, anchored, updated_of, expand, travelling)
        written = plan.template(template, placement.region[0])
        produced = native_newlines(fill_template(template, captured, written), plan.newline)
        kept_whole = {id(anchored[i]) for i, role in placeholders(template.stmts) if role in ("", "value")}
        if id(region[0]) not in kept_whole:
            # comments above a replaced statement stay above its replacement
            produced = with_leading(produced, updated_of(region[0]).leading_lines)
        return produced

    plan.rewrites[id(region[0])] = _Rewrite(region, render)
    plan.targets.update(id(line) for line in region)


def _captures_for_apply(
    template: Template,
    anchored: list[cst.CSTNode],
    updated_of: UpdatedOf,
    expand: Expand,
    travelling: dict[int, Statements],
) -> Captured:
    statements: dict[int, Statements] = {}
    values: dict[int, CapturedValue] = {}
    bodies: dict[int, Statements] = {}
    footers: dict[int, Sequence[cst.EmptyLine]] = {}
    around: dict[int, tuple[Statements, Statements]] = {}
    for index, role in placeholders(template.stmts):
        line = anchored[index]
        lead = travelling.get(id(line), [])
        if role == "":
            statements[index] = [*lead, *expand(line)]
        elif role == "value":
            updated = updated_of(line)
            before, after = _split_at(expand(line), updated)
            values[index] = _captured_value(updated)
            around[index] = ([*lead, *before], after)
        else:
            block = updated_of(line)
            bodies[index] = [*lead, *_block_statements(block)]
            suite = getattr(block, "body", None)
            footers[index] = suite.footer if isinstance(suite, cst.IndentedBlock) else ()
    return Captured(statements, values, bodies, around, footers)


def _captured_value(line: Statement) -> CapturedValue:
    """What a `__anchor_N_value__` capture holds: the value of the line's return, assignment or
    expression statement (the loader allows no other), and the line."""
    if isinstance(line, cst.SimpleStatementLine):
        small = line.body[0]
        if isinstance(small, (cst.Return, cst.Assign, cst.AnnAssign, cst.Expr)):
            return small.value, line
    raise EditError(f"a value capture's statement is not a return, assignment or expression: {_code(line)!r}")


def _block_statements(block: Statement) -> Statements:
    """The statements of a block statement's indented body (`__anchor_N_body__`; the locate layer
    refuses a one-line block, whose body would be a suite)."""
    suite = getattr(block, "body", None)
    if not isinstance(suite, cst.IndentedBlock):
        raise EditError(f"a body capture's statement has no indented block: {_code(block)!r}")
    return [_statement(stmt) for stmt in suite.body]


def _statement(node: cst.CSTNode) -> Statement:
    """A node of a module's or block's statement list, typed as one (LibCST types a block's
    statements as BaseStatement, whose only kinds these are). A one-line block's suite
    (`if x: a; b`) is never edited: its statements cannot be told apart."""
    if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
        return node
    raise EditError(f"{_code(node).strip()!r}: a one-line block's statements cannot be edited safely")


def _code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


def _split_at(stmts: Statements, pivot: cst.CSTNode) -> tuple[Statements, Statements]:
    """The statements before and after `pivot` (by identity)."""
    for index, stmt in enumerate(stmts):
        if stmt is pivot:
            return stmts[:index], stmts[index + 1 :]
    return stmts, []


def _plan_removal(plan: _EditsByStatement, mapping: CstMap, block: Block, recorded: _Recorded) -> None:
    edit = block.edit
    if edit.kind.inserts:
        first = mapping.statement(block.top[0])
        plan.removed[id(first)] = own_leading_count(edit.template) if block.exact else 0
        if block.kept:  # the fork's lines inside a hand-edited block stay where the block stood
            plan.removed[id(first)] = _template_comments_above(first, edit.template)
            plan.kept[id(first)] = [mapping.statement(s) for s in block.kept]
        for stmt in block.top[1:]:
            plan.removed[id(mapping.statement(stmt))] = -1
        plan.targets.update(id(mapping.statement(s)) for s in block.top)
    elif edit.kind is EditKind.REPLACE_EXPR:
        statement = mapping.statement(block.top[0])
        original = expr_pattern(edit.anchors[0]).text
        if block.expr is None:  # recognised, but the replacement is in the statement's header twice
            raise EditError(
                f"line {block.line}: {edit.template.text!r} is in the statement more than once; "
                f"cannot tell which one to turn back into {original!r}"
            )
        target = _find_expression(statement, block.expr)
        exact = recorded.expression(block)
        if exact is None:
            plan.swaps[id(target)] = cst.parse_expression(original)
        else:
            plan.swaps[id(target)] = cst.Name(plan.placeholder(exact, lines=False))
        plan.deep.add(id(statement))
    else:
        exact = recorded.region(block)
        if exact is None:
            _plan_unrewrite(plan, mapping, block, recorded.headers.get(block))
        else:
            _plan_restore(plan, mapping, block, exact)


def _template_comments_above(node: cst.CSTNode, template: Template) -> int:
    """How many of the lines above a hand-edited block are the template's own comment lines, as it
    put them there (the last lines above it, equal one for one); the others are the fork's."""
    own = (
        list(template_nodes(template)[0].leading_lines)[-own_leading_count(template) :]
        if template.leading_lines
        else []
    )
    above = list(getattr(node, "leading_lines", ()))
    if not own or len(above) < len(own):
        return 0
    said = [(line.comment.value if line.comment else None) for line in above[-len(own) :]]
    return len(own) if said == [(line.comment.value if line.comment else None) for line in own] else 0


def _plan_restore(plan: _EditsByStatement, mapping: CstMap, block: Block, text: str) -> None:
    """A rewrite's region goes back to the text it held before apply, byte for byte (comments
    above it included: the region's recorded text starts at them)."""
    region = [mapping.statement(s) for s in block.top]
    line = cst.SimpleStatementLine(body=[cst.Expr(cst.Name(plan.placeholder(text, lines=True)))])

    def render(updated_of: UpdatedOf, expand: Expand) -> Statements:
        return [line]

    plan.rewrites[id(region[0])] = _Rewrite(region, render)
    plan.targets.update(id(stmt) for stmt in region)


def _plan_unrewrite(plan: _EditsByStatement, mapping: CstMap, block: Block, before_apply: str | None = None) -> None:
    region = [mapping.statement(s) for s in block.top]
    caps = block.captures
    assert caps is not None  # a rewrite block is recognised by what its placeholders captured
    anchor = block.edit.anchors[0]
    own = own_leading_count(block.edit.template)
    captured_ids = {id(s) for s in caps.statements.values()} | {id(h) for _, h in caps.values.values()}

    def render(updated_of: UpdatedOf, expand: Expand) -> Statements:
        def kept(stmts: Iterable[ast.stmt]) -> Statements:
            return [s for a in stmts for s in expand(mapping.statement(a))]

        # other points' code that sat inside the rewritten region goes back in front of the
        # anchored statement it preceded (inside a captured body: in front of the body's statement);
        # what preceded template-only code goes before the last one, or ends the last body
        in_bodies = {id(s) for stmts in caps.bodies.values() for s in stmts}
        tails = {id(s) for stmts in caps.tails.values() for s in stmts}
        orphans = kept(
            s
            for key, items in caps.attached.items()
            if key not in captured_ids | in_bodies
            for s in items
            if id(s) not in tails
        )
        last_index = max([*caps.statements, *caps.values], default=0)
        whole_only = not caps.statements and not caps.values  # nothing but bodies to travel with

        def travelling(node: ast.stmt, index: int) -> Statements:
            own_lead = kept(caps.attached.get(id(node), []))
            return [*orphans, *own_lead] if index == last_index else own_lead

        statements = {i: [*travelling(s, i), *kept([s])] for i, s in caps.statements.items()}
        values: dict[int, CapturedValue] = {}
        around: dict[int, tuple[Statements, Statements]] = {}
        for i, (_value, holder) in caps.values.items():
            values[i] = _captured_value(updated_of(mapping.statement(holder)))
            around[i] = (travelling(holder, i), [])
        bodies = {
            i: kept([*(s for stmt in stmts for s in [*caps.attached.get(id(stmt), []), stmt]), *caps.tails.get(i, [])])
            for i, stmts in caps.bodies.items()
        }
        if whole_only and orphans and bodies:
            last_body = max(bodies, key=lambda i: _template_position(block, i))
            bodies[last_body] = [*bodies[last_body], *orphans]
        footers = _footers_handed_down(block, mapping, region, updated_of)
        captured = Captured(statements, values, bodies, around, footers)
        patterns = _as_written(anchor, before_apply) or pattern_statements(anchor.target)
        restored = restore_originals(patterns, captured)
        if id(block.top[0]) in captured_ids | {id(s) for body in caps.bodies.values() for s in body}:
            return restored  # the lines above the region lead captured code: they came back with it
        first = updated_of(region[0])
        foreign = list(first.leading_lines[: max(0, len(first.leading_lines) - own)])
        return with_leading(restored, foreign)

    plan.rewrites[id(region[0])] = _Rewrite(region, render)
    plan.targets.update(id(line) for line in region)
    for holder in [h for _, h in caps.values.values()]:
        plan.targets.add(id(mapping.statement(holder)))


def _as_written(anchor: Anchor, text: str | None) -> tuple[Statement, ...] | None:
    """The anchored statements as the region held them before apply (`text`), when it holds them
    alone and each still matches the anchor: rebuilt from these, a header keeps its comment and
    its quotes. None: rebuild from the anchor's text."""
    if not text:
        return None
    flush = textwrap.dedent(text)
    try:
        module = cst.parse_module(flush)
        tree = ast.parse(flush).body
    except (cst.ParserSyntaxError, SyntaxError, ValueError):
        return None  # (a string at column 0 in the region: it does not dedent)
    statements = [s for s in module.body if isinstance(s, (cst.SimpleStatementLine, cst.BaseCompoundStatement))]
    pattern = list(anchor.target.stmts)
    if not (len(statements) == len(tree) == len(pattern)):
        return None  # other points' code was in it too
    if not all(Matcher().statement(p, t, rebuilt=True) for p, t in zip(pattern, tree)):
        return None
    return tuple(s.with_changes(leading_lines=()) for s in statements)


def _template_position(block: Block, index: int) -> int:
    """Where body capture `index` stands among the template's statements."""
    nodes = list(template_nodes(block.edit.template))
    return next((at for at, node in enumerate(nodes) if body_placeholder(node) == index), len(nodes))


def _footers_handed_down(
    block: Block, mapping: CstMap, region: list[cst.CSTNode], updated_of: UpdatedOf
) -> dict[int, Sequence[cst.EmptyLine]]:
    """Comment lines apply moved from the end of a captured block onto the template statement after
    it (render.fill_template): they end the rebuilt block again."""
    caps = block.captures
    assert caps is not None  # a rewrite block is recognised by what its placeholders captured
    template = list(template_nodes(block.edit.template))
    footers: dict[int, Sequence[cst.EmptyLine]] = {}
    for at, node in enumerate(template[:-1]):
        index = body_placeholder(node)
        body = caps.bodies.get(index)
        if not body:
            continue
        last = mapping.statement(body[-1])
        position = next((i for i, line in enumerate(region) if line is last), None)
        following = region[position + 1] if position is not None and position + 1 < len(region) else None
        holder = next((h for h in caps.holders.values() if mapping.statement(h) is following), None)
        if following is None or holder is None:
            continue  # other code stands between: its lines are its own
        leading = list(updated_of(following).leading_lines)
        own = len(template[at + 1].leading_lines)
        footers[index] = leading[: max(0, len(leading) - own)]
    return footers


def _is_definition(node: cst.CSTNode) -> bool:
    return isinstance(node, (cst.FunctionDef, cst.ClassDef))


def _require_line(node: cst.CSTNode, placement: Placement) -> None:
    """The locate layer refuses crowded lines already; this is the last guard before an edit."""
    crowded = isinstance(node, cst.SimpleStatementSuite) or (
        isinstance(node, cst.SimpleStatementLine) and len(node.body) > 1
    )
    if crowded:
        raise EditError(f"line {placement.line}: holds more than one statement; cannot edit it safely")


def _find_expression(statement: cst.CSTNode, target: ast.expr) -> cst.BaseExpression:
    """The LibCST expression in a statement's header that is the ast expression `target`."""
    wanted = canonical(target)
    found: list[cst.BaseExpression] = []
    empty = cst.Module(body=[])

    class _Search(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            if isinstance(node, (cst.IndentedBlock, cst.SimpleStatementSuite)):
                return False
            if isinstance(node, cst.BaseExpression):
                try:
                    code = empty.code_for_node(node)
                    if canonical(ast.parse(code.strip(), mode="eval").body) == wanted:
                        found.append(node)
                        return False
                except SyntaxError:
                    pass
            return True

    statement.visit(_Search())
    if len(found) != 1:
        raise EditError(f"expression {ast.unparse(target)!r} found {len(found)} times in its statement")
    return found[0]


# -- the pass -------------------------------------------------------------------------------------


class _Editor(cst.CSTTransformer):
    def __init__(self, plan: _EditsByStatement, needed: set[int]) -> None:
        super().__init__()
        self.plan = plan
        self.needed = needed
        self.updated: dict[int, cst.CSTNode] = {}
        self.expanded: dict[int, Statements] = {}
        self._deep = 0

    def on_visit(self, node: cst.CSTNode) -> bool:
        if id(node) in self.plan.deep:
            self._deep += 1  # balanced in on_leave, however deep statements nest
            return True
        return bool(self._deep) or id(node) in self.needed

    def on_leave(self, original: _NodeT, updated: _NodeT) -> _NodeT | cst.RemovalSentinel | cst.FlattenSentinel[_NodeT]:
        # LibCST hands on_leave the updated copy of the original's own class
        if id(original) in self.plan.deep:
            self._deep -= 1
        if id(original) in self.plan.swaps:
            replacement = self.plan.swaps[id(original)]
            if isinstance(updated, cst.BaseExpression):  # swaps replace expressions (_find_expression)
                replacement = replacement.with_changes(lpar=updated.lpar, rpar=updated.rpar)
            # LibCST's stubs say on_leave returns the node's own class; an expression may become any other
            return replacement  # type: ignore[return-value]
        if isinstance(original, cst.IndentedBlock) and isinstance(updated, cst.IndentedBlock):
            return updated.with_changes(body=self._rebuild(original.body, updated.body))
        if isinstance(original, cst.Module) and isinstance(updated, cst.Module):
            return updated.with_changes(body=self._rebuild(original.body, updated.body))
        if isinstance(original, (cst.BaseStatement, cst.BaseSmallStatement)):
            self.updated[id(original)] = updated
        return updated

    def _updated_of(self, original: cst.CSTNode) -> Statement:
        return _statement(self.updated.get(id(original), original))

    def _expand(self, original: cst.CSTNode) -> Statements:
        """A statement as it stands after this pass: with its inserts, or gone."""
        return self.expanded.get(id(original), [self._updated_of(original)])

    def _rebuild(self, originals: Sequence[cst.BaseStatement], updated: Sequence[cst.BaseStatement]) -> Statements:
        plan = self.plan
        for original, new in zip(originals, updated):
            self.updated[id(original)] = new
        for original in originals:
            if id(original) in plan.removed:
                self.expanded[id(original)] = [self._updated_of(k) for k in plan.kept.get(id(original), [])]
            else:
                self.expanded[id(original)] = self._around(original)
        out: Statements = []
        carry: list[cst.EmptyLine] = []
        index = 0
        while index < len(originals):
            original = originals[index]
            rewrite = plan.rewrites.get(id(original))
            if rewrite is not None:
                produced = rewrite.render(self._updated_of, self._expand)
                index += len(rewrite.region)
            else:
                produced = self.expanded[id(original)]
                owned = plan.removed.get(id(original), -1)
                if owned >= 0:
                    # lines above a removed block that are not its own go to what follows it
                    lines = self._updated_of(original).leading_lines
                    carry.extend(lines[: max(0, len(lines) - owned)])
                index += 1
            if produced and carry:
                produced = with_leading(produced, carry)
                carry = []
            out.extend(produced)
        return out

    def _around(self, original: cst.CSTNode) -> Statements:
        """The statement with the templates inserted before and after it."""
        plan = self.plan
        current = self._updated_of(original)
        before: Statements = []
        for _rank, stmts, take_leading, keep in sorted(plan.before.get(id(original), []), key=lambda item: item[0]):
            # comments above a statement go above what is inserted before it; a def keeps its own spacing
            lines = list(current.leading_lines)
            taken = lines[: max(0, len(lines) - keep)]
            if take_leading and not before and taken and not _is_definition(stmts[0]):
                stmts = with_leading(stmts, taken)
                current = current.with_changes(leading_lines=lines[len(taken) :])
            before.extend(stmts)
        after: Statements = []
        for _rank, stmts in sorted(plan.after.get(id(original), []), key=lambda item: item[0]):
            after.extend(stmts)
        if current is not self._updated_of(original):
            self.updated[id(original)] = current
        return [*before, current, *after]
