"""Which release of trace-instrument wrote a checkout, and whether this one may write over it.

A release is numbered MAJOR.MINOR.PATCH and ordered by those numbers; it changes whenever the
catalog, the templates or the runtime change (tests/test_release.py holds that). The manifest
records the release that wrote it ("tool"), the runtime package its own (`__version__` in its
__init__.py). A tree a newer release wrote is left alone: an older tool would put its older
runtime files and templates over the newer ones. A tree that names no release was written by
0.1.0 or earlier, which is older than every release that checks.
"""

from __future__ import annotations

import re
from pathlib import Path

from trace_instrument import __version__
from trace_instrument.engine.manifest import MANIFEST_NAME, Manifest
from trace_instrument.model import Catalog, RunError, RunErrorKind

TOOL = "trace-instrument"
UPGRADE = (
    "`pip install -U trace-instrument` (or, from a checkout of its source, `git pull` and `pip install -U .` there)"
)
_RELEASE = re.compile(r"(\d+)\.(\d+)\.(\d+)")
_RUNTIME_VERSION = re.compile(rb"""^__version__\s*=\s*["']([^"']+)["']""", re.MULTILINE)

Release = tuple[int, int, int]


def release(text: str) -> Release | None:
    """The numbers of a release named at the start of `text` ("0.2.0", "0.3.0rc1"); None if it names none."""
    found = _RELEASE.match(text.strip())
    return (int(found[1]), int(found[2]), int(found[3])) if found else None


def this_release() -> Release:
    current = release(__version__)
    assert current is not None, f"trace_instrument.__version__ is not MAJOR.MINOR.PATCH: {__version__!r}"
    return current


def writers(root: Path, catalog: Catalog, manifest: Manifest) -> dict[str, str]:
    """The releases the tree names, by where it names them (the manifest, the runtime package)."""
    found = {}
    if manifest.tool.startswith(TOOL + " "):
        found[MANIFEST_NAME] = manifest.tool.removeprefix(TOOL + " ").strip()
    init = root / catalog.runtime.target_dir / "__init__.py"
    try:
        named = _RUNTIME_VERSION.search(init.read_bytes()) if init.is_file() else None
    except OSError:
        named = None
    if named is not None:
        found[f"{catalog.runtime.target_dir}/__init__.py"] = named[1].decode(errors="replace")
    return found


def newer_writer(root: Path, catalog: Catalog, manifest: Manifest) -> RunError | None:
    """Why this release may not write the tree (None: it may): a newer one wrote it."""
    newer = {where: text for where, text in writers(root, catalog, manifest).items() if _newer(text)}
    if not newer:
        return None
    where, text = max(newer.items(), key=lambda item: release(item[1]) or (0, 0, 0))
    message = (
        f"nothing written: trace-instrument {text} wrote this checkout ({where} says so), and this is "
        f"trace-instrument {__version__}, an older release: it would put its older runtime files and "
        f"templates over the newer ones. Upgrade it: {UPGRADE}, then run the command again"
    )
    return RunError(RunErrorKind.NEWER_WRITER, message, path=where)


def _newer(text: str) -> bool:
    found = release(text)
    return found is not None and found > this_release()
