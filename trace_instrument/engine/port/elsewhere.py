"""Points that moved to another module: looked for in the modules the file imports and those importing it."""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from trace_instrument.engine.analysis import FileProblem, analyse
from trace_instrument.engine.manifest import Manifest
from trace_instrument.engine.port.decide import (
    _kept_scope,
)
from trace_instrument.engine.port.evidence import _Fit, _Spellings

# -- where a point fits --------------------------------------------------------------------------
from trace_instrument.engine.port.match import _fits
from trace_instrument.model import (
    Catalog,
    Confidence,
    Point,
    PortStatus,
    PortSuggestion,
)


def _in_other_files(
    base: Path, catalog: Catalog, manifest: Manifest, suggestions: list[PortSuggestion], known: _Spellings
) -> list[PortSuggestion]:
    """The suggestions, each point no scope of its file holds looked for in the verl modules its
    file imports and those that import it (a method moved into a base class or a mixin of another
    module, a helper extracted into one): where exactly one of them holds it, it moves there."""
    lost = [s for s in suggestions if s.status is PortStatus.NOT_FOUND]
    if not lost:
        return suggestions
    words = {s.point_id: _anchor_words(catalog.point(s.point_id)) for s in lost}
    texts: dict[str, str] = {}
    related = {}
    for file in dict.fromkeys(s.file for s in lost):
        wanted = [words[s.point_id] for s in lost if s.file == file]
        related[file] = _related_files(base, file, _holding(wanted), texts)
    found: dict[str, list[tuple[str, _Fit]]] = {s.point_id: [] for s in lost}
    for other in sorted({f for files in related.values() for f in files}):
        # a verbatim fit names every name its anchors name: a module without one of them holds none
        present = _words_of(texts[other])
        moving = [s.point_id for s in lost if other in related[s.file] and words[s.point_id] <= present]
        if not moving:
            continue
        moved = replace(catalog, points=tuple(replace(p, file=other) if p.id in moving else p for p in catalog.points))
        work = analyse(base, other, moved, manifest=manifest)
        if isinstance(work, FileProblem):
            continue
        known.works.setdefault(other, work)
        for point_id in moving:
            found[point_id] += [(other, fit) for fit in _fits(work, moved.point(point_id), {})]
    return [_moved_file(s, found.get(s.point_id, []), known) if s in lost else s for s in suggestions]


def _moved_file(suggestion: PortSuggestion, fits: list[tuple[str, _Fit]], known: _Spellings) -> PortSuggestion:
    """The suggestion for a point found in other files: there when in one place, else a tie."""
    if not fits:
        return suggestion
    places = [f"{file}:{fit.scope}" for file, fit in fits]
    if len(fits) > 1:
        why = f"fits {len(fits)} places in other modules equally ({', '.join(places)}); nothing tells them apart"
        return replace(suggestion, status=PortStatus.TIE, runners_up=tuple(places), message=why)
    file, fit = fits[0]
    old_file = suggestion.file
    kept = _kept_scope(known.works[old_file], suggestion.old_scope) if old_file in known.works else ""
    evidence = f"its anchors' statements, found verbatim in {fit.scope} of {file} alone (it moved out of {old_file})"
    return replace(
        suggestion,
        file=file,
        status=PortStatus.PORTED,
        new_scope=fit.scope,
        anchors=fit.anchors,
        confidence=Confidence.GUESS if kept == "class" else Confidence.LIKELY,
        line=min(p.line for p in fit.placements),
        evidence=evidence,
        message="",
        candidates=(),
    )


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _anchor_words(point: Point) -> frozenset[str]:
    """The names the first statement of each edit's anchor names (its captures aside): a file
    holding the anchors verbatim spells every one of them."""
    words: set[str] = set()
    for edit in point.edits:
        for node in ast.walk(edit.anchors[0].target.stmts[0]):
            name = getattr(node, "id", None) or getattr(node, "attr", None) or getattr(node, "arg", None)
            if isinstance(name, str):
                words.add(name)
    return frozenset(w for w in words if not w.startswith("__anchor_"))


def _holding(wanted: list[frozenset[str]]) -> Callable[[str], bool]:
    """Does a text name every name of one of these sets?"""
    # each name as a substring first (a quick no for most modules), the text's names only then
    return lambda text: any(all(w in text for w in words) and words <= _words_of(text) for words in wanted)


@functools.lru_cache(maxsize=256)
def _words_of(text: str) -> frozenset[str]:
    return frozenset(_WORD.findall(text))


def _related_files(base: Path, relative: str, holds: Callable[[str], bool], texts: dict[str, str]) -> list[str]:
    """The checkout's verl modules `relative` imports, and those importing it (runtime excluded),
    of those whose text `holds` (the names some lost point's anchors name); `texts` keeps the text
    of each module read."""
    module = _module_name(relative)
    related = []
    for path in sorted((base / "verl").rglob("*.py")):
        other = path.relative_to(base).as_posix()
        if other == relative or other.startswith("verl/utils/tracing/") or "__pycache__" in other:
            continue
        try:
            text = texts[other] if other in texts else path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if not holds(text):
            continue
        texts[other] = text
        stem = module.rpartition(".")[2]
        if (module in text or stem in text) and module in _imported_modules(other, text):
            related.append(other)
    imported = [f for f in _verl_imports(base, relative) if f in texts or _held(base, f, holds, texts)]
    return [f for f in dict.fromkeys([*imported, *related]) if f != relative]


def _held(base: Path, relative: str, holds: Callable[[str], bool], texts: dict[str, str]) -> bool:
    """Does the module's text hold what is looked for? (its text kept in `texts` when it does)"""
    try:
        text = (base / relative).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    if holds(text):
        texts[relative] = text
    return relative in texts


def _module_name(relative: str) -> str:
    name = relative.removesuffix(".py").replace("/", ".")
    return name.removesuffix(".__init__")


def _verl_imports(base: Path, relative: str) -> list[str]:
    """The files of the verl modules the file imports (those the checkout has)."""
    try:
        text = (base / relative).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return []
    files = []
    for module in _imported_modules(relative, text):
        for candidate in (module.replace(".", "/") + ".py", module.replace(".", "/") + "/__init__.py"):
            if (base / candidate).is_file():
                files.append(candidate)
                break
    return files


def _imported_modules(relative: str, text: str) -> list[str]:
    """The verl modules a file's imports name (`from .x import y` resolved; `from a import b`: `a` and `a.b`)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    package = _module_name(relative) if relative.endswith("__init__.py") else _module_name(relative).rpartition(".")[0]
    modules: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            parts = package.split(".")
            root = ".".join(parts[: len(parts) - node.level + 1]) if node.level else ""
            source = ".".join(x for x in (root, node.module or "") if x)
            modules += [source, *(f"{source}.{a.name}" for a in node.names)]
    return [m for m in dict.fromkeys(modules) if m == "verl" or m.startswith("verl.")]
