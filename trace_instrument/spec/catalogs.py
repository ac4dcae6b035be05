"""The catalog, from the tool's cache when its files are unchanged (no YAML or template is read then)."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterable
from pathlib import Path

from trace_instrument.caches import PickleCache, digest
from trace_instrument.model import Catalog
from trace_instrument.spec import paths


def load_catalog(
    anchors_dirs: Iterable[Path] | None = None,
    templates_dir: Path | None = None,
    *,
    shipped: bool = True,
) -> Catalog:
    """Load the shipped catalog plus any user anchor folders (later folders add points).

    A spec may also re-anchor a point declared in any folder read (`overrides: ID`).
    With shipped=False only the given folders are read (tests, experiments). A catalog
    loaded before from the very same files comes from the tool's cache.
    """
    user_dirs = list(anchors_dirs or [])
    templates = templates_dir or paths.templates_dir()
    folders = [*([paths.anchors_dir()] if shipped else []), *(Path(f) for f in user_dirs)]
    key = _catalog_key(folders, templates, shipped)
    cached = _CACHE.get(key)
    if isinstance(cached, Catalog):
        return cached
    # the reader (YAML, templates, validation) loads only when the catalog is read afresh
    from trace_instrument.spec.loader import read_catalog

    catalog = dataclasses.replace(read_catalog(user_dirs, templates, shipped=shipped), digest=key)
    _CACHE.put(key, catalog)
    return catalog


_CACHE = PickleCache("catalogs", limit=50)


def _catalog_key(folders: list[Path], templates: Path, shipped: bool) -> str:
    """A digest of every file a catalog is read from, and of how it is read."""
    parts: list[bytes | str] = [sys.version, str(shipped), str(templates)]
    for folder in [*folders, templates]:
        parts.append(str(folder))
        for path in sorted(Path(folder).rglob("*")) if Path(folder).is_dir() else []:
            if path.is_file() and "__pycache__" not in path.parts:
                parts += [str(path.relative_to(folder)), path.read_bytes()]
    return digest(*parts)
