"""Reading and recognising one target file: the first step of every operation."""

from __future__ import annotations

import ast
import io
import tokenize
from dataclasses import dataclass
from pathlib import Path

from trace_instrument.engine.files import CheckoutError, SourceFile, read_target
from trace_instrument.locate import FileLocator, PointState
from trace_instrument.model import Catalog, Point


@dataclass(eq=False)
class FileWork:
    source: SourceFile
    tree: ast.Module
    locator: FileLocator
    points: tuple[Point, ...]  # every catalog point of this file

    @property
    def path(self) -> str:
        return self.source.path

    def state(self, point: Point) -> PointState:
        return self.locator.state(point)


@dataclass(frozen=True)
class FileProblem:
    path: str
    message: str
    missing: bool = False  # the file does not exist (points are not applicable)


def analyse(root: Path, relative: str, catalog: Catalog) -> FileWork | FileProblem:
    try:
        source = read_target(root, relative)
    except CheckoutError as exc:
        return FileProblem(relative, str(exc))
    except OSError as exc:
        return FileProblem(relative, f"cannot read: {exc.strerror or exc}")
    if source is None:
        return FileProblem(relative, "file not in this checkout", missing=True)
    try:
        tree = ast.parse(source.data, filename=relative)
    except SyntaxError as exc:
        return FileProblem(
            relative, f"line {exc.lineno}: {describe_syntax_error(exc)}; fix the file or --skip its points"
        )
    except (ValueError, RecursionError, MemoryError) as exc:  # NUL bytes, absurdly deep nesting
        return FileProblem(relative, f"cannot parse: {type(exc).__name__}: {exc}")
    try:
        text = decode(source.data)  # the parser lets bad bytes in comments through; the writer would not
    except (UnicodeDecodeError, SyntaxError) as exc:
        return FileProblem(relative, f"not valid text in its declared encoding (UTF-8 unless declared): {exc}")
    points = tuple(p for p in catalog.points if p.file == relative)
    locator = FileLocator(tree, points, catalog.helpers, text)
    return FileWork(source, tree, locator, points)


def describe_syntax_error(exc: SyntaxError) -> str:
    if "unicode" in str(exc.msg).lower() or "codec" in str(exc.msg).lower():
        return f"not valid text in its declared encoding (UTF-8 unless declared): {exc.msg}"
    return f"syntax error: {exc.msg}"


def encoding_of(data: bytes) -> str:
    """The source encoding Python itself would use for these bytes (BOM, coding cookie, UTF-8)."""
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    return encoding


def decode(data: bytes) -> str:
    """Text of a file for diffs and reports."""
    return data.decode(encoding_of(data))
