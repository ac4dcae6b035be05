"""Helpers the tests share (fixtures live in conftest.py)."""

from __future__ import annotations

import difflib
import os
import shutil
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
REPOSITORY = TESTS.parent

# Snapshots are rewritten only on request, and a run that rewrites them never
# passes: the changed snapshot has to be reviewed (git diff) and the tests run
# again without the variable.
UPDATE_ENV = "TRACE_INSTRUMENT_UPDATE_SNAPSHOTS"
UPDATING = os.environ.get(UPDATE_ENV) == "1"
REWRITTEN: list[Path] = []  # snapshots this run rewrote (conftest reports them and fails the run)


def copy_tree(pristine: Path, destination: Path) -> Path:
    """A writable copy of a pristine tree (only verl/ is copied)."""
    destination.mkdir(parents=True, exist_ok=True)
    shutil.copytree(pristine / "verl", destination / "verl")
    return destination


def copy_checkout(checkout: Path, destination: Path) -> Path:
    """A writable copy of a checkout: its verl/ and the files beside it (the manifest)."""
    root = copy_tree(checkout, destination)
    for extra in checkout.iterdir():
        if extra.is_file():
            shutil.copy2(extra, root / extra.name)
    return root


def instrument(checkout: Path, applied: Path) -> Path:
    """`checkout` (a copy of a pristine tree) as one apply leaves it: `applied`'s files in its place."""
    shutil.rmtree(checkout / "verl")
    return copy_checkout(applied, checkout)


def tree_bytes(root: Path) -> dict[str, bytes]:
    """Every file under root/verl, relative path -> bytes (caches left out)."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted((root / "verl").rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def assert_snapshot(snapshot: Path, produced: str | bytes) -> None:
    """`produced` must equal the stored snapshot; on a mismatch the failure shows what changed.

    With TRACE_INSTRUMENT_UPDATE_SNAPSHOTS=1 a differing (or missing) snapshot
    is rewritten and the test still fails, showing the change to review.
    """
    data = produced.encode("utf-8") if isinstance(produced, str) else produced
    stored = snapshot.read_bytes() if snapshot.exists() else None
    if stored == data:
        return
    name = _display_name(snapshot)
    change = snapshot_diff(stored or b"", data, name)
    if UPDATING:
        snapshot.parent.mkdir(parents=True, exist_ok=True)
        snapshot.write_bytes(data)
        REWRITTEN.append(snapshot)
        pytest.fail(
            f"rewrote {name} ({UPDATE_ENV}=1); what changed in it:\n{change}\n"
            "Review the change (git diff), then run the tests again without the variable.",
            pytrace=False,
        )
    missing = "is missing" if stored is None else "differs from what the tool produces now"
    pytest.fail(
        f"snapshot {name} {missing}; the change to the snapshot would be:\n{change}\n"
        f"If the change is intended: {UPDATE_ENV}=1 python -m pytest {_display_name(TESTS)}, "
        "review the rewritten snapshot and commit it.",
        pytrace=False,
    )


def snapshot_diff(stored: bytes, produced: bytes, name: str) -> str:
    """A unified diff from the stored snapshot to the produced one, readable even for byte-level changes."""
    old, new = _lines(stored), _lines(produced)
    lines = difflib.unified_diff(old, new, f"{name} (stored)", f"{name} (produced)")
    text = "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)
    if [line.rstrip("\r\n") for line in old] == [line.rstrip("\r\n") for line in new]:
        first = next((i for i, (a, b) in enumerate(zip(stored, produced)) if a != b), min(len(stored), len(produced)))
        text += f"(only line endings differ; the first differing byte is at offset {first})\n"
    return text


def _lines(data: bytes) -> list[str]:
    """Lines split at \\n only (as git and the patches do), each keeping its ending."""
    parts = data.decode("utf-8", errors="backslashreplace").split("\n")
    return [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _display_name(path: Path) -> str:
    return path.relative_to(REPOSITORY).as_posix() if path.is_relative_to(REPOSITORY) else str(path)


def suite_writes(files: list[Path], scratch: Path) -> list[Path]:
    """The discovery files whose contents name a path under the suite's scratch folder: what a
    test wrote there. Another process on the machine (a training run, another tool) may write
    them any time; that is not the suite's doing, so only the contents tell."""
    marker = str(scratch.resolve())
    written = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:  # absent, a folder, unreadable: nothing of ours
            continue
        if marker in text or str(scratch) in text:
            written.append(path)
    return written
