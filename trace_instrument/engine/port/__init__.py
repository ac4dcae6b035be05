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

from dataclasses import dataclass
from pathlib import Path

from trace_instrument.engine.analysis import FileProblem, analyse
from trace_instrument.engine.apply import apply
from trace_instrument.engine.files import CheckoutError, checkout_root
from trace_instrument.engine.manifest import Manifest
from trace_instrument.engine.port.attributes import _attribute_bound, _unset
from trace_instrument.engine.port.decide import _graded, _in_place, _not_found, _rebound, _unbound
from trace_instrument.engine.port.elsewhere import _in_other_files
from trace_instrument.engine.port.evidence import _Spellings
from trace_instrument.engine.port.fits import _suggest
from trace_instrument.engine.port.names import _prebound
from trace_instrument.engine.port.proving import Reload, _proven
from trace_instrument.engine.port.writing import PORT_HEADER, _write, override_file_name
from trace_instrument.model import (
    Catalog,
    Confidence,
    PointResult,
    PortCause,
    PortResult,
    PortStatus,
    PortSuggestion,
    RunError,
    RunErrorKind,
    RunResult,
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
    # apply's plan, not check's statuses: only apply's plan says a missing point's code would
    # read a name its place lacks (refused, unbound-name); the plan alone (no file edited): the
    # places found are proven by a full apply, which refuses what the edited output's checks do
    checked = apply(base, catalog, selection, write=False, plan_only=True)
    if checked.error is not None:
        return PortResult(str(base), (), str(folder), error=checked.error)
    known = _Spellings()
    suggestions = _suggestions(base, catalog, manifest, checked, known)
    proven = _proven_and_bound(_Proof(base, folder, catalog, selection, reload), suggestions, known)
    final = tuple(_graded(s, min_confidence) for s in proven)
    writing = [s for s in final if s.status is PortStatus.PORTED]
    try:
        # the folder exists after a run that writes, overrides or none: an empty set is valid to read
        written, kept = _write(folder, catalog, writing) if write else ((), ())
    except (CheckoutError, OSError) as exc:
        error = exc.as_run_error() if isinstance(exc, CheckoutError) else RunError(RunErrorKind.WRITE_FAILED, str(exc))
        return PortResult(str(base), final, str(folder), error=error)
    return PortResult(str(base), final, str(folder), written, kept=kept)


def _suggestions(
    base: Path, catalog: Catalog, manifest: Manifest, checked: RunResult, known: _Spellings
) -> list[PortSuggestion]:
    """A suggestion per lost point (in its file or a related one), and, for each point refused for
    names its code reads, one with those names bound as the tree spells them (`known` learns the
    files read and the spellings their anchors show)."""
    lost = [r for r in checked.points if r.status in LOST]
    unbound = {r.point_id: _unbound(r) for r in checked.points if _unbound(r)}
    unset = [r for r in checked.points if _unset(r)]
    suggestions: list[PortSuggestion] = []
    wanted = {r.file for r in unset} | {r.file for r in checked.points if r.status in LOST or r.point_id in unbound}
    for file in [f for f in dict.fromkeys(r.file for r in checked.points) if f in wanted]:
        results = [r for r in lost if r.file == file]
        work = analyse(base, file, catalog, manifest=manifest)
        if isinstance(work, FileProblem):
            suggestions += [_not_found(catalog.point(r.point_id), r, work.message) for r in results]
            continue
        known.works[file] = work
        suggestions += _suggest(work, [catalog.point(r.point_id) for r in results], results, known)
    suggestions = _prebound(catalog, _in_other_files(base, catalog, manifest, suggestions, known), known)
    refused = [_in_place(catalog.point(r.point_id), r) for r in checked.points if r.point_id in unbound]
    # bound before the first proof: one round of apply proves them with the places found
    suggestions += [_rebound(s, unbound[s.point_id], known) for s in refused if s.file in known.works]
    attributes = [
        _attribute_bound(known.works[r.file], catalog.point(r.point_id), r) for r in unset if r.file in known.works
    ]
    return suggestions + [s for s in attributes if s is not None]


@dataclass(frozen=True)
class _Proof:
    """What proving a set of suggestions needs: the checkout, the overrides' folder, the catalog
    and selection, and how to load the catalog with overrides added."""

    base: Path
    folder: Path
    catalog: Catalog
    selection: Selection
    reload: Reload

    def __call__(
        self, suggestions: list[PortSuggestion], files: set[str] | None = None
    ) -> tuple[list[PortSuggestion], dict[str, PointResult]]:
        return _proven(self.base, self.folder, self.catalog, self.selection, self.reload, suggestions, files)


def _proven_and_bound(prove: _Proof, suggestions: list[PortSuggestion], known: _Spellings) -> list[PortSuggestion]:
    """The suggestions proven with apply. A point that, placed with the others, reads a name its
    place lacks is bound as the tree spells it (one that waited for a lost point it requires,
    skipped, included); those, and the points refused only for requiring one of them, are proven
    again, the files they are in alone: a second round of apply only then, and only there."""
    proven, refused = prove(suggestions)
    looked_for = {s.point_id for s in proven}
    catalog = prove.catalog
    proven += [
        _in_place(catalog.point(r.point_id), r)
        for r in refused.values()
        if r.point_id not in looked_for and r.file in known.works
    ]
    rebound = [_rebound(s, _unbound(refused[s.point_id]) if s.point_id in refused else (), known) for s in proven]
    changed = {s.point_id for s, before in zip(rebound, proven) if s != before}
    if not changed:
        return proven
    first = {s.point_id: s for s in suggestions}
    again = [_revived(s, first.get(s.point_id), changed) for s in rebound]
    files = {s.file for s, before in zip(again, proven) if s != before}
    return prove(again, files)[0]


def _revived(suggestion: PortSuggestion, before: PortSuggestion | None, bound: set[str]) -> PortSuggestion:
    """A suggestion refused only for requiring a point now bound: as it was before the proof."""
    waited = suggestion.cause is PortCause.REQUIRED_POINT and suggestion.blocked_by in bound
    return before if waited and before is not None and before.status is PortStatus.PORTED else suggestion
