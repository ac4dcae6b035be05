"""Installing and removing the runtime package (verl/utils/tracing/)."""

from __future__ import annotations

from pathlib import Path

from trace_instrument.engine.files import PendingWrite
from trace_instrument.model import Catalog


def plan_install(root: Path, catalog: Catalog) -> list[tuple[PendingWrite, str]]:
    """(write, status) per runtime file; status is created, present or drifted (left alone)."""
    planned = []
    for name, content in catalog.runtime.files:
        relative = f"{catalog.runtime.target_dir}/{name}"
        target = root / relative
        if not target.exists():
            planned.append((PendingWrite(relative, content), "created"))
        elif target.read_bytes() == content:
            planned.append((PendingWrite(relative, content), "present"))
        else:
            planned.append((PendingWrite(relative, content), "drifted"))
    return planned


def plan_remove(root: Path, catalog: Catalog, force: bool = False) -> list[tuple[PendingWrite, str]]:
    """(write, status) per runtime file; a file edited by hand stays unless forced."""
    planned = []
    for name, content in catalog.runtime.files:
        relative = f"{catalog.runtime.target_dir}/{name}"
        target = root / relative
        if not target.exists():
            continue
        if target.read_bytes() == content or force:
            planned.append((PendingWrite(relative, None), "removed"))
        else:
            planned.append((PendingWrite(relative, None), "drifted"))
    return planned
