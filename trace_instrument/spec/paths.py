"""Where the shipped anchor specs and templates live.

In a wheel they are packaged under trace_instrument/_data/; in a source
checkout (or an editable install) they sit at the repository root.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent.parent


def data_dir(name: str) -> Path:
    for candidate in (_PACKAGE_DIR / "_data" / name, _PACKAGE_DIR.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"trace_instrument data folder {name!r} not found next to {_PACKAGE_DIR}")


def anchors_dir() -> Path:
    return data_dir("anchors")


def templates_dir() -> Path:
    return data_dir("templates")


def schema_path(name: str = "anchors") -> Path:
    """The JSON Schema of spec files ("anchors") or of anchors/_catalog.yaml ("catalog").

    Editors use it through the `# yaml-language-server: $schema=...` line of a spec file.
    """
    return Path(__file__).resolve().parent / f"{name}.schema.json"
