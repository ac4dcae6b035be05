"""`analyze --html`: one offline page; a real headless Chromium renders every chart without console errors."""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType

import simulate
from typer.testing import CliRunner

from trace_instrument.cli import app

runner = CliRunner()


def test_report_renders_offline_in_chromium(
    sim_run: tuple[Path, simulate.RunPlan], tmp_path: Path, chromium: ModuleType
) -> None:
    trace_dir, _ = sim_run
    page = tmp_path / "report.html"
    result = runner.invoke(app, ["analyze", str(trace_dir), "--no-cache", "--html", str(page)])
    assert result.exit_code == 0, result.output
    text = page.read_text(encoding="utf-8")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text), "the page must not load anything"
    assert "<link" not in text and "@import" not in text
    charts = text.count('<svg class="chart"')
    # the 7 per-step trends (stop reasons, turns, response length, clip ratio, staleness, score, stage
    # times; they replace the score and turns per step bars), gantt, the 12 busiest latencies, funnel,
    # never trained, stop reasons, turns, completion tokens, tools, staleness, throughput per step and per worker
    assert charts == 7 + 1 + 12 + 2 + 4 + 1 + 2
    dom, console = chromium.dom_and_console(page)
    assert f'data-charts="{charts}"' in dom
    assert f'data-charts-rendered="{charts}"' in dom  # every chart laid out with a size
    assert console == []
    shot = chromium.screenshot(page, tmp_path / "report.png")
    assert shot.stat().st_size > 50_000  # a real picture, not an empty page


def test_console_errors_would_be_seen(tmp_path: Path, chromium: ModuleType) -> None:
    """The check above can fail: a page with a script error shows up in the console lines."""
    page = tmp_path / "bad.html"
    page.write_text("<html><body><script>undefinedFunction();</script></body></html>")
    _, console = chromium.dom_and_console(page)
    assert any("undefinedFunction" in line for line in console)
