"""A run killed before it finished: tracing code no manifest records, or the staged copies it left.

apply writes all or nothing through staged copies next to their targets (`.NAME.XXXX.ti-tmp`,
engine/files.py), the manifest last: a SIGKILL after the last file's rename and before the
manifest's leaves the code in place, no manifest, and the manifest's staged copy. Such a tree
runs, but nothing records what apply replaced, which imports it added or the business code's
baseline: check names it (status `unfinished`), and apply finishes the job. The manifest apply
then writes is the one a clean apply records: found by taking the tracing code out of a scratch
copy of `verl/` and applying the run's selection to it again, and used only when that gives back
exactly the tree this run leaves. A tree with no tracing code and no manifest is not instrumented.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from trace_instrument.engine.files import held_by_a_run, staged_in
from trace_instrument.engine.manifest import MANIFEST_NAME
from trace_instrument.model import (
    Catalog,
    FileResult,
    PointResult,
    Reason,
    Status,
)

TREE = "tree"  # the id of an item about the whole tree
# the statuses of a point whose code is in the tree (as its template has it or not)
CODE_THERE = frozenset({Status.PRESENT, Status.DRIFTED, Status.MOVED, Status.STALE, Status.BROKEN})


def leftovers(base: Path, catalog: Catalog) -> list[str]:
    """The staged copies next to every file a run writes: the manifest, the catalog's files and the
    runtime package's (relative paths, sorted)."""
    folders = {base, base / catalog.runtime.target_dir, *((base / f).parent for f in catalog.files)}
    found = [p.relative_to(base).as_posix() for folder in folders for p in staged_in(folder)]
    return sorted(found)


def manifest_lost(base: Path) -> bool:
    return not (base / MANIFEST_NAME).exists()


def instrumented(points: Iterable[PointResult]) -> bool:
    """Is some point's code in the tree? (The runtime package alone is no instrumentation: a manifest
    records points, and a run that installs the package alone writes none.)"""
    return any(p.status in CODE_THERE for p in points)


def problems(base: Path, catalog: Catalog, files: Iterable[FileResult]) -> tuple[PointResult, ...]:
    """What a killed run left, as check reports it: tracing code without the manifest, leftovers."""
    found: list[PointResult] = []
    if manifest_lost(base) and instrumented(p for f in files for p in f.points):
        message = (
            f"the tree holds tracing code but no manifest ({MANIFEST_NAME}): a run was killed before it wrote "
            "it, or it was deleted; nothing records what apply replaced, the imports it added or the business "
            "code's baseline. `trace-instrument apply` writes it again (as a clean apply records it)"
        )
        found.append(
            PointResult(TREE, "", MANIFEST_NAME, Status.UNFINISHED, message=message, reason=Reason.NO_MANIFEST)
        )
    stray = [] if held_by_a_run(base) else leftovers(base, catalog)  # (a run writing now stages them)
    if stray:
        shown = ", ".join(stray[:5]) + (f" and {len(stray) - 5} more" if len(stray) > 5 else "")
        message = (
            f"{len(stray)} staged cop{'y' if len(stray) == 1 else 'ies'} a killed run left ({shown}); "
            "`trace-instrument apply` finishes the job and removes them"
        )
        found.append(
            PointResult(TREE, "", stray[0], Status.UNFINISHED, message=message, reason=Reason.STAGING_LEFTOVERS)
        )
    return tuple(found)
