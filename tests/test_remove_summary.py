"""remove's summary says what it took out and what was not there, in words that read as no error.

A point with no code in the checkout (never applied, an extra never selected, its file not in this
verl) is typed `missing` or `not-applicable` in remove's result; the summary words them as "not in
the checkout", never as a count of missing points. The numbers come from the manifest apply wrote
and from which files the checkout has, not from remove's result.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from trace_instrument.cli import app
from trace_instrument.model import Catalog

SMALL_FILES = Path(__file__).parent / "fixtures" / "verl-0.9.0-small"


def _cli(*args: object):
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def _summary(output: str) -> str:
    lines = [line.strip() for line in output.splitlines() if line.startswith("remove:")]
    assert len(lines) == 1, output
    return lines[0]


def test_remove_says_what_it_took_out_and_what_was_not_there(tmp_path: Path, catalog: Catalog) -> None:
    root = tmp_path / "checkout"
    shutil.copytree(SMALL_FILES, root)
    _cli("apply", root)  # exit 1: a point of this file requires one in a file the small checkout lacks
    recorded = json.loads((root / ".trace-instrument.json").read_text(encoding="utf-8"))["points"]
    total = len(catalog.points)
    elsewhere = sum(1 for p in catalog.points if not (root / p.file).is_file())
    assert 0 < len(recorded) < total - elsewhere, "some point of a file here was never applied"

    first = _cli("remove", root)
    assert first.exit_code == 0
    not_here = total - len(recorded)
    files = f"({elsewhere} in files this verl does not have)"
    assert (
        _summary(first.output) == f"remove: {len(recorded)} removed; {not_here} not in the checkout {files} — written"
    )
    assert "missing" not in first.output

    again = _cli("remove", root)
    assert again.exit_code == 0
    assert _summary(again.output) == f"remove: none of the {total} points is in the checkout {files} — nothing to write"
    assert "missing" not in again.output
