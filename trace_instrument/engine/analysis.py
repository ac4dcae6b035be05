"""Reading and recognising one target file: the first step of every operation."""

from __future__ import annotations

import ast
import functools
import hashlib
import io
import tokenize
from dataclasses import dataclass
from pathlib import Path

from trace_instrument.caches import file_digest
from trace_instrument.engine.files import CheckoutError, SourceFile, read_target
from trace_instrument.engine.manifest import Manifest
from trace_instrument.locate import FileLocator, PointState
from trace_instrument.locate.attributes import ClassAttributes, Module
from trace_instrument.locate.names import NameTable
from trace_instrument.locate.runnable import PointNames
from trace_instrument.model import Catalog, FileProblemKind, Point, Relations
from trace_instrument.spec.code import source_lines


@dataclass(eq=False)
class FileWork:
    """A target file read, parsed and recognised: what each point's state is in it."""

    source: SourceFile
    tree: ast.Module
    locator: FileLocator
    points: tuple[Point, ...]  # every catalog point of this file
    text: str  # the source decoded in its declared encoding
    relations: Relations  # who reads what other points set up, across the catalog
    modules: CheckoutModules  # the checkout's other modules, for the bases of this file's classes

    @property
    def path(self) -> str:
        return self.source.path

    def classes(self) -> ClassAttributes:
        """What the classes of this file and their bases set."""
        return ClassAttributes(Module(self.tree, source_lines(self.text)), module_name(self.path), self.modules)

    def state(self, point: Point) -> PointState:
        return self.locator.state(point)

    @functools.cached_property
    def names(self) -> PointNames:
        """Name bindings of the file, for the checks that points can run where they stand."""
        return PointNames(
            NameTable(self.tree, source=self.text), self.locator.recognition, self.relations, self.classes()
        )


@dataclass(frozen=True)
class FileProblem:
    """A file that cannot be worked on, and why."""

    path: str
    message: str
    kind: FileProblemKind | None = None  # None: the file does not exist (its points are not applicable)
    line: int = 0  # where the problem is, when it has a place (a syntax error)

    @property
    def missing(self) -> bool:
        return self.kind is None


def analyse(
    root: Path,
    relative: str,
    catalog: Catalog,
    data: bytes | None = None,
    manifest: Manifest | None = None,
) -> FileWork | FileProblem:
    """Read (or take `data` as) one target file and recognise the catalog's points in it.

    `manifest`: what apply recorded (None: not known): the points it placed (a def named like
    a point's own is the fork's code unless apply placed that point) and where it left the
    bodies rewrites captured.
    """
    if data is None:
        read = _read(root, relative)
        if isinstance(read, FileProblem):
            return read
        source = read
    else:
        source = SourceFile(relative, root / relative, data)
    try:
        tree = parsed(relative, source.data)
    except SyntaxError as exc:
        kind, what = describe_syntax_error(exc)
        message = f"line {exc.lineno}: {what}; fix the file or --skip its points"
        return FileProblem(relative, message, kind, line=exc.lineno or 0)
    except (ValueError, RecursionError, MemoryError) as exc:  # NUL bytes, absurdly deep nesting
        return FileProblem(relative, f"cannot parse: {type(exc).__name__}: {exc}", FileProblemKind.SYNTAX)
    try:
        text = decode(source.data)  # the parser lets bad bytes in comments through; the writer would not
    except (UnicodeDecodeError, SyntaxError) as exc:
        message = f"not valid text in its declared encoding (UTF-8 unless declared): {exc}"
        return FileProblem(relative, message, FileProblemKind.ENCODING)
    points = tuple(p for p in catalog.points if p.file == relative)
    applied, extents = (manifest.applied, manifest.extents) if manifest is not None else (None, None)
    locator = FileLocator(tree, points, catalog.helpers, text, applied=applied, extents=extents)
    return FileWork(source, tree, locator, points, text, catalog.relations, CheckoutModules(root))


class CheckoutModules:
    """The checkout's own modules by name, parsed when first asked for; remembers what it read
    (a result that depends on them is valid only while they are as read)."""

    def __init__(self, root: Path):
        self.root = root
        self.read: dict[str, str] = {}  # relative path -> digest of its bytes ("" when absent)
        self._trees: dict[str, Module | None] = {}

    def __call__(self, module: str) -> Module | None:
        if module not in self._trees:
            self._trees[module] = self._parse(module)
        return self._trees[module]

    def _parse(self, module: str) -> Module | None:
        base = module.replace(".", "/")
        for relative in (f"{base}.py", f"{base}/__init__.py"):
            try:
                source = read_target(self.root, relative)
            except (CheckoutError, OSError):
                source = None
            self.read[relative] = file_digest(source.data) if source is not None else ""
            if source is None:
                continue
            try:
                return Module(parsed(relative, source.data), source_lines(decode(source.data)))
            except (SyntaxError, ValueError, RecursionError, MemoryError, UnicodeDecodeError):
                return None
        return None


# A process parses a file once: a catalog file is also the base module of other files' classes
# (agent_loop.py for the tool and single-turn loops). The trees are only ever read.
_PARSED: dict[tuple[str, bytes], ast.Module] = {}
_PARSED_MAX = 32


def parsed(relative: str, data: bytes) -> ast.Module:
    """The file's ast (SyntaxError, ValueError as ast.parse raises them), parsed once per process."""
    key = (relative, hashlib.sha1(data).digest())
    tree = _PARSED.get(key)
    if tree is None:
        tree = ast.parse(data, filename=relative)
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.pop(next(iter(_PARSED)))
        _PARSED[key] = tree
    return tree


def module_name(relative: str) -> str:
    """verl/trainer/ppo/ray_trainer.py -> verl.trainer.ppo.ray_trainer (a package's __init__: the package)."""
    parts = relative[: -len(".py")].split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _read(root: Path, relative: str) -> SourceFile | FileProblem:
    try:
        source = read_target(root, relative)
    except CheckoutError as exc:
        return FileProblem(relative, str(exc), exc.kind or FileProblemKind.UNREADABLE)
    except OSError as exc:
        return FileProblem(relative, f"cannot read: {exc.strerror or exc}", FileProblemKind.UNREADABLE)
    if source is None:
        return FileProblem(relative, "file not in this checkout")
    return source


def describe_syntax_error(exc: SyntaxError) -> tuple[FileProblemKind, str]:
    if "unicode" in str(exc.msg).lower() or "codec" in str(exc.msg).lower():
        return FileProblemKind.ENCODING, f"not valid text in its declared encoding (UTF-8 unless declared): {exc.msg}"
    return FileProblemKind.SYNTAX, f"syntax error: {exc.msg}"


def encoding_of(data: bytes) -> str:
    """The source encoding Python itself would use for these bytes (BOM, coding cookie, UTF-8)."""
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    return encoding


def decode(data: bytes) -> str:
    """Text of a file for diffs and reports."""
    return data.decode(encoding_of(data))
