"""port: find where the points that lost their place in this verl belong now, and write overrides.

A point is looked for by its content, not by its scope's name: the statements of each edit's
anchor, anywhere in its file. A scope where every edit of the point finds its place exactly
once (the innermost such scope) is a place the point fits. Context decides between places and
grades them: the other lost points of the same old scope (a renamed or moved method takes its
points along), and a def that its own points show was renamed (an anchor naming it is renamed
too). A tie is reported, never broken by line order. Every place written passes the proofs apply
runs (names, control context, zero intrusion): the overrides are loaded as a user would load
them and apply is run on them without writing.

The overrides go in one YAML file per verl file (the `overrides:` language of docs/anchors.md):
same ids, same templates, so check, verify and remove follow.
"""

from __future__ import annotations

from pathlib import Path

from trace_instrument.engine.analysis import FileProblem, analyse
from trace_instrument.engine.apply import apply
from trace_instrument.engine.files import CheckoutError, checkout_root
from trace_instrument.engine.manifest import Manifest
from trace_instrument.engine.port.decide import _graded, _in_place, _not_found, _rebound, _unbound
from trace_instrument.engine.port.evidence import _Spellings
from trace_instrument.engine.port.fits import _in_other_files, _suggest
from trace_instrument.engine.port.proving import Reload, _proven
from trace_instrument.engine.port.writing import PORT_HEADER, _write, override_file_name
from trace_instrument.model import (
    Catalog,
    Confidence,
    PortResult,
    PortStatus,
    PortSuggestion,
    RunError,
    RunErrorKind,
    Selection,
    Status,
)

__all__ = ["DEFAULT_OUT", "LOST", "PORT_HEADER", "Reload", "override_file_name", "port"]

LOST = (Status.ANCHOR_LOST, Status.AMBIGUOUS)
DEFAULT_OUT = Path(".trace-instrument") / "anchors"


def port(
    root: str | Path,
    catalog: Catalog,
    selection: Selection,
    reload: Reload,
    *,
    out: Path | None = None,
    min_confidence: Confidence = Confidence.LIKELY,
    write: bool = True,
) -> PortResult:
    """Find a place for every selected point that is `anchor-lost` or `ambiguous`, prove it, and
    write the overrides of those at `min_confidence` or surer into `out` (default: the checkout's
    `.trace-instrument/anchors/`). `reload(folder)`: the catalog with that folder's specs added."""
    try:
        base = checkout_root(root)
        manifest = Manifest.load(base)
    except CheckoutError as exc:
        return PortResult(str(root), (), error=exc.as_run_error())
    folder = out if out is not None else base / DEFAULT_OUT
    # apply's plan, not check's statuses: only apply's proofs say a missing point's code would
    # read a name its place lacks (refused, unbound-name)
    checked = apply(base, catalog, selection, write=False)
    if checked.error is not None:
        return PortResult(str(base), (), str(folder), error=checked.error)
    lost = [r for r in checked.points if r.status in LOST]
    unbound = {r.point_id: _unbound(r) for r in checked.points if _unbound(r)}
    suggestions: list[PortSuggestion] = []
    known = _Spellings()
    for file in dict.fromkeys(r.file for r in checked.points if r.status in LOST or r.point_id in unbound):
        results = [r for r in lost if r.file == file]
        work = analyse(base, file, catalog, manifest=manifest)
        if isinstance(work, FileProblem):
            suggestions += [_not_found(catalog.point(r.point_id), r, work.message) for r in results]
            continue
        known.works[file] = work
        suggestions += _suggest(work, [catalog.point(r.point_id) for r in results], results, known)
    suggestions = _in_other_files(base, catalog, manifest, suggestions, known)
    suggestions += [
        _in_place(catalog.point(r.point_id), r)
        for r in checked.points
        if r.point_id in unbound and r.file in known.works
    ]
    proven, refused = _proven(base, folder, catalog, selection, reload, suggestions)
    # a point that waited for a lost one it requires (skipped) may now read a name its place lacks
    looked_for = {s.point_id for s in proven}
    proven += [
        _in_place(catalog.point(r.point_id), r)
        for r in refused.values()
        if r.point_id not in looked_for and r.file in known.works
    ]
    names = {point_id: _unbound(r) for point_id, r in refused.items()}
    rebound = [_rebound(s, {**unbound, **names}.get(s.point_id, ()), known) for s in proven]
    if rebound != proven:
        proven, _ = _proven(base, folder, catalog, selection, reload, rebound)
    final = tuple(_graded(s, min_confidence) for s in proven)
    writing = [s for s in final if s.status is PortStatus.PORTED]
    try:
        # the folder exists after a run that writes, overrides or none: an empty set is valid to read
        written, kept = _write(folder, catalog, writing) if write else ((), ())
    except (CheckoutError, OSError) as exc:
        error = exc.as_run_error() if isinstance(exc, CheckoutError) else RunError(RunErrorKind.WRITE_FAILED, str(exc))
        return PortResult(str(base), final, str(folder), error=error)
    return PortResult(str(base), final, str(folder), written, kept=kept)
