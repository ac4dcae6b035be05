"""``analyze --html``: one self-contained offline page (inline CSS, SVG and a little script; no network).

The engine has already aggregated everything in SQL; the page only draws binned series: per-step
trends of verl's keys (render/trends.py, with every ``--baseline`` on the same charts), step
windows, latency histograms on log axes, distributions and bars.

Why hand-drawn SVG rather than a chart library (Vega-Lite through altair, plotly): the page must be
ONE file that opens offline. plotly's bundled JavaScript is about 3.5 MB and Vega + Vega-Lite +
vega-embed about 1 MB, inlined into every page, and rewritten at every refresh of ``analyze
--follow``; neither is installed with the ``analyze`` extra (altair loads its JavaScript from a CDN
unless yet another package inlines it), and a new dependency of the reader is one more thing to keep
working offline. Zoom is not needed to read a run's trend, and hover comes with SVG's own
``<title>`` tooltips. What a library does better, fitting text, is done where it can be done right:
in the browser. The inline script (SCRIPT) measures every chart text as laid out
(``getComputedTextLength``, ``getBBox``): it sets chart text to the size of the tables' text in
pixels whatever the chart's scale, cuts a text only when it is wider than its room (none is cut on
the simulated runs the page test opens at 1400 and 800 px), and shows as many tick labels as fit,
evenly spaced. Ticks are at round values (1, 2, 5 x 10^k; render/charts.py), log axes never show 0.
Each chart is an ``<svg class="chart">``; the script also counts the charts the browser laid out
(``data-charts-rendered`` on ``<body>``), which the end-to-end test reads back from headless Chromium.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from trace_instrument.traces.model import Analysis, Histogram
from trace_instrument.traces.render.charts import (
    PALETTE,
    axis_titles,
    duration_label,
    esc,
    linear_ticks,
    log_ticks,
    round_above,
    round_below,
    round_step,
    round_steps,
    svg,
    text,
)
from trace_instrument.traces.render.charts import no_data as _no_data_w
from trace_instrument.traces.render.metrics import short_name_of
from trace_instrument.traces.render.tables import Section, header_lines, ms, num, sections
from trace_instrument.traces.render.trajectory import rows_section, summary_lines, turns_section
from trace_instrument.traces.render.trends import trend_figures

# Charts are drawn in these units and scaled to their box's width (a chart fills its section): W for
# a section of the two-column grid, W_WIDE for a section across the page.
W = 640
W_WIDE = 960
TABLE_FONT_PX = 12  # the tables' text size (CSS), which the script gives every chart text


def _no_data(title: str, width: int = W) -> str:
    return _no_data_w(title, width)


def bars(
    labels: Sequence[str],
    values: Sequence[float],
    title: str,
    unit: str = "",
    color: str = PALETTE[0],
    width: int = W,
    height: int = 220,
    ticks: Sequence[str] | None = None,
    x_label: str = "",
    y_label: str = "",
    centered: bool | None = None,
) -> str:
    """A vertical bar chart with a value axis; ``ticks`` (one per bar, "" for none) label the x axis
    (the page's script shows as many as fit), under each bar's centre (default without ``ticks``) or
    its left edge (a histogram's bin edges)."""
    left, bottom, top = 64, 46, 10
    if not values or max(values) <= 0:
        return _no_data(title, width)
    vmax = max(values)
    plot_w, plot_h = width - left - 12, height - bottom - top
    bw = plot_w / len(values)
    parts = []
    for t in linear_ticks(0, vmax, 4):
        y = top + plot_h - t / vmax * plot_h
        parts.append(f'<line x1="{left}" x2="{width - 12}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>')
        parts.append(text(left - 5, y + 4, num(t), "end", 10, "tick y", left - 24))
    if centered is None:
        centered = ticks is None
    if ticks is None:
        ticks = list(labels)
    for i, (label, value) in enumerate(zip(labels, values)):
        h = value / vmax * plot_h
        x = left + i * bw
        parts.append(
            f'<rect x="{x + 0.5:.1f}" y="{top + plot_h - h:.1f}" width="{max(bw - 1, 1):.1f}" height="{h:.1f}" '
            f'fill="{color}"><title>{esc(label)}: {esc(num(value))}{esc(unit)}</title></rect>'
        )
        if ticks[i]:
            centre = x + (bw / 2 if centered else 0)
            parts.append(
                f'<line x1="{centre:.1f}" x2="{centre:.1f}" y1="{top + plot_h}" y2="{top + plot_h + 4}" class="axis"/>'
            )
            parts.append(text(centre, top + plot_h + 17, ticks[i], "middle", 10, "tick x", value=_number(ticks[i])))
    parts.append(f'<line x1="{left}" x2="{width - 12}" y1="{top + plot_h}" y2="{top + plot_h}" class="axis"/>')
    parts.append(axis_titles(width, height, left, x_label or title, y_label))
    return svg(height, "".join(parts), title, width)


def _number(label: str) -> float | None:
    """The number a tick label says (``1,500``), None for a label that is not one (``0–10``)."""
    try:
        return float(label.replace(",", ""))
    except ValueError:
        return None


def _step_ticks(steps: Sequence[int]) -> list[str]:
    """A label under each round step number (round_steps), none under the others."""
    ticked = round_steps(steps)
    return [f"{step:,}" if step in ticked else "" for step in steps]


def _log_edges(hist: Histogram) -> list[float]:
    """The bins' edges on a log axis: the first bin, from 0, as wide as the others (10 a decade)."""
    edges = list(hist.edges)
    if edges and edges[0] <= 0 < len(edges) - 1:
        edges[0] = edges[1] / 10**0.1
    return edges


def loghist(hist: Histogram, title: str, width: int = 300, height: int = 160) -> str:
    """A latency histogram on a log axis (10 bins a decade), ticked at round durations (log_ticks)."""
    counts = [float(c) for c in hist.counts]
    if not counts or max(counts) <= 0 or len(hist.edges) < 2:
        return _no_data(title, width)
    edges = _log_edges(hist)
    lo, hi = round_below(edges[0]), round_above(edges[-1])
    left, bottom, top, right = 52, 46, 8, 10
    plot_w, plot_h = width - left - right, height - bottom - top
    base = top + plot_h

    def x_of(v: float) -> float:
        return left + (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)) * plot_w

    vmax = max(counts)
    parts = []
    for t in linear_ticks(0, vmax, 3):
        y = base - t / vmax * plot_h
        parts.append(f'<line x1="{left}" x2="{width - right}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>')
        parts.append(text(left - 5, y + 4, num(t), "end", 10, "tick y", left - 22))
    for i, count in enumerate(counts):
        x0, x1 = x_of(edges[i]), x_of(edges[i + 1])
        h = count / vmax * plot_h
        parts.append(
            f'<rect x="{x0:.1f}" y="{base - h:.1f}" width="{max(x1 - x0 - 0.6, 0.8):.1f}" height="{h:.1f}" '
            f'fill="{PALETTE[0]}"><title>{esc(ms(hist.edges[i]))} – {esc(ms(hist.edges[i + 1]))}: '
            f"{esc(num(count))}</title></rect>"
        )
    for t in log_ticks(lo, hi, 5):
        x = x_of(t)
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{base}" y2="{base + 4}" class="axis"/>')
        parts.append(text(x, base + 17, duration_label(t), "middle", 10, "tick x"))
    parts.append(f'<line x1="{left}" x2="{width - right}" y1="{base}" y2="{base}" class="axis"/>')
    parts.append(axis_titles(width, height, left, "latency (log scale)", "transitions"))
    return svg(height, "".join(parts), title, width)


def hbars(rows: Sequence[tuple[str, float, str]], title: str, color: str = PALETTE[0], x_label: str = "") -> str:
    """Horizontal bars: (label, value, annotation); each label on a line of its own above its bar,
    the whole chart wide (so none is cut), the annotation right of the bar."""
    if not rows:
        return _no_data(title)
    row_h, left, top = 40, 10, 4
    bar_room = (W - left - 10) * 0.55
    height = top + row_h * len(rows) + 28
    vmax = max(v for _, v, _ in rows) or 1
    parts = []
    for i, (label, value, note) in enumerate(rows):
        y = top + i * row_h
        w = max(value / vmax * bar_room, 1.0)
        parts.append(text(left, y + 14, label, "start", 11, "bar-label", W - left - 10))
        parts.append(
            f'<rect x="{left}" y="{y + 19}" width="{w:.1f}" height="{row_h - 24}" fill="{color}">'
            f"<title>{esc(label)}: {esc(note)}</title></rect>"
        )
        parts.append(text(left + w + 6, y + 31, note, "start", 11, "bar-note", W - 10 - (left + w + 6)))
    parts.append(axis_titles(W, height, left, x_label or title, ""))
    return svg(height, "".join(parts), title)


def histogram(hist: Histogram, title: str, x_label: str, y_label: str) -> str:
    """Equal-width bins; integer-wide bins (turn counts) are labelled by their value."""
    labels = [f"{lo:g}" if hi - lo == 1 else f"{lo:g}–{hi:g}" for lo, hi in zip(hist.edges, hist.edges[1:])]
    ticks = None
    if hist.edges and any(hi - lo != 1 for lo, hi in zip(hist.edges, hist.edges[1:])):
        ticks = [f"{lo:,g}" for lo in hist.edges[:-1]]
    counts = [float(c) for c in hist.counts]
    return bars(labels, counts, title, "", ticks=ticks, x_label=x_label, y_label=y_label)


# The height the step rows share (in chart units): a row is 26 units for a few steps and gets thinner
# with more, down to GANTT_MIN_ROW (past 96 steps the chart grows again, 5 units a step).
GANTT_PLOT_PX = 480
GANTT_MIN_ROW = 5.0


def gantt(a: Analysis) -> str:
    """Step windows: a rollout bar and a train bar per step on one time axis, syncs as ticks.

    The rows share GANTT_PLOT_PX (26 units each for a few steps, down to GANTT_MIN_ROW); with thin
    rows every k-th step is labelled, and a bar is never narrower than 4 units nor lower than 2.8,
    so each stays visible when the page is 800 px wide."""
    steps = [s for s in a.steps if s.rollout_start_ms is not None or s.train_start_ms is not None]
    if not steps:
        return _no_data("step windows: no CSV rows with global_step", W_WIDE)
    times = [
        t
        for s in steps
        for t in (s.rollout_start_ms, s.rollout_end_ms, s.train_start_ms, s.train_end_ms, s.sync_ms)
        if t is not None
    ]
    t0, t1 = min(times), max(times)
    span = max(t1 - t0, 1)
    left, top, width = 84, 24, W_WIDE
    row_h = max(GANTT_MIN_ROW, min(26.0, GANTT_PLOT_PX / len(steps)))
    every = round_step(18 / row_h)  # step labels at least 18 units apart, on round step numbers
    height = int(top + row_h * len(steps) + 46)
    bar_h = max(2.8, row_h * 0.36)

    def x_of(t: float) -> float:
        return left + (t - t0) / span * (width - left - 12)

    parts = [
        text(left, 14, "rollout", cls="legend-rollout"),
        text(left + 70, 14, "train", cls="legend-train"),
        text(left + 130, 14, "| weight sync", cls="legend-sync"),
    ]
    plot_bottom = top + row_h * len(steps)
    for t in linear_ticks(0, span / 1000, 8):
        x = x_of(t0 + t * 1000)
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{plot_bottom:.1f}" class="grid"/>')
        parts.append(text(x, plot_bottom + 17, f"{t:,g} s", "middle", 10, "tick x", value=t))
    for i, s in enumerate(steps):
        y = top + i * row_h
        if s.step % every == 0 or every == 1:
            parts.append(text(left - 6, y + row_h / 2 + 4, f"{s.step:,}", "end", 11, "tick y", left - 27))
        for start, end, color, label, dy in (
            (s.rollout_start_ms, s.rollout_end_ms, PALETTE[0], "rollout", row_h * 0.1),
            (s.train_start_ms, s.train_end_ms, PALETTE[1], "train", max(row_h * 0.5, row_h * 0.1 + bar_h)),
        ):
            if start is None or end is None:
                continue
            x, w = x_of(start), max(x_of(end) - x_of(start), 4.0)
            parts.append(
                f'<rect x="{x:.1f}" y="{y + dy:.1f}" width="{w:.1f}" height="{bar_h:.1f}" fill="{color}">'
                f"<title>step {s.step} {label}: {esc(ms(end - start))}</title></rect>"
            )
        if s.sync_ms is not None:
            x = x_of(s.sync_ms)
            parts.append(
                f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y + 1:.1f}" y2="{y + row_h - 1:.1f}" stroke="{PALETTE[3]}" '
                f'stroke-width="2"><title>step {s.step} weights synced</title></line>'
            )
    parts.append(axis_titles(width, height, left, "time since the first step's first row (s)", "global step"))
    return svg(height, "".join(parts), "step windows", width)


def stacked(a: Analysis) -> str:
    """Staleness: samples per train step, stacked by staleness."""
    if not a.staleness:
        return _no_data("staleness: no trained samples with a generation step")
    steps = sorted({r.train_step for r in a.staleness})
    values = sorted({r.staleness for r in a.staleness})
    counts = {(r.train_step, r.staleness): r.count for r in a.staleness}
    totals = [sum(counts.get((s, v), 0) for v in values) for s in steps]
    height, left, bottom, top = 240, 64, 46, 30
    plot_h = height - top - bottom
    vmax = max(totals) or 1
    bw = (W - left - 12) / len(steps)
    # the legend: "staleness +0 +1 ..." in one line, as many lags as fit
    parts = [text(left, 14, "staleness")]
    at = left + 74.0
    for i, v in enumerate(values):
        if at + 40 > W - 12:
            parts.append(text(at, 14, "…"))
            break
        parts.append(text(at, 14, f"+{v}", cls=f"swatch-{i % len(PALETTE)}"))
        at += 20 + 8 * len(str(v))
    for t in linear_ticks(0, vmax):
        y = top + plot_h - t / vmax * plot_h
        parts.append(f'<line x1="{left}" x2="{W - 12}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>')
        parts.append(text(left - 5, y + 4, num(t), "end", 10, "tick y", left - 24))
    ticked = round_steps(steps)
    for i, step in enumerate(steps):
        base = 0.0
        x = left + i * bw
        for j, v in enumerate(values):
            c = counts.get((step, v), 0)
            if not c:
                continue
            h = c / vmax * plot_h
            parts.append(
                f'<rect x="{x + 1:.1f}" y="{top + plot_h - base - h:.1f}" width="{max(bw - 2, 1):.1f}" '
                f'height="{h:.1f}" fill="{PALETTE[j % len(PALETTE)]}"><title>step {step}, staleness +{v}: '
                f"{c}</title></rect>"
            )
            base += h
        if step in ticked:
            parts.append(text(x + bw / 2, height - bottom + 17, f"{step:,}", "middle", 10, "tick x", value=step))
    parts.append(axis_titles(W, height, left, "train step", "trained samples"))
    return svg(height, "".join(parts), "staleness")


def _latency_charts(a: Analysis) -> str:
    busiest = sorted(a.latencies, key=lambda lat: -lat.count)[:12]
    out = []
    for lat in sorted(busiest, key=lambda lat: a.latencies.index(lat)):
        key = f"{lat.from_event} -> {lat.to_event}"
        hist = a.latency_histograms.get(key)
        if hist is None:
            continue
        title = f"{short_name_of(lat.from_event)} → {short_name_of(lat.to_event)}"
        caption = f"n={num(lat.count)} p50 {ms(lat.p50)} · p90 {ms(lat.p90)} · p99 {ms(lat.p99)} · max {ms(lat.max)}"
        out.append(
            f'<figure class="latency"><figcaption><b>{esc(title)}</b><br><span>{esc(caption)}</span></figcaption>'
            f"{loghist(hist, title)}</figure>"
        )
    return f'<div class="latencies">{"".join(out)}</div>' if out else "<p>No transitions.</p>"


def _table(section: Section, links: dict[str, str] | None = None, caption: str = "") -> str:
    """The section as a table in a box that scrolls sideways when the table is wider than its card;
    a first cell named in ``links`` links to that anchor of the page."""
    head = "".join(f"<th>{esc(c)}</th>" for c in section.columns)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td><a href="#{links[c]}">{esc(c)}</a></td>'
            if i == 0 and links and c in links
            # a first cell (a figure's key) may break after its slashes when the card is narrow
            else f"<td>{esc(c).replace('/', '/<wbr>') if i == 0 else esc(c)}</td>"
            for i, c in enumerate(row)
        )
        + "</tr>"
        for row in section.rows
    )
    cap = f'<p class="table-caption">{esc(caption)}</p>' if caption else ""
    return (
        f'{cap}<div class="table-wrap"><table><thead><tr>{head}</tr></thead>'
        f"<tbody>{body or '<tr><td>(none)</td></tr>'}</tbody></table></div>"
    )


def _opened(a: Analysis) -> str:
    """The slowest rollouts opened turn by turn, each under an anchor the table above links to."""
    parts = []
    for index, detail in enumerate(a.slowest_details):
        lines = "".join(f"<p>{esc(line)}</p>" for line in summary_lines(detail))
        parts.append(
            f'<details id="trajectory-{index}" class="trajectory"><summary>{esc(detail.sample_id)}</summary>'
            f"{lines}{_table(turns_section(detail))}{_table(rows_section(detail))}</details>"
        )
    return "".join(parts)


CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1f2328;background:#f6f8fa}
header{background:#24292f;color:#fff;padding:16px 28px}header h1{margin:0 0 6px;font-size:20px}
header p{margin:2px 0;font-size:13px;color:#d0d7de;font-family:ui-monospace,Menlo,monospace;overflow-wrap:anywhere}
main{padding:12px 28px 40px;display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,600px),1fr));gap:18px}
section{background:#fff;border:1px solid #d0d7de;border-radius:8px;padding:12px 16px;min-width:0}
section.wide{grid-column:1/-1}details.trajectory{margin:8px 0;border-top:1px solid #d0d7de;padding-top:6px}
details.trajectory summary{cursor:pointer;font-family:ui-monospace,Menlo,monospace;overflow-wrap:anywhere}
h2{font-size:16px;margin:4px 0 10px}section p{overflow-wrap:anywhere}
svg.chart{display:block;max-width:100%;height:auto}
.trends{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,330px),1fr));gap:14px 20px}
.latencies{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,260px),1fr));gap:10px 16px;margin-bottom:12px}
figure{margin:0;min-width:0}figcaption{font-size:12px;margin-bottom:4px}
figure.latency figcaption{min-height:34px}
figcaption span{color:#57606a}svg text{fill:#24292f;font-family:system-ui,sans-serif}
.legend{font-size:12px;display:flex;flex-wrap:wrap;gap:2px 12px;margin:2px 0 4px}
.legend span{white-space:nowrap}.legend svg{vertical-align:middle;margin-right:4px}
.chart-note{font-size:12px;color:#57606a;margin:0 0 4px}
.grid{stroke:#eaeef2}.axis{stroke:#8c959f}.note{color:#9a6700;background:#fff8c5;padding:6px 10px;border-radius:6px}
.table-wrap{max-width:100%;overflow-x:auto;margin-top:8px}
table{border-collapse:collapse;font-size:12px;font-variant-numeric:tabular-nums}
.table-caption{font-size:12px;color:#57606a;margin:8px 0 0}
th,td{border-bottom:1px solid #eaeef2;padding:3px 8px;text-align:right;white-space:nowrap}
th{white-space:normal;min-width:3em;vertical-align:bottom}
th:first-child,td:first-child{text-align:left}td:first-child{white-space:normal;overflow-wrap:break-word;max-width:24em}th{background:#f6f8fa;position:sticky;top:0}
.legend-rollout{fill:#4e79a7!important}.legend-train{fill:#f28e2b!important}.legend-sync{fill:#e15759!important}
""" + "".join(f".swatch-{i}{{fill:{c}!important}}" for i, c in enumerate(PALETTE))

SCRIPT = (
    f"var TABLE_FONT_PX = {TABLE_FONT_PX};"
    + """
// every chart text at the tables' text size whatever the chart's scale, cut only if wider than its room
function fitText(svg, scale) {
  svg.querySelectorAll('text').forEach(function (t) {
    if (t.dataset.full === undefined) t.dataset.full = t.textContent;
    var size = TABLE_FONT_PX / scale;
    t.setAttribute('font-size', size.toFixed(2));
    // an upright axis title: its glyphs reach its font size left of its baseline
    var y = t.getAttribute('data-y');
    if (y !== null) t.setAttribute('transform', 'translate(' + (size + 1).toFixed(2) + ',' + y + ') rotate(-90)');
    t.textContent = t.dataset.full;
    t.removeAttribute('data-cut');
    var room = parseFloat(t.getAttribute('data-room'));
    if (!(room > 0) || t.getComputedTextLength() <= room) return;
    var full = t.dataset.full, lo = 1, hi = full.length - 1;
    while (lo < hi) {
      var mid = Math.ceil((lo + hi) / 2);
      t.textContent = full.slice(0, mid) + '\\u2026';
      if (t.getComputedTextLength() <= room) lo = mid; else hi = mid - 1;
    }
    t.textContent = full.slice(0, lo) + '\\u2026';
    t.setAttribute('data-cut', '1');
  });
}
// as many tick labels of an x axis as fit side by side inside the chart: every k-th, k itself 1, 2 or
// 5 x 10^j; with their values known (data-v), the multiples of k spacings (20 40 60 80: 40 80)
function thinTicks(svg, width) {
  var ticks = Array.prototype.slice.call(svg.querySelectorAll('text.tick.x'));
  ticks.forEach(function (t) { t.style.display = ''; });
  var boxes = ticks.map(function (t) { return t.getBBox(); });
  var v = ticks.map(function (t) { return parseFloat(t.getAttribute('data-v')); });
  var spacing = v.length > 1 ? Math.abs(v[1] - v[0]) : 0;
  var byValue = spacing > 0 && v.every(function (x) { return isFinite(x); });
  function kept(i, k) { return byValue ? Math.round(v[i] / spacing) % k === 0 : i % k === 0; }
  function fits(k) {
    var last = -Infinity;
    for (var i = 0; i < ticks.length; i++) {
      if (!kept(i, k)) continue;
      if (boxes[i].x < last + 6) return false;
      last = boxes[i].x + boxes[i].width;
    }
    return true;
  }
  var k = 1;
  for (var j = 1; !fits(k) && k < 10 * ticks.length; j++) k = [1, 2, 5][j % 3] * Math.pow(10, Math.floor(j / 3));
  ticks.forEach(function (t, i) {
    if (!kept(i, k) || boxes[i].x < 0 || boxes[i].x + boxes[i].width > width) t.style.display = 'none';
  });
}
function fitCharts() {
  document.querySelectorAll('svg.chart').forEach(function (svg) {
    var view = svg.viewBox.baseVal, box = svg.getBoundingClientRect();
    if (!view || !view.width || !box.width) return;
    fitText(svg, box.width / view.width);
    thinTicks(svg, view.width);
  });
}
document.addEventListener('DOMContentLoaded', function () {
  var charts = document.querySelectorAll('svg.chart'), shown = 0;
  charts.forEach(function (svg) { var r = svg.getBoundingClientRect(); if (r.width > 0 && r.height > 0) shown++; });
  document.body.setAttribute('data-charts', String(charts.length));
  document.body.setAttribute('data-charts-rendered', String(shown));
  fitCharts();
  openLinked();
});
var resizing = null;
window.addEventListener('resize', function () { clearTimeout(resizing); resizing = setTimeout(fitCharts, 100); });
// a link to an opened trajectory unfolds it
function openLinked() {
  var target = location.hash && document.getElementById(location.hash.slice(1));
  if (target && target.tagName === 'DETAILS') target.open = true;
}
window.addEventListener('hashchange', openLinked);
"""
)


def _trends(a: Analysis, baselines: Sequence[Analysis]) -> str:
    compared = "" if not baselines else " (baselines dashed: the same figure of each run, never added up)"
    return (
        f"<p class=\"chart-note\">verl's per-step keys, as in <code>--format json</code>'s <code>steps</code>"
        f"{esc(compared)}; hover a point for its value.</p>"
        f'<div class="trends">{trend_figures(a, baselines)}</div>'
    )


def page(
    a: Analysis,
    extra: Sequence[Section] = (),
    reload_seconds: float | None = None,
    baselines: Sequence[Analysis] = (),
) -> str:
    """The whole report as one HTML document; ``extra`` sections (the baseline comparison) as tables
    after it; ``reload_seconds``: the page reloads itself that often (``analyze --follow``);
    ``baselines``: the runs drawn beside this one on the per-step trend charts."""
    h = a.header
    by_key = {s.key: s for s in sections(a)}
    r = a.rollouts
    blocks = [
        ("wide", "trends", "Trends per step: is this run unstable?", _trends(a, baselines)),
        ("wide", "step-windows", "Step windows", gantt(a) + _table(by_key["step-windows"])),
        ("wide", "training-per-step", "Training per step", _table(by_key["training-per-step"])),
        (
            "wide",
            "stage-latencies",
            "Stage latencies (log-scale histograms of the busiest transitions)",
            _latency_charts(a) + _table(by_key["stage-latencies"]),
        ),
        (
            "",
            "funnel",
            "Funnel (trajectories per milestone)",
            hbars(
                [
                    (
                        f.milestone,
                        float(f.trajectories),
                        f"{num(f.trajectories)} trajectories, {num(f.prompts)} prompts",
                    )
                    for f in a.funnel
                ],
                "funnel",
                PALETTE[2],
                "trajectories",
            ),
        ),
        (
            "",
            "never-trained",
            "Never trained (stuck or in flight)",
            hbars(
                [
                    (
                        g.last_event.split(":")[-1],
                        float(g.count),
                        f"{num(g.count)} · {g.state} · oldest {ms(g.oldest_age_ms)}",
                    )
                    for g in a.in_flight
                ],
                "never trained",
                PALETTE[3],
                "samples never trained, by their last stage",
            )
            + _table(by_key["oldest-never-trained"]),
        ),
    ]
    if r is not None:
        blocks += [
            (
                "",
                "stop-reasons",
                "Stop reasons",
                hbars(
                    [(s.reason, float(s.count), f"{num(s.count)} ({s.frac:.1%})") for s in r.stop_reasons],
                    "stop reasons",
                    PALETTE[4],
                    "trajectories",
                ),
            ),
            (
                "",
                "turns",
                "Turns per trajectory",
                histogram(r.turns_histogram, "turns per trajectory", "turns per trajectory", "trajectories")
                + _table(by_key["rollouts"]),
            ),
            (
                "",
                "completion-tokens",
                "Completion tokens per rollout (no tool observations)",
                histogram(
                    r.completion_tokens_histogram,
                    "completion tokens",
                    "completion tokens per trajectory",
                    "trajectories",
                )
                # the table is another figure than the histogram: say so, or their means contradict
                + _table(
                    by_key["response-length"],
                    caption=by_key["response-length"].title
                    + "; not the completion tokens of the histogram above, which leave the observations out",
                ),
            ),
            (
                "",
                "tool-time",
                "Tool time by tool",
                hbars(
                    [
                        (t.tool, float(t.total_ms), f"{num(t.count)} calls, p50 {ms(t.p50)}, p99 {ms(t.p99)}")
                        for t in r.tools
                    ],
                    "tool time",
                    PALETTE[6],
                    "total tool time (ms)",
                ),
            ),
            ("", "sglang-timing", "sglang timing", _table(by_key["sglang-timing"])),
        ]
    links = {d.sample_id: f"trajectory-{i}" for i, d in enumerate(a.slowest_details)}
    blocks.append(
        (
            "wide",
            "slowest-rollouts",
            by_key["slowest-trajectories"].title,
            _table(by_key["slowest-trajectories"], links) + _opened(a),
        )
    )
    if "rollouts-per-step" in by_key:
        blocks.append(
            ("wide", "rollouts-per-step", by_key["rollouts-per-step"].title, _table(by_key["rollouts-per-step"]))
        )
    blocks += [
        ("", "staleness", "Staleness (train step − generation step)", stacked(a)),
        (
            "",
            "throughput-per-step",
            "Generation throughput per step (tokens/s)",
            bars(
                [str(t.step) for t in a.step_throughput],
                [t.tokens_per_s or 0.0 for t in a.step_throughput],
                "throughput per step",
                " tok/s",
                PALETTE[5],
                ticks=_step_ticks([t.step for t in a.step_throughput]),
                x_label="global step",
                y_label="tokens/s",
                centered=True,
            )
            + _table(by_key["throughput-per-step"]),
        ),
        (
            "",
            "throughput-per-worker",
            "Generation throughput per worker (tokens/s)",
            hbars(
                [
                    (w.worker, w.tokens_per_s or 0.0, f"{num(w.tokens_per_s)} tok/s, {num(w.trajectories)} traj")
                    for w in a.worker_throughput
                ],
                "throughput per worker",
                PALETTE[5],
                "generated tokens/s",
            ),
        ),
    ]
    blocks += [("wide", section.key, section.title, _table(section)) for section in extra]
    notes = "".join(f'<p class="note">{esc(n)}</p>' for n in a.notes)
    body = "".join(
        f'<section id="{key}" class="{cls}"><h2>{esc(title)}</h2>{content}</section>'
        for cls, key, title, content in blocks
    )
    head_lines = "".join(f"<p>{esc(line)}</p>" for line in header_lines(h))
    title = f"Trace analysis — {', '.join(h.job_ids) or 'run'}"
    reload = f'<meta http-equiv="refresh" content="{reload_seconds:g}">' if reload_seconds else ""
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">{reload}<style>{CSS}</style></head>'
        f"<body><header><h1>{esc(title)}</h1>{head_lines}</header>"
        f'<main><section id="warnings" class="wide">{notes or "<p>No warnings.</p>"}</section>{body}</main>'
        f"<script>{SCRIPT}</script></body></html>\n"
    )


def write_html(
    analysis: Analysis,
    target: Path,
    extra: Sequence[Section] = (),
    reload_seconds: float | None = None,
    baselines: Sequence[Analysis] = (),
) -> None:
    """Write the report to ``target``, whole or not at all (a reloading browser never sees half a page)."""
    partial = target.with_name(target.name + ".partial")
    partial.write_text(page(analysis, extra, reload_seconds, baselines), encoding="utf-8")
    partial.replace(target)
