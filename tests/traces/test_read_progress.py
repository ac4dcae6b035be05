"""The progress of a long read: shown on a terminal once the read has taken a while, never otherwise."""

from __future__ import annotations

import io
import time
from pathlib import Path

from rich.console import Console
from typer.testing import CliRunner

from trace_instrument.cli import app
from trace_instrument.traces.analyze import Options, analyze
from trace_instrument.traces.render.progress import ReadProgress


def _terminal() -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, force_terminal=True, width=80), buffer


def test_a_long_read_shows_its_current_part_on_a_terminal() -> None:
    console, buffer = _terminal()
    with ReadProgress(console, delay=0.05) as progress:
        progress("reading 3 files, 1.0 MB")
        time.sleep(0.4)
        progress("computing the views")
        time.sleep(0.3)
    shown = buffer.getvalue()
    assert "reading 3 files, 1.0 MB" in shown and "computing the views" in shown


def test_a_short_read_shows_nothing() -> None:
    console, buffer = _terminal()
    with ReadProgress(console, delay=5.0) as progress:
        progress("reading 3 files, 1.0 MB")
    time.sleep(0.1)
    assert buffer.getvalue() == ""


def test_nothing_is_shown_when_stderr_is_not_a_terminal() -> None:
    buffer = io.StringIO()
    with ReadProgress(Console(file=buffer, force_terminal=False), delay=0.0) as progress:
        progress("reading")
        time.sleep(0.2)
    assert buffer.getvalue() == ""


def test_analyze_tells_each_part_of_the_read(tiny_run: Path) -> None:
    told: list[str] = []
    analyze([tiny_run], Options(cache=False), told.append)
    assert told[0] == "finding the trace files"
    files = [p for kind in ("sample", "progress", "trajectory", "status") for p in (tiny_run / kind).glob("*.*")]
    size = sum(p.stat().st_size for p in files)
    amount = f"{size:,} bytes" if size < 1000 else f"{size / 1000:,.1f} KB"
    assert size < 1_000_000 and told[1] == f"reading {len(files)} files, {amount}"
    assert told[-1] == "computing the views"


def test_the_cli_writes_no_progress_into_a_pipe(tiny_run: Path) -> None:
    result = CliRunner().invoke(app, ["analyze", str(tiny_run), "--no-cache", "--format", "json"])
    assert result.exit_code == 0 and "reading" not in result.stderr
