"""The page as a person sees it, in real headless Chromium at 1400 and 800 px: every chart fills its
box and has axis titles, no text leaves its chart, the page never scrolls sideways, and the step
windows of a 120-step run stay readable. The checks are this test's own script, added to a copy of
the page, measuring what Chromium laid out."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import ModuleType

import pytest
import simulate
from typer.testing import CliRunner

from trace_instrument.cli import app

runner = CliRunner()

MEASURE = """
<script>
window.addEventListener('load', function () {
  var out = {width: window.innerWidth, scroll: document.documentElement.scrollWidth, charts: []};
  document.querySelectorAll('svg.chart').forEach(function (svg) {
    var box = svg.getBoundingClientRect(), room = svg.parentElement.getBoundingClientRect();
    var style = getComputedStyle(svg.parentElement);
    var inner = room.width - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    var chart = {label: svg.getAttribute('aria-label'), empty: svg.classList.contains('empty'),
                 width: box.width, height: box.height, room: inner,
                 x: svg.querySelectorAll('text.axis-label.x').length,
                 y: svg.querySelectorAll('text.axis-label.y').length,
                 vertical: svg.querySelectorAll('rect').length > 0 && svg.querySelectorAll('text.axis-label.y').length > 0,
                 outside: []};
    chart.smallest = 1e9;
    svg.querySelectorAll('text').forEach(function (t) {
      if (getComputedStyle(t).display === 'none') return;  // a tick label the page's script left out
      var r = t.getBoundingClientRect();
      if (t.textContent.trim()) chart.smallest = Math.min(chart.smallest, r.height);
      if (r.left < box.left - 1 || r.right > box.right + 1 || r.top < box.top - 1 || r.bottom > box.bottom + 1)
        chart.outside.push(t.textContent);
    });
    out.charts.push(chart);
  });
  var rows = document.querySelectorAll('#step-windows svg.chart rect');
  out.gantt = {height: document.querySelector('#step-windows svg.chart').getBoundingClientRect().height,
               thinnest: Math.min.apply(null, Array.prototype.map.call(rows, function (r) {
                 return r.getBoundingClientRect().width; })),
               lowest: Math.min.apply(null, Array.prototype.map.call(rows, function (r) {
                 return r.getBoundingClientRect().height; }))};
  var pre = document.createElement('pre'); pre.id = 'page-test'; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>
"""


def _measured(chromium: ModuleType, page: Path, width: int, target: Path) -> dict:
    probe = target / f"probe-{width}.html"
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    dom = chromium.dom_at_width(probe, width)
    match = re.search(r'<pre id="page-test">(.*?)</pre>', dom, re.DOTALL)
    assert match, "the measuring script did not run"
    return json.loads(
        match.group(1).replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")
    )


@pytest.fixture(scope="module")
def long_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """120 steps: the Gantt must stay readable."""
    config = simulate.SimConfig(seed=11, hosts=1, workers_per_host=1, steps=120, prompts_per_step=1, rollout_n=2)
    return simulate.run_plan(simulate.plan_run(config), tmp_path_factory.mktemp("long") / "trace")


@pytest.mark.parametrize("width", [1400, 800])
@pytest.mark.parametrize("which", ["sim", "long"])
def test_every_chart_fits_and_has_axis_titles(
    width: int, which: str, sim_run, long_run, tmp_path: Path, chromium: ModuleType
) -> None:
    trace = sim_run[0] if which == "sim" else long_run
    page = tmp_path / "report.html"
    result = runner.invoke(app, ["analyze", str(trace), "--no-cache", "--html", str(page)])
    assert result.exit_code == 0, result.output
    out = _measured(chromium, page, width, tmp_path)
    assert out["width"] == width
    assert out["scroll"] <= width, "the page scrolls sideways"
    drawn = [c for c in out["charts"] if not c["empty"]]
    assert len(drawn) >= 15
    for chart in drawn:
        assert chart["x"] == 1, f"{chart['label']}: no x-axis title"
        assert chart["outside"] == [], f"{chart['label']}: text outside the chart: {chart['outside']}"
        # a text box about 1.2 times its font: no text drawn smaller than a 7 px font
        assert chart["smallest"] >= 8.4, f"{chart['label']}: text too small to read ({chart['smallest']:.1f} px)"
        assert chart["width"] >= 0.97 * min(chart["room"], 300 if chart["room"] < 320 else chart["room"]), chart
    vertical = [c for c in drawn if c["label"] not in {"funnel", "never trained", "stop reasons", "tool time",
                                                        "throughput per worker"}]  # fmt: skip
    assert all(c["y"] == 1 for c in vertical), [c["label"] for c in vertical if c["y"] != 1]
    if which == "long":
        gantt = out["gantt"]
        assert gantt["height"] < 1000, "the step windows grow with the steps"
        assert gantt["thinnest"] >= 1.9 and gantt["lowest"] >= 1.4, "a bar too small to see"
    chromium.screenshot(page, tmp_path / f"{which}-{width}.png", width=width, height=2400)
    assert (tmp_path / f"{which}-{width}.png").stat().st_size > 30_000
