"""Helpers the tests share (fixtures live in conftest.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

TESTS = Path(__file__).parent


def copy_tree(pristine: Path, destination: Path) -> Path:
    """A writable copy of a pristine tree (only verl/ is copied)."""
    destination.mkdir(parents=True, exist_ok=True)
    shutil.copytree(pristine / "verl", destination / "verl")
    return destination


def tree_bytes(root: Path) -> dict[str, bytes]:
    """Every file under root/verl, relative path -> bytes (caches left out)."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted((root / "verl").rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }
