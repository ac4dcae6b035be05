"""Build the catalog from anchors/*.yaml and templates/, rejecting anything malformed.

Every problem names the spec file, the line and the key; all problems of a
load are reported together. The language is described in docs/anchors.md and,
for editors, by the JSON Schemas next to this module (tests keep them in step).
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from trace_instrument.model import (
    EXTRAS,
    FACILITIES,
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
from trace_instrument.spec.binding import bind_point, read_bind
from trace_instrument.spec.code import CodeError, parse_template
from trace_instrument.spec.errors import SpecError
from trace_instrument.spec.overrides import Override, apply_overrides, is_override, read_override
from trace_instrument.spec.reading import (
    EDIT_KEYS,
    Context,
    is_safe_relative,
    mapping,
    pattern,
    point_id,
    read_places,
    scope,
    string,
    strings,
    template_fits,
)
from trace_instrument.spec.relations import relations
from trace_instrument.spec.signatures import defined_helpers, signatures_in
from trace_instrument.spec.yamlnodes import Node, read_yaml

EARLIER_SUFFIX = ".earlier"  # next to the runtime's template folder: hashes of older releases
CATALOG_FILE = "_catalog.yaml"
CATALOG_KEYS = {"validated_on", "runtime", "description"}
RUNTIME_KEYS = {"target", "source"}
FILE_KEYS = {"file", "points", "description"}
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
    "must_run",
    "after_block",
    "bind",
}
REQUIRED_POINT_KEYS = ("id", "facility", "title", "scope")


def read_catalog(anchors_dirs: Iterable[Path] | None, templates_dir: Path, *, shipped: bool) -> Catalog:
    """Read and validate every spec and template (spec.catalogs caches what this returns)."""
    ctx = Context(templates=templates_dir)
    shipped_dir = paths.anchors_dir() if shipped else None
    folders = [*([shipped_dir] if shipped_dir else []), *(anchors_dirs or [])]
    validated_on: tuple[str, ...] = ()
    runtime = RuntimeModule(target_dir="verl/utils/tracing", files=())
    if shipped_dir is not None:
        validated_on, runtime = _read_catalog_file(ctx, shipped_dir)
    found = _SpecFile()
    shipped_ids: set[str] = set()
    for folder in folders:
        user_dir = None if folder == shipped_dir else Path(folder)
        if user_dir is not None and not user_dir.is_dir():
            ctx.problem(SpecSource(str(folder), 0), _not_a_folder(user_dir))
            continue
        for spec_file in sorted(Path(folder).glob("*.yaml")):
            if spec_file.name == CATALOG_FILE:
                continue
            found.extend(_read_spec_file(ctx, spec_file, _display(spec_file, user_dir), user_dir))
        if user_dir is None:
            shipped_ids = {point.id for point in found.points}
    _check_ids(ctx, found.points, frozenset(shipped_ids))
    points = apply_overrides(ctx, found.points, found.overrides)
    _check_requires(ctx, points)
    helpers = frozenset(name for p in points for e in p.edits for name in defined_helpers(e.template.stmts))
    points = _with_markers(ctx, points, helpers)
    if ctx.problems:
        raise SpecError(ctx.problems)
    return Catalog(
        points=tuple(points),
        runtime=runtime,
        validated_on=validated_on,
        helpers=helpers,
        relations=relations(points),
    )


def _display(path: Path, user_dir: Path | None) -> str:
    return str(path) if user_dir is not None else f"anchors/{path.name}"


# -- catalog metadata ---------------------------------------------------------


def _read_catalog_file(ctx: Context, folder: Path) -> tuple[tuple[str, ...], RuntimeModule]:
    try:
        root = read_yaml(folder / CATALOG_FILE, f"anchors/{CATALOG_FILE}")
    except SpecError as exc:
        ctx.problems.extend(exc.problems)
        return (), RuntimeModule(target_dir="verl/utils/tracing", files=())
    data = mapping(ctx, root, CATALOG_KEYS, required=("validated_on", "runtime"))
    versions = strings(ctx, data["validated_on"], "validated_on") if "validated_on" in data else None
    if "description" in data:
        string(ctx, data["description"], "description")
    runtime = RuntimeModule(target_dir="verl/utils/tracing", files=())
    if "runtime" in data:
        spec = mapping(ctx, data["runtime"], RUNTIME_KEYS, required=("target", "source"))
        target = string(ctx, spec["target"], "runtime.target") if "target" in spec else None
        source = string(ctx, spec["source"], "runtime.source") if "source" in spec else None
        if target is not None and source is not None:
            runtime = _read_runtime(ctx, target, spec["target"], source, spec["source"])
    return tuple(text for text, _ in versions or ()), runtime


def _read_runtime(ctx: Context, target: str, target_node: Node, source: str, source_node: Node) -> RuntimeModule:
    folder = ctx.templates / source
    if not is_safe_relative(source) or not folder.is_dir():
        ctx.problem(source_node.where("runtime.source"), f"template folder {source!r} not found")
        return RuntimeModule(target_dir=target, files=())
    files = []
    for path in sorted(folder.glob("*.py")):
        content = path.read_bytes()
        try:
            if not compiled_before(path, content):
                compile(content, str(path), "exec", dont_inherit=True)
        except SyntaxError as exc:
            ctx.problem(source_node.where("runtime.source"), f"{path.name}:{exc.lineno}: does not compile: {exc.msg}")
        files.append((path.name, content))
    if not is_safe_relative(target):
        ctx.problem(target_node.where("runtime.target"), f"{target!r} is not a path inside the checkout")
    earlier = _read_earlier(ctx, folder.with_name(folder.name + EARLIER_SUFFIX))
    return RuntimeModule(target_dir=target, files=tuple(files), earlier=earlier)


def compiled_before(path: Path, content: bytes) -> bool:
    """Did this Python compile exactly this source before? Its byte-code cache says so when it
    holds the source's size and time or hash (`pip install` compiles the runtime's templates):
    compiling it again could not fail."""
    try:
        with open(importlib.util.cache_from_source(str(path)), "rb") as cached:
            header = cached.read(16)
            written = os.fstat(cached.fileno()).st_mtime
        stat = path.stat()
    except (OSError, NotImplementedError, ValueError):
        return False
    if len(header) < 16 or header[:4] != importlib.util.MAGIC_NUMBER:
        return False
    flags = int.from_bytes(header[4:8], "little")
    if flags & 1:  # a hash-based cache (PEP 552)
        return header[8:16] == importlib.util.source_hash(content)
    mtime, size = int.from_bytes(header[8:12], "little"), int.from_bytes(header[12:16], "little")
    # written in a later second than the source it records: an edit after it, even one of the same
    # size in the same second as the recorded time, cannot leave the source's time as recorded
    later = int(written) > int(stat.st_mtime)
    return later and size == len(content) & 0xFFFFFFFF and mtime == int(stat.st_mtime) & 0xFFFFFFFF


def _read_earlier(ctx: Context, path: Path) -> dict[str, tuple[str, ...]]:
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


@dataclass
class _SpecFile:
    """What spec files declare: points, and overrides of points declared elsewhere."""

    points: list[Point] = field(default_factory=list)
    overrides: list[Override] = field(default_factory=list)

    def extend(self, other: _SpecFile) -> None:
        self.points.extend(other.points)
        self.overrides.extend(other.overrides)


def _read_spec_file(ctx: Context, path: Path, display: str, user_dir: Path | None) -> _SpecFile:
    ctx.user_dir = user_dir
    found = _SpecFile()
    try:
        root = read_yaml(path, display)
    except SpecError as exc:
        ctx.problems.extend(exc.problems)
        return found
    data = mapping(ctx, root, FILE_KEYS, required=("file", "points"))
    if "description" in data:
        string(ctx, data["description"], "description")
    if "file" not in data or "points" not in data:
        return found
    target = string(ctx, data["file"], "file")
    if target is None:
        return found
    if not is_safe_relative(target) or not target.endswith(".py"):
        ctx.problem(data["file"].where("file"), f"{target!r} is not a .py path inside the checkout")
        return found
    if not data["points"].is_sequence:
        ctx.problem(data["points"].where("points"), "must be a list of points")
        return found
    for node in data["points"].elements():
        if is_override(node):
            override = read_override(ctx, node, target)
            if override is not None:
                found.overrides.append(override)
            continue
        point = _read_point(ctx, node, target)
        if point is not None:
            found.points.append(point)
    return found


def _read_point(ctx: Context, node: Node, target: str) -> Point | None:
    data = mapping(ctx, node, POINT_KEYS, required=REQUIRED_POINT_KEYS)
    if any(key not in data for key in REQUIRED_POINT_KEYS):
        return None
    identity = point_id(ctx, data["id"], "id")
    facility = string(ctx, data["facility"], "facility")
    title = string(ctx, data["title"], "title")
    where_in = scope(ctx, data["scope"])
    if identity is None or facility is None or title is None or where_in is None:
        return None
    where = node.where(f"point {identity}")
    if facility not in FACILITIES:
        ctx.problem(
            data["facility"].where("facility"), f"unknown facility {facility!r} (one of {', '.join(FACILITIES)})"
        )
    extra = string(ctx, data["extra"], "extra") if "extra" in data else None
    if extra is not None and extra not in EXTRAS:
        ctx.problem(data["extra"].where("extra"), f"unknown extra {extra!r} (one of {', '.join(EXTRAS)})")
    changes = string(ctx, data["changes_behaviour"], "changes_behaviour") if "changes_behaviour" in data else ""
    if "description" in data:
        string(ctx, data["description"], "description")
    edits = _read_edits(ctx, node, data, target)
    if not edits:
        return None
    if any(not e.kind.inserts for e in edits) and not changes:
        ctx.problem(where, "rewrites business code: say how in 'changes_behaviour'")
    point = Point(
        id=identity,
        facility=facility,
        title=title,
        file=target,
        scope=where_in,
        edits=tuple(edits),
        imports=_read_imports(ctx, data.get("imports")),
        requires=_read_requires(ctx, data.get("requires")),
        markers=frozenset(),
        marker_patterns=_read_markers(ctx, data.get("marker")),
        extra=extra,
        changes_behaviour=changes or "",
        source=where,
        must_run=_read_flag(ctx, data.get("must_run"), "must_run"),
        after_blocks=_read_blocks(ctx, data.get("after_block")),
    )
    if "bind" not in data:
        return point
    bindings = read_bind(ctx, data["bind"])
    return None if bindings is None else bind_point(ctx, point, bindings, data["bind"].where("bind"))


def _read_edits(ctx: Context, node: Node, data: dict[str, Node], target: str) -> list[Edit]:
    if "edits" in data:
        stray = sorted(k for k in data if k in EDIT_KEYS)
        if stray:
            ctx.problem(data[stray[0]].where(stray[0]), "put edit keys inside 'edits' or use no 'edits' list")
        if not data["edits"].is_sequence or not data["edits"].elements():
            ctx.problem(data["edits"].where("edits"), "must be a non-empty list of edits")
            return []
        edit_nodes = [(n, mapping(ctx, n, EDIT_KEYS)) for n in data["edits"].elements()]
    else:
        edit_nodes = [(node, {k: v for k, v in data.items() if k in EDIT_KEYS})]
    edits = []
    for edit_node, edit_data in edit_nodes:
        edit = _read_edit(ctx, edit_node, edit_data, target)
        if edit is not None:
            edits.append(edit)
    return edits if len(edits) == len(edit_nodes) else []


def _read_edit(ctx: Context, node: Node, data: dict[str, Node], target: str) -> Edit | None:
    anchors = read_places(ctx, node, data)
    if anchors is None:
        return None
    template = _read_template(ctx, node, data, anchors[0].kind)
    if template is None or not template_fits(ctx, node.where("template"), anchors, template):
        return None
    return Edit(anchors=tuple(anchors), template=template, rank=ctx.take_rank(target))


def _read_template(ctx: Context, node: Node, data: dict[str, Node], kind: EditKind) -> Template | None:
    has_file, has_code = "template" in data, "code" in data
    if has_file == has_code:
        ctx.problem(node.where("template"), "needs exactly one of 'template' (a file under templates/) or 'code'")
        return None
    expression = kind is EditKind.REPLACE_EXPR
    if has_code:
        code_node = data["code"]
        code = string(ctx, code_node, "code")
        if code is None:
            return None
        try:
            return parse_template(f"{code_node.file}:{code_node.line}", code, expression=expression)
        except CodeError as exc:
            ctx.problem(SpecSource(code_node.file, code_node.block_first_line + exc.line - 1, "code"), str(exc))
            return None
    name = string(ctx, data["template"], "template")
    return None if name is None else _template_file(ctx, name, data["template"].where("template"), expression)


def _template_file(ctx: Context, name: str, where: SpecSource, expression: bool) -> Template | None:
    """A template file: the user folder's own first, then templates/."""
    if not is_safe_relative(name):
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


def _read_imports(ctx: Context, node: Node | None) -> tuple[str, ...]:
    if node is None:
        return ()
    if not node.is_sequence:
        ctx.problem(node.where("imports"), "must be a list of import statements")
        return ()
    imports = []
    for text, item in strings(ctx, node, "imports") or ():
        try:
            tree = ast.parse(text)
        except SyntaxError:
            tree = None
        if tree is None or len(tree.body) != 1 or not isinstance(tree.body[0], (ast.Import, ast.ImportFrom)):
            ctx.problem(item.where("imports"), f"{text!r} is not a single import statement")
            continue
        imports.append(ast.unparse(tree.body[0]))
    return tuple(imports)


def _read_requires(ctx: Context, node: Node | None) -> tuple[str, ...]:
    if node is None:
        return ()
    if not node.is_sequence:
        ctx.problem(node.where("requires"), "must be a list of point ids, e.g. [traj.c0.tracker]")
        return ()
    return tuple(text for text in (point_id(ctx, item, "requires") for item in node.elements()) if text)


def _read_flag(ctx: Context, node: Node | None, key: str) -> bool:
    if node is None:
        return False
    if not node.is_boolean:
        ctx.problem(node.where(key), f"must be true or false, not {node.kind_name}")
        return False
    return node.boolean


def _read_blocks(ctx: Context, node: Node | None) -> tuple[CodePattern, ...]:
    """`after_block`: block statements (a header with `...` as its body) the code must come after."""
    if node is None:
        return ()
    items = node.elements() if node.is_sequence else [node]
    found = []
    for item in items:
        block = pattern(ctx, item, "after_block")
        if block is None:
            continue
        if len(block.stmts) != 1 or not hasattr(block.stmts[0], "body"):
            ctx.problem(item.where("after_block"), 'must be one block statement, e.g. `with timer("gen", ...): ...`')
            continue
        found.append(block)
    return tuple(found)


def _read_markers(ctx: Context, node: Node | None) -> tuple[CodePattern, ...]:
    if node is None:
        return ()
    items = node.elements() if node.is_sequence else [node]
    found = (pattern(ctx, item, "marker") for item in items)
    return tuple(p for p in found if p is not None)


# -- whole-catalog checks -------------------------------------------------------------


def _not_a_folder(folder: Path) -> str:
    """Why an --anchors folder cannot be read: it does not exist, or it is a file."""
    if folder.exists():
        return "anchor folder expected: this is a file, not a directory"
    return "anchor folder not found: no such directory"


# how a spec of one's own re-anchors a point the tool ships (declaring it again is an error)
OVERRIDE_HINT = "a spec of your own re-anchors a shipped point with `overrides: ID`"


def _check_ids(ctx: Context, points: list[Point], shipped: frozenset[str] = frozenset()) -> None:
    """Each id declared once. The shipped ids declared again (a copy of anchors/ given as a folder of
    one's own, say) are one problem, counted, with the way to re-anchor them."""
    seen: dict[str, Point] = {}
    again: list[Point] = []
    for point in points:
        if point.id not in seen:
            seen[point.id] = point
        elif point.id in shipped:
            again.append(point)
        else:
            ctx.problem(point.source, f"duplicate id {point.id!r} (first declared at {seen[point.id].source})")
    if not again:
        return
    first = again[0]
    where = f"first declared at {seen[first.id].source}"
    if len(again) == 1:
        ctx.problem(first.source, f"duplicate id {first.id!r} ({where}); {OVERRIDE_HINT}")
        return
    message = (
        f"{len(again)} ids the tool ships are declared again, the first {first.id!r} ({where}); "
        f"a copy of anchors/? {OVERRIDE_HINT}, and keeps only the points it changes"
    )
    ctx.problem(first.source, message)


def _check_requires(ctx: Context, points: list[Point]) -> None:
    known = {point.id for point in points}
    for point in points:
        for required in point.requires:
            if required not in known:
                ctx.problem(point.source, f"requires unknown point {required!r}")


def _with_markers(ctx: Context, points: list[Point], helpers: frozenset[str]) -> list[Point]:
    """Give each point the signatures only it has in its scope; those recognise it.

    A scope holds the scopes inside it (a class its methods, `<module>` the whole file): a point
    is looked for there, so a signature a point of an overlapping scope has is not its own.
    """
    own = [{sig for e in p.edits for sig, _ in signatures_in(e.template.stmts, helpers, loose=True)} for p in points]
    result = []
    for index, point in enumerate(points):
        shared = {
            i: len(own[i] & own[index])
            for i, other in enumerate(points)
            if i != index and other.file == point.file and _overlap(point.scope, other.scope) and own[i] & own[index]
        }
        unique = frozenset(own[index].difference(*(own[i] for i in shared)))
        if not unique and not point.marker_patterns:
            # the points sharing the most of its calls are the ones it cannot be told from (a copy)
            rivals = [points[i] for i, n in shared.items() if n == max(shared.values())]
            problem = _unrecognised(point, rivals)
            if problem:
                ctx.problem(point.source, problem)
        result.append(replace(point, markers=unique))
    return result


def _overlap(scope: str, other: str) -> bool:
    """Does one scope hold the other (or are they the same)?"""
    if "<module>" in (scope, other) or scope == other:
        return True
    return other.startswith(scope + ".") or scope.startswith(other + ".")


def _unrecognised(point: Point, rivals: list[Point]) -> str:
    """Why nothing would recognise the point, and what to do ("" when a duplicate id says it already)."""
    if not rivals:
        return (
            "nothing recognises this point: its code has no tracing call of its own in this scope; declare a 'marker'"
        )
    if any(rival.id == point.id for rival in rivals):
        return ""  # the same point declared twice: the duplicate id is the problem, reported as such
    names = " and ".join(f"{r.id} ({r.source.file}:{r.source.line}, scope {r.scope})" for r in rivals)
    return (
        f"nothing recognises this point: every tracing call its code makes, {names} makes too, in the same "
        "scope or one holding it (check and remove could not tell them apart). A shipped point copied under "
        "a new id puts the same code in twice: to move the shipped point (another scope or anchor), give it an "
        "`overrides:` entry instead (docs/anchors.md#overrides); a point of your own needs a tracing call of its "
        "own (another detail or message) or a 'marker'"
    )
