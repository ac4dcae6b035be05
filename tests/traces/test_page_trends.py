"""The page compared with two baselines, as a person sees it in real headless Chromium at 1400 and 800
px: the per-step trend charts draw every run, chart text is the tables' size, no text is cut, every
tick label is a round value (log axes: 1, 2 or 5 x 10^k, never 0), and nothing leaves its card
(a table wider than its card scrolls inside it). The checks are this test's own script, added to a
copy of the page, measuring what Chromium laid out."""

from __future__ import annotations

import itertools
import json
import math
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
  var td = document.querySelector('td');
  var out = {width: window.innerWidth, scroll: document.documentElement.scrollWidth,
             tablePx: parseFloat(getComputedStyle(td).fontSize), charts: [], sections: [], trends: []};
  document.querySelectorAll('svg.chart:not(.empty)').forEach(function (svg) {
    var scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
    // the axis on a log scale: latency histograms' x, the stage times' y
    var log = svg.closest('figure.latency') ? 'x' : svg.closest('#trend-stage-times') ? 'y' : '';
    var chart = {label: svg.getAttribute('aria-label'), log: log, texts: []};
    svg.querySelectorAll('text').forEach(function (t) {
      if (getComputedStyle(t).display === 'none' || !t.textContent.trim()) return;
      chart.texts.push({text: t.textContent, cls: t.getAttribute('class') || '', cut: t.hasAttribute('data-cut'),
                        px: parseFloat(t.getAttribute('font-size')) * scale});
    });
    out.charts.push(chart);
  });
  document.querySelectorAll('main > section').forEach(function (section) {
    var card = section.getBoundingClientRect(), outside = [], wraps = [];
    section.querySelectorAll('*').forEach(function (el) {
      if (el.closest('.table-wrap') && !el.classList.contains('table-wrap')) return;  // scrolls inside its box
      if (el.closest('details:not([open])') && el.tagName !== 'SUMMARY' && el.tagName !== 'DETAILS') return;
      var r = el.getBoundingClientRect();
      if (!r.width && !r.height) return;
      if (r.left < card.left - 1 || r.right > card.right + 1) outside.push(el.tagName + ' ' + (el.textContent || '').slice(0, 40));
    });
    section.querySelectorAll('.table-wrap').forEach(function (w) {
      wraps.push({scroll: w.scrollWidth, client: w.clientWidth, overflow: getComputedStyle(w).overflowX});
    });
    out.sections.push({id: section.id, outside: outside, wraps: wraps});
  });
  document.querySelectorAll('figure.trend').forEach(function (f) {
    out.trends.push({id: f.id, dashed: f.querySelectorAll('path.series[stroke-dasharray]').length,
                     solid: f.querySelectorAll('path.series:not([stroke-dasharray])').length,
                     paler: f.querySelectorAll('rect[fill-opacity="0.55"]').length,
                     empty: f.querySelectorAll('svg.chart.empty').length});
  });
  var pre = document.createElement('pre'); pre.id = 'page-test'; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>
"""


def _measured(chromium: ModuleType, page: Path, width: int) -> dict:
    probe = page.with_name(f"probe-{width}.html")
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    dom = chromium.dom_at_width(probe, width)
    match = re.search(r'<pre id="page-test">(.*?)</pre>', dom, re.DOTALL)
    assert match, "the measuring script did not run"
    return json.loads(
        match.group(1).replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")
    )


@pytest.fixture(scope="module")
def baselines(tmp_path_factory: pytest.TempPathFactory, sim_config: simulate.SimConfig) -> list[Path]:
    """Two more runs of the simulated run's shape, each of its own seed, in folders of their own."""
    root = tmp_path_factory.mktemp("baselines")
    out = []
    for seed in (8, 9):
        config = simulate.SimConfig(**{**sim_config.__dict__, "seed": seed})
        out.append(simulate.run_plan(simulate.plan_run(config), root / f"run-{seed}"))
    return out


def _value(label: str) -> float:
    """The number a tick label says: ``1,500``, ``500 ms`` (in ms), ``2 s`` (in ms), ``50%``."""
    text = label.replace(",", "").replace("\u2212", "-").strip()
    for unit, factor in ((" ms", 1.0), (" s", 1000.0), ("%", 0.01)):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * factor
    return float(text)


def _round(value: float, log: bool) -> bool:
    """A log tick is 1, 2 or 5 x 10^k; a linear one has at most 3 significant digits."""
    if log:
        mantissa = value / 10 ** math.floor(math.log10(value) + 1e-12)
        return value > 0 and any(abs(mantissa - m) < 1e-9 for m in (1, 2, 5))
    return value == float(f"{value:.3g}")


def _page(tmp_path_factory: pytest.TempPathFactory, trace: Path, baselines: list[Path]) -> Path:
    page = tmp_path_factory.mktemp("page") / "report.html"
    args = ["analyze", str(trace), "--no-cache", "--html", str(page)]
    result = runner.invoke(app, [*args, *(a for b in baselines for a in ("--baseline", str(b)))])
    assert result.exit_code == 0, result.output
    return page


@pytest.fixture(scope="module")
def compared_page(sim_run, baselines: list[Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _page(tmp_path_factory, sim_run[0], baselines)


@pytest.fixture(scope="module")
def long_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """120 steps, one run: the step axes must be thinned to round step numbers."""
    config = simulate.SimConfig(seed=11, hosts=1, workers_per_host=1, steps=120, prompts_per_step=1, rollout_n=2)
    trace = simulate.run_plan(simulate.plan_run(config), tmp_path_factory.mktemp("long") / "trace")
    return _page(tmp_path_factory, trace, [])


def _evenly_round(values: list[float]) -> bool:
    """Ticks of a linear axis: evenly spaced, each a multiple of that spacing (0 20 40, not 1 13 25)."""
    if len(values) < 2:
        return True
    spacing = values[1] - values[0]
    even = all(math.isclose(b - a, spacing, rel_tol=1e-6) for a, b in itertools.pairwise(values))
    return even and all(math.isclose(v / spacing, round(v / spacing), abs_tol=1e-6) for v in values)


@pytest.mark.parametrize("width", [1400, 800])
@pytest.mark.parametrize("which", ["compared", "long"])
def test_the_page_reads_whole_at_both_widths(
    width: int, which: str, compared_page: Path, long_page: Path, chromium: ModuleType
) -> None:
    page = compared_page if which == "compared" else long_page
    out = _measured(chromium, page, width)
    assert out["width"] == width and out["scroll"] <= width, "the page scrolls sideways"
    # the per-step trends: all seven drawn, each line chart with this run solid and each baseline dashed
    trends = {t["id"]: t for t in out["trends"]}
    assert len(trends) == 7 and all(t["empty"] == 0 for t in trends.values()), trends
    baselines = 2 if which == "compared" else 0
    for key, trend in trends.items():
        if key == "trend-stop-reasons":
            assert (trend["paler"] > 0) == (baselines > 0), "the baselines' stop-reason bars"
        else:
            assert trend["solid"] >= 1 and trend["dashed"] == baselines * trend["solid"], (key, trend)
    assert out["tablePx"] == 12
    ticks = 0
    for chart in out["charts"]:
        axes: dict[str, list[float]] = {"x": [], "y": []}
        for t in chart["texts"]:
            where = f"{chart['label']}: {t['text']!r}"
            assert abs(t["px"] - out["tablePx"]) < 0.2, (
                f"{where} is {t['px']:.1f} px, the tables' text {out['tablePx']}"
            )
            assert not t["cut"], f"{where} was cut to fit"
            classes = t["cls"].split()
            if "tick" in classes:
                ticks += 1
                value = _value(t["text"])
                log = chart["log"] == ("x" if "x" in classes else "y")
                assert _round(value, log), f"{where} is not a round value"
                assert value > 0 or not log, f"{where}: 0 on a log axis"
                if not log and "tick" in classes:
                    axes["x" if "x" in classes else "y"].append(value)
        for axis, values in axes.items():
            shown = sorted(values) if axis == "y" else values
            assert _evenly_round(shown), f"{chart['label']}: {axis} ticks {shown} are not evenly round"
    assert ticks > 100
    for section in out["sections"]:
        assert section["outside"] == [], f"#{section['id']}: leaves its card: {section['outside'][:3]}"
        for wrap in section["wraps"]:
            assert wrap["scroll"] <= wrap["client"] or wrap["overflow"] in ("auto", "scroll"), section["id"]
    wide = [s["id"] for s in out["sections"] for w in s["wraps"] if w["scroll"] > w["client"]]
    if width == 800 and which == "compared":
        assert "baseline-steps" in wide  # wider than the card at 800 px: it scrolls inside it
    shot = chromium.screenshot(page, page.with_name(f"{which}-{width}.png"), width, 3000)
    assert shot.stat().st_size > 30_000
