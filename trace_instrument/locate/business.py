"""The business code of a file: every statement that is not instrumentation, fingerprinted.

Two files have the same business code when their fingerprint sequences are
equal, whatever tracing was put in or taken out. Block statements are
fingerprinted by their header, so code inserted into a block never changes
its parent's fingerprint; rewritten statements are seen in their original form.
"""

from __future__ import annotations

import ast
import hashlib

from trace_instrument.locate.index import FileIndex, header_only
from trace_instrument.locate.match import canonical
from trace_instrument.locate.recognize import Recognition
from trace_instrument.model import TRACING_MODULE


def fingerprint(stmt: ast.stmt) -> str:
    return hashlib.sha1(canonical(header_only(stmt)).encode()).hexdigest()[:12]


# Same code text, same syntax tree: fingerprints are remembered by text, so a file's
# unchanged statements cost nothing the second time (apply fingerprints input and output).
_BY_TEXT: dict[tuple[str, str], str] = {}


def _fingerprint_of(real: ast.stmt, view: ast.stmt, index: FileIndex) -> str:
    text = index.text_of(real) if view is real else None
    if text is None:
        return fingerprint(view)
    key = (type(real).__name__, text)
    found = _BY_TEXT.get(key)
    if found is None:
        if len(_BY_TEXT) > 200_000:
            _BY_TEXT.clear()
        found = _BY_TEXT[key] = fingerprint(view)
    return found


def business_statements(
    recognition: Recognition, added_imports: frozenset[str] = frozenset()
) -> list[tuple[ast.stmt, ast.stmt]]:
    """(statement, its business view) for business code, in source order.

    Imports from the tracing package, and the imports in `added_imports` (the
    ones the catalog adds, as canonical dumps), are instrumentation too.
    """
    instrumentation = recognition.instrumentation
    kept = _captured(recognition)
    result = []
    for site in recognition.index.sites:
        decider = next(
            (a for a in reversed((*site.ancestors, site.node)) if id(a) in instrumentation or id(a) in kept),
            None,
        )
        if decider is not None and id(decider) in instrumentation and id(decider) not in kept:
            continue
        if _is_tracing_import(site.node, added_imports):
            continue
        result.append((site.node, recognition.view(site.node)))
    return result


def _is_tracing_import(stmt: ast.stmt, added_imports: frozenset[str]) -> bool:
    if isinstance(stmt, ast.ImportFrom) and stmt.module == TRACING_MODULE:
        return True
    return isinstance(stmt, (ast.Import, ast.ImportFrom)) and canonical(stmt) in added_imports


def _captured(recognition: Recognition) -> set[int]:
    """Statements a present rewrite kept: business code inside instrumentation."""
    kept: set[int] = set()
    for state in recognition.states.values():
        for block in state.blocks:
            caps = block.captures
            if caps is None:
                continue
            kept.update(id(s) for s in caps.statements.values())
            kept.update(id(holder) for _, holder in caps.values.values())
            kept.update(id(s) for body in caps.bodies.values() for s in body)
    return kept


def business_fingerprints(
    recognition: Recognition, added_imports: frozenset[str] = frozenset()
) -> list[tuple[str, int]]:
    """(fingerprint, line) of each business statement; lines are those of the file as it is."""
    index = recognition.index
    return [
        (_fingerprint_of(real, view, index), real.lineno)
        for real, view in business_statements(recognition, added_imports)
    ]


def declared_removals(recognition: Recognition) -> set[str]:
    """Fingerprints of original statements that present rewrites take away by design."""
    removed: set[str] = set()
    for state in recognition.states.values():
        for block in state.blocks:
            if block.captures is None:
                continue
            pattern = block.edit.anchors[0].target.stmts
            kept_whole = set(block.captures.statements) | set(block.captures.values)
            for index, stmt in enumerate(pattern):
                if index not in kept_whole:
                    removed.update(fingerprint(s) for s in _written_out(stmt, body_kept=index in block.captures.bodies))
    return removed


def _written_out(stmt: ast.stmt, body_kept: bool) -> list[ast.stmt]:
    """An anchored statement and the statements its pattern spells out in its blocks (an `else`,
    an `except`, a body no capture keeps): the rewrite takes them all away. A body kept by
    `__anchor_N_body__` is the file's own code, still there after the rewrite."""
    kept = {id(n) for s in getattr(stmt, "body", []) for n in ast.walk(s)} if body_kept else set()
    return [n for n in ast.walk(stmt) if isinstance(n, ast.stmt) and id(n) not in kept]
