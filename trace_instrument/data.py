"""Where the shipped data folders (anchors/, templates/) live: both products find them here.

In a wheel they are packaged under trace_instrument/_data/; in a source
checkout (or an editable install) they sit at the repository root.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """The shipped folder ``name`` (``anchors`` or ``templates``)."""
    for candidate in (_PACKAGE_DIR / "_data" / name, _PACKAGE_DIR.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"trace_instrument data folder {name!r} not found next to {_PACKAGE_DIR}")
