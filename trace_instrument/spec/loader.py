"""Build the catalog from anchors/*.yaml and templates/, rejecting anything malformed.

Every problem names the spec file, the line and the key; all problems of a
load are reported together.
"""

from __future__ import annotations

import ast
import collections
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from trace_instrument.model import (
    EXTRAS,
    FACILITIES,
    Anchor,
    Catalog,
    CodePattern,
    Edit,
    EditKind,
    Point,
    RuntimeModule,
    SpecSource,
    Template,
)
from trace_instrument.spec import paths
from trace_instrument.spec.code import CodeError, parse_pattern, parse_template, placeholders
from trace_instrument.spec.signatures import defined_helpers, signatures_in
from trace_instrument.spec.yamlnodes import Node, SpecError, SpecProblem, as_plain, read_yaml

EARLIER_SUFFIX = ".earlier"  # next to the runtime's template folder: hashes of older releases
CATALOG_FILE = "_catalog.yaml"
CATALOG_KEYS = {"validated_on", "runtime", "description"}
RUNTIME_KEYS = {"target", "source"}
FILE_KEYS = {"file", "points", "description"}
ANCHOR_KINDS = {kind.value for kind in EditKind}
ANCHOR_KEYS = ANCHOR_KINDS | {"inside", "expr"}
EDIT_KEYS = ANCHOR_KEYS | {"template", "code", "alternatives"}
POINT_KEYS = EDIT_KEYS | {
    "id",
    "facility",
    "title",
    "scope",
    "edits",
    "imports",
    "requires",
    "marker",
    "extra",
    "changes_behaviour",
    "description",
}
REQUIRED_POINT_KEYS = ("id", "facility", "title", "scope")
POINT_ID = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")
SCOPE = re.compile(r"^(<module>|[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*)$")


@dataclass
class _Context:
    """State of one load: where templates are, problems so far, edit ranks per file."""

    templates: Path
    problems: list[SpecProblem] = field(default_factory=list)
    template_cache: dict[tuple[str, bool], Template] = field(default_factory=dict)
    next_rank: collections.Counter = field(default_factory=collections.Counter)
    user_dir: Path | None = None  # the user anchor folder being read (its templates come first)

    def problem(self, source: SpecSource, message: str) -> None:
        self.problems.append(SpecProblem(source, message))


def load_catalog(
    anchors_dirs: Iterable[Path] | None = None,
    templates_dir: Path | None = None,
    *,
    shipped: bool = True,
) -> Catalog:
    """Load the shipped catalog plus any user anchor folders (later folders add points).

    With shipped=False only the given folders are read (tests, experiments).
    """
    ctx = _Context(templates=templates_dir or paths.templates_dir())
    shipped_dir = paths.anchors_dir() if shipped else None
    folders = [*([shipped_dir] if shipped_dir else []), *(anchors_dirs or [])]
    validated_on: tuple[str, ...] = ()
    runtime = RuntimeModule(target_dir="verl/utils/tracing", files=())
    if shipped_dir is not None:
        validated_on, runtime = _read_catalog_file(ctx, shipped_dir)
    points: list[Point] = []
    for folder in folders:
        user_dir = None if folder == shipped_dir else Path(folder)
        if user_dir is not None and not user_dir.is_dir():
            ctx.problem(SpecSource(str(folder), 0), "anchor folder not found")
            continue
        for spec_file in sorted(Path(folder).glob("*.yaml")):
            if spec_file.name == CATALOG_FILE:
                continue
            points.extend(_read_spec_file(ctx, spec_file, _display(spec_file, user_dir), user_dir))
    _check_ids(ctx, points)
    helpers = frozenset(name for p in points for e in p.edits for name in defined_helpers(e.template.stmts))
    points = _with_markers(ctx, points, helpers)
    if ctx.problems:
        raise SpecError(ctx.problems)
    return Catalog(points=tuple(points), runtime=runtime, validated_on=validated_on, helpers=helpers)


def _display(path: Path, user_dir: Path | None) -> str:
    return str(path) if user_dir is not None else f"anchors/{path.name}"


# -- catalog metadata ---------------------------------------------------------


def _read_catalog_file(ctx: _Context, folder: Path) -> tuple[tuple[str, ...], RuntimeModule]:
    root = read_yaml(folder / CATALOG_FILE, f"anchors/{CATALOG_FILE}")
    data = _mapping(ctx, root, CATALOG_KEYS, required=("validated_on", "runtime"))
    versions = tuple(str(v) for v in as_plain(data["validated_on"])) if "validated_on" in data else ()
    runtime = RuntimeModule(target_dir="verl/utils/tracing", files=())
    if "runtime" in data:
        spec = _mapping(ctx, data["runtime"], RUNTIME_KEYS, required=("target", "source"))
        if "target" in spec and "source" in spec:
            runtime = _read_runtime(ctx, spec["target"], spec["source"])
    return versions, runtime


def _read_runtime(ctx: _Context, target: Node, source: Node) -> RuntimeModule:
    folder = ctx.templates / source.text
    if not folder.is_dir():
        ctx.problem(source.where("runtime.source"), f"template folder {source.text!r} not found")
        return RuntimeModule(target_dir=target.text, files=())
    files = []
    for path in sorted(folder.glob("*.py")):
        content = path.read_bytes()
        try:
            compile(content, str(path), "exec", dont_inherit=True)
        except SyntaxError as exc:
            ctx.problem(source.where("runtime.source"), f"{path.name}:{exc.lineno}: does not compile: {exc.msg}")
        files.append((path.name, content))
    if not _is_safe_relative(target.text):
        ctx.problem(target.where("runtime.target"), f"{target.text!r} is not a path inside the checkout")
    earlier = _read_earlier(ctx, folder.with_name(folder.name + EARLIER_SUFFIX))
    return RuntimeModule(target_dir=target.text, files=tuple(files), earlier=earlier)


def _read_earlier(ctx: _Context, path: Path) -> dict[str, tuple[str, ...]]:
    """`<file> <hash>` lines: the runtime files earlier releases shipped (apply updates them)."""
    earlier: dict[str, list[str]] = {}
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 2 or not re.fullmatch(r"[0-9a-f]{16}", parts[1]):
            ctx.problem(SpecSource(path.name, number), "expected `<file name> <16 hex digits>`")
            continue
        earlier.setdefault(parts[0], []).append(parts[1])
    return {name: tuple(hashes) for name, hashes in earlier.items()}


# -- point files ----------------------------------------------------------------


def _read_spec_file(ctx: _Context, path: Path, display: str, user_dir: Path | None) -> list[Point]:
    ctx.user_dir = user_dir
    try:
        root = read_yaml(path, display)
    except SpecError as exc:
        ctx.problems.extend(exc.problems)
        return []
    data = _mapping(ctx, root, FILE_KEYS, required=("file", "points"))
    if "file" not in data or "points" not in data:
        return []
    target = data["file"].text
    if not _is_safe_relative(target) or not target.endswith(".py"):
        ctx.problem(data["file"].where("file"), f"{target!r} is not a .py path inside the checkout")
        return []
    if not data["points"].is_sequence:
        ctx.problem(data["points"].where("points"), "must be a list of points")
        return []
    points = []
    for node in data["points"].elements():
        point = _read_point(ctx, node, target, display)
        if point is not None:
            points.append(point)
    return points


def _read_point(ctx: _Context, node: Node, target: str, display: str) -> Point | None:
    data = _mapping(ctx, node, POINT_KEYS, required=REQUIRED_POINT_KEYS)
    if any(key not in data for key in REQUIRED_POINT_KEYS):
        return None
    point_id = data["id"].text
    where = node.where(f"point {point_id}")
    if not POINT_ID.match(point_id):
        ctx.problem(data["id"].where("id"), f"{point_id!r}: ids are lower-case letters, digits, '.', '_', '-'")
    facility = data["facility"].text
    if facility not in FACILITIES:
        ctx.problem(
            data["facility"].where("facility"), f"unknown facility {facility!r} (one of {', '.join(FACILITIES)})"
        )
    scope = data["scope"].text
    if not SCOPE.match(scope):
        ctx.problem(data["scope"].where("scope"), f"{scope!r} is not a dotted Class.method path or <module>")
    extra = data["extra"].text if "extra" in data else None
    if extra is not None and extra not in EXTRAS:
        ctx.problem(data["extra"].where("extra"), f"unknown extra {extra!r} (one of {', '.join(EXTRAS)})")
    edits = _read_edits(ctx, node, data, target)
    if not edits:
        return None
    if any(not e.kind.inserts for e in edits) and "changes_behaviour" not in data:
        ctx.problem(where, "rewrites business code: say how in 'changes_behaviour'")
    return Point(
        id=point_id,
        facility=facility,
        title=data["title"].text,
        file=target,
        scope=scope,
        edits=tuple(edits),
        imports=_read_imports(ctx, data.get("imports")),
        requires=tuple(str(r) for r in as_plain(data["requires"])) if "requires" in data else (),
        markers=frozenset(),
        marker_patterns=_read_markers(ctx, data.get("marker")),
        extra=extra,
        changes_behaviour=data["changes_behaviour"].text if "changes_behaviour" in data else "",
        source=where,
    )


def _read_edits(ctx: _Context, node: Node, data: dict[str, Node], target: str) -> list[Edit]:
    if "edits" in data:
        stray = sorted(k for k in data if k in EDIT_KEYS)
        if stray:
            ctx.problem(data[stray[0]].where(stray[0]), "put edit keys inside 'edits' or use no 'edits' list")
        if not data["edits"].is_sequence or not data["edits"].elements():
            ctx.problem(data["edits"].where("edits"), "must be a non-empty list of edits")
            return []
        edit_nodes = [(n, _mapping(ctx, n, EDIT_KEYS, required=())) for n in data["edits"].elements()]
    else:
        edit_nodes = [(node, {k: v for k, v in data.items() if k in EDIT_KEYS})]
    edits = []
    for edit_node, edit_data in edit_nodes:
        edit = _read_edit(ctx, edit_node, edit_data, target)
        if edit is not None:
            edits.append(edit)
    return edits if len(edits) == len(edit_nodes) else []


def _read_edit(ctx: _Context, node: Node, data: dict[str, Node], target: str) -> Edit | None:
    primary = _read_anchor(ctx, node, data)
    if primary is None:
        return None
    anchors = [primary]
    if "alternatives" in data:
        alt_list = data["alternatives"]
        if not alt_list.is_sequence:
            ctx.problem(alt_list.where("alternatives"), "must be a list of anchors")
            return None
        for alt_node in alt_list.elements():
            alt = _read_anchor(ctx, alt_node, _mapping(ctx, alt_node, ANCHOR_KEYS, required=()))
            if alt is None:
                return None
            if alt.kind.inserts != primary.kind.inserts or (not alt.kind.inserts and alt.kind is not primary.kind):
                ctx.problem(
                    alt.source, f"an alternative of a '{primary.kind.value}' anchor must do the same kind of edit"
                )
                return None
            anchors.append(alt)
    template = _read_template(ctx, node, data, primary.kind)
    if template is None:
        return None
    if not _check_template_fits(ctx, node, primary, anchors, template):
        return None
    rank = ctx.next_rank[target]
    ctx.next_rank[target] += 1
    return Edit(anchors=tuple(anchors), template=template, rank=rank)


def _read_anchor(ctx: _Context, node: Node, data: dict[str, Node]) -> Anchor | None:
    kinds = [k for k in data if k in ANCHOR_KINDS]
    if len(kinds) != 1:
        ctx.problem(node.where("anchor"), f"needs exactly one of {', '.join(sorted(ANCHOR_KINDS))}")
        return None
    kind = EditKind(kinds[0])
    target = _pattern(ctx, data[kind.value], kind.value)
    inside = _pattern(ctx, data["inside"], "inside") if "inside" in data else None
    expr = _pattern(ctx, data["expr"], "expr") if "expr" in data else None
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
    return Anchor(kind=kind, target=target, inside=inside, expr=expr, source=source)


def _pattern(ctx: _Context, node: Node, key: str) -> CodePattern | None:
    if not node.is_scalar:
        ctx.problem(node.where(key), "must be a string of Python code")
        return None
    try:
        return parse_pattern(node.text, node.where(key))
    except CodeError as exc:
        ctx.problem(SpecSource(node.file, node.block_first_line + exc.line - 1, key), f"code {exc}")
        return None


def _read_template(ctx: _Context, node: Node, data: dict[str, Node], kind: EditKind) -> Template | None:
    has_file, has_code = "template" in data, "code" in data
    if has_file == has_code:
        ctx.problem(node.where("template"), "needs exactly one of 'template' (a file under templates/) or 'code'")
        return None
    expression = kind is EditKind.REPLACE_EXPR
    if has_code:
        code_node = data["code"]
        try:
            return parse_template(f"{code_node.file}:{code_node.line}", code_node.text, expression=expression)
        except CodeError as exc:
            ctx.problem(SpecSource(code_node.file, code_node.block_first_line + exc.line - 1, "code"), str(exc))
            return None
    name = data["template"].text
    where = data["template"].where("template")
    if not _is_safe_relative(name):
        ctx.problem(where, f"{name!r} is not a path inside templates/")
        return None
    own = ctx.user_dir / name if ctx.user_dir is not None else None
    path = own if own is not None and own.is_file() else ctx.templates / name
    display = str(path) if path == own else f"templates/{name}"
    key = (str(path), expression)
    if key in ctx.template_cache:
        return ctx.template_cache[key]
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        ctx.problem(where, f"template {name!r} cannot be read: {exc}")
        return None
    try:
        template = parse_template(display, text, expression=expression)
    except CodeError as exc:
        ctx.problem(SpecSource(display, exc.line, "template"), str(exc))
        return None
    ctx.template_cache[key] = template
    return template


def _check_template_fits(ctx: _Context, node: Node, primary: Anchor, anchors: list[Anchor], template: Template) -> bool:
    """A rewrite template must keep every anchored statement (captures); others use none."""
    used = placeholders(template.stmts)
    where = node.where("template")
    if primary.kind is not EditKind.REWRITE:
        if used:
            ctx.problem(where, "only 'rewrite' templates may use __anchor_N__ captures")
            return False
        return True
    indexes = [index for index, _ in used]
    if len(set(indexes)) != len(indexes):
        ctx.problem(where, "a rewrite template captures each anchored statement at most once")
        return False
    for anchor in anchors:
        count = len(anchor.target.stmts)
        if any(index >= count for index in indexes):
            ctx.problem(
                where, f"captures beyond the {count} anchored statements (__anchor_0__ .. __anchor_{count - 1}__)"
            )
            return False
        for index, role in used:
            stmt = anchor.target.stmts[index]
            if role == "body" and not hasattr(stmt, "body"):
                ctx.problem(where, f"__anchor_{index}_body__ needs a block statement at anchor position {index}")
                return False
            if role == "value" and not isinstance(stmt, (ast.Return, ast.Assign, ast.Expr, ast.AnnAssign)):
                ctx.problem(where, f"__anchor_{index}_value__ needs a return/assignment/expression at position {index}")
                return False
    return True


def _read_imports(ctx: _Context, node: Node | None) -> tuple[str, ...]:
    if node is None:
        return ()
    if not node.is_sequence:
        ctx.problem(node.where("imports"), "must be a list of import statements")
        return ()
    imports = []
    for item in node.elements():
        try:
            tree = ast.parse(item.text)
        except SyntaxError:
            tree = None
        if tree is None or len(tree.body) != 1 or not isinstance(tree.body[0], (ast.Import, ast.ImportFrom)):
            ctx.problem(item.where("imports"), f"{item.text!r} is not a single import statement")
            continue
        imports.append(ast.unparse(tree.body[0]))
    return tuple(imports)


def _read_markers(ctx: _Context, node: Node | None) -> tuple[CodePattern, ...]:
    if node is None:
        return ()
    items = node.elements() if node.is_sequence else [node]
    found = (_pattern(ctx, item, "marker") for item in items)
    return tuple(p for p in found if p is not None)


# -- whole-catalog checks -------------------------------------------------------------


def _check_ids(ctx: _Context, points: list[Point]) -> None:
    seen: dict[str, Point] = {}
    for point in points:
        if point.id in seen:
            ctx.problem(point.source, f"duplicate id {point.id!r} (first declared at {seen[point.id].source})")
        else:
            seen[point.id] = point
    for point in points:
        for required in point.requires:
            if required not in seen:
                ctx.problem(point.source, f"requires unknown point {required!r}")


def _with_markers(ctx: _Context, points: list[Point], helpers: frozenset[str]) -> list[Point]:
    """Give each point the signatures only it has in its scope; those recognise it."""
    own: dict[str, set[str]] = {}
    per_scope: collections.Counter = collections.Counter()
    for point in points:
        sigs = {sig for e in point.edits for sig, _ in signatures_in(e.template.stmts, helpers, loose=True)}
        own[point.id] = sigs
        for sig in sigs:
            per_scope[(point.file, point.scope, sig)] += 1
    result = []
    for point in points:
        unique = frozenset(s for s in own[point.id] if per_scope[(point.file, point.scope, s)] == 1)
        if not unique and not point.marker_patterns:
            ctx.problem(
                point.source,
                "nothing recognises this point: its code has no tracing call of its own in this scope; "
                "declare a 'marker'",
            )
        result.append(_replace(point, markers=unique))
    return result


def _replace(point: Point, **changes) -> Point:
    from dataclasses import replace

    return replace(point, **changes)


def _mapping(ctx: _Context, node: Node, allowed: set[str], required: Iterable[str]) -> dict[str, Node]:
    if not node.is_mapping:
        ctx.problem(node.where(), "must be a mapping")
        return {}
    data: dict[str, Node] = {}
    for key, value in node.items():
        if key not in allowed:
            ctx.problem(value.where(key), f"unknown key {key!r} (allowed: {', '.join(sorted(allowed))})")
            continue
        if key in data:
            ctx.problem(value.where(key), f"key {key!r} given twice")
        data[key] = value
    for key in required:
        if key not in data:
            ctx.problem(node.where(key), f"missing required key {key!r}")
    return data


def _is_safe_relative(text: str) -> bool:
    path = PurePosixPath(text)
    return bool(text) and not path.is_absolute() and ".." not in path.parts and "\\" not in text
