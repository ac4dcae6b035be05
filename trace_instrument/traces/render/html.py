"""``analyze --html``: one self-contained offline page (inline CSS and SVG, no network, no library).

The engine has already aggregated everything in SQL; the page only draws binned series.
Each chart is an ``<svg class="chart">`` with native ``<title>`` tooltips; a few lines of
inline script only count the charts the browser laid out (``data-charts-rendered`` on
``<body>``), which the end-to-end test reads back from a headless Chromium.
"""

from __future__ import annotations

import html
import itertools
import math
from collections.abc import Sequence
from pathlib import Path

from trace_instrument.traces.model import Analysis, Histogram
from trace_instrument.traces.render.metrics import short_name_of
from trace_instrument.traces.render.tables import Section, header_lines, ms, num, sections
from trace_instrument.traces.render.trajectory import rows_section, summary_lines, turns_section

PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f")
# Charts are drawn in these units and scaled to their box's width (a chart fills its section): W for
# a section of the two-column grid, W_WIDE for a section across the page.
W = 640
W_WIDE = 960
# An average glyph's width per px of font size (system-ui); labels are cut to what fits by it, with
# a margin: the page test measures every text in Chromium and fails on any that leaves its chart.
CHAR_PX = 0.62


def _esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def _svg(height: int, body: str, label: str, width: int = W, empty: bool = False) -> str:
    kind = "chart empty" if empty else "chart"
    return (
        f'<svg class="{kind}" role="img" aria-label="{_esc(label)}" width="100%" '
        f'viewBox="0 0 {width} {height}" preserveAspectRatio="xMinYMin meet">{body}</svg>'
    )


def _no_data(title: str, width: int = W) -> str:
    return _svg(60, _text(10, 34, _fit(f"{title}: no data", width - 20)), title, width, empty=True)


def _fit(text: str, room_px: float, size: int = 11) -> str:
    """``text`` cut (ending in …) to what fits in ``room_px`` at font ``size``."""
    chars = max(1, int(room_px / (size * CHAR_PX)))
    return text if len(text) <= chars else text[: max(1, chars - 1)] + "…"


def _axes(width: int, height: int, left: float, x_label: str, y_label: str) -> str:
    """The axis titles, with their units: the x one under the plot, the y one upright at the left edge."""
    parts = [_text((left + width - 10) / 2, height - 5, _fit(x_label, width - left), "middle", 11, "axis-label x")]
    if y_label:
        parts.append(
            f'<text transform="translate(13,{(height - 24) / 2:.1f}) rotate(-90)" text-anchor="middle" '
            f'font-size="11" class="axis-label y">{_esc(_fit(y_label, height - 30))}</text>'
        )
    return "".join(parts)


def _text(x: float, y: float, text: object, anchor: str = "start", size: int = 11, cls: str = "") -> str:
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" font-size="{size}"'
        f"{f' class={chr(34)}{cls}{chr(34)}' if cls else ''}>{_esc(text)}</text>"
    )


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / n
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(s * magnitude for s in (1, 2, 5, 10) if raw <= s * magnitude)
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(int((hi - first) / step) + 1)]


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
) -> str:
    """A vertical bar chart with a value axis; ``ticks`` (one per bar, "" for none) label the x axis."""
    left, bottom, top = 62, 44, 10
    if not values or max(values) <= 0:
        return _no_data(title, width)
    vmax = max(values)
    plot_w, plot_h = width - left - 10, height - bottom - top
    bw = plot_w / len(values)
    parts = []
    for t in _ticks(0, vmax, 4):
        y = top + plot_h - t / vmax * plot_h
        parts.append(f'<line x1="{left}" x2="{width - 10}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>')
        parts.append(_text(left - 4, y + 4, num(t), "end", 10))
    centered = ticks is None
    if ticks is None:
        every = max(1, math.ceil(len(labels) / max(2, plot_w // 48)))
        ticks = [label if i % every == 0 else "" for i, label in enumerate(labels)]
    marked = [i for i, tick in enumerate(ticks) if tick]
    room = min((b - a for a, b in itertools.pairwise(marked)), default=len(values)) * bw
    for i, (label, value) in enumerate(zip(labels, values)):
        h = value / vmax * plot_h
        x = left + i * bw
        parts.append(
            f'<rect x="{x + 0.5:.1f}" y="{top + plot_h - h:.1f}" width="{max(bw - 1, 1):.1f}" height="{h:.1f}" '
            f'fill="{color}"><title>{_esc(label)}: {_esc(num(value))}{_esc(unit)}</title></rect>'
        )
        if ticks[i]:
            parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top + plot_h}" y2="{top + plot_h + 4}" class="axis"/>')
            centre = x + (bw / 2 if centered else 0)
            # a label is no wider than the gap to the next one, nor than twice the room to either edge
            edge = 2 * min(centre, width - centre)
            parts.append(_text(centre, height - bottom + 16, _fit(ticks[i], min(room, edge) - 4, 10), "middle", 10))
    parts.append(f'<line x1="{left}" x2="{width - 10}" y1="{top + plot_h}" y2="{top + plot_h}" class="axis"/>')
    parts.append(_axes(width, height, left, x_label or title, y_label))
    return _svg(height, "".join(parts), title, width)


def loghist(hist: Histogram, title: str) -> str:
    """A latency histogram on a log scale (10 bins per decade), the decades labelled."""
    labels, ticks = [], []
    for lo, hi in zip(hist.edges, hist.edges[1:]):
        labels.append(f"{ms(lo)} – {ms(hi)}")
        decade = lo > 0 and abs(math.log10(lo) - round(math.log10(lo))) < 1e-9
        ticks.append(_duration_label(lo) if decade or lo == 0 else "")
    if ticks and sum(1 for t in ticks if t) < 2:
        # a narrow histogram (a training stage) holds no two decades: its first and last bins say where it is
        ticks[0], ticks[-1] = _duration_label(hist.edges[0]), _duration_label(hist.edges[-2])
    counts = [float(c) for c in hist.counts]
    return bars(labels, counts, title, "", PALETTE[0], 300, 150, ticks, "latency (log scale)", "transitions")


def _duration_label(value_ms: float) -> str:
    if value_ms == 0:
        return "0"
    if value_ms >= 1000:
        return f"{value_ms / 1000:g} s"
    return f"{value_ms:g} ms"


def hbars(rows: Sequence[tuple[str, float, str]], title: str, color: str = PALETTE[0], x_label: str = "") -> str:
    """Horizontal bars: (label, value, annotation); a label or note too long for its room is cut
    (the bar's tooltip has it whole)."""
    if not rows:
        return _no_data(title)
    row_h, left, note_room, top = 24, 170, 220, 5
    height = top + row_h * len(rows) + 26
    vmax = max(v for _, v, _ in rows) or 1
    parts = []
    for i, (label, value, note) in enumerate(rows):
        y = top + i * row_h
        w = value / vmax * (W - left - note_room - 10)
        parts.append(_text(left - 6, y + 15, _fit(label, left - 10), "end"))
        parts.append(
            f'<rect x="{left}" y="{y + 3}" width="{max(w, 1):.1f}" height="{row_h - 6}" fill="{color}">'
            f"<title>{_esc(label)}: {_esc(note)}</title></rect>"
        )
        parts.append(_text(left + w + 6, y + 15, _fit(note, W - 10 - (left + w + 6))))
    parts.append(f'<line x1="{left}" x2="{left}" y1="{top}" y2="{top + row_h * len(rows)}" class="axis"/>')
    parts.append(_axes(W, height, left, x_label or title, ""))
    return _svg(height, "".join(parts), title)


def histogram(hist: Histogram, title: str, x_label: str, y_label: str) -> str:
    """Equal-width bins; integer-wide bins (turn counts) are labelled by their value."""
    labels = [f"{lo:g}" if hi - lo == 1 else f"{lo:g}–{hi:g}" for lo, hi in zip(hist.edges, hist.edges[1:])]
    ticks = None
    if hist.edges and any(hi - lo != 1 for lo, hi in zip(hist.edges, hist.edges[1:])):
        every = max(1, math.ceil(len(labels) / 10))
        ticks = [f"{lo:g}" if i % every == 0 else "" for i, lo in enumerate(hist.edges[:-1])]
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
    left, top, width = 76, 24, W_WIDE
    row_h = max(GANTT_MIN_ROW, min(26.0, GANTT_PLOT_PX / len(steps)))
    every = max(1, math.ceil(14 / row_h))  # step labels at least 14 px apart
    height = int(top + row_h * len(steps) + 44)
    bar_h = max(2.8, row_h * 0.36)

    def x_of(t: float) -> float:
        return left + (t - t0) / span * (width - left - 12)

    parts = [
        _text(left, 14, "rollout", size=11, cls="legend-rollout"),
        _text(left + 60, 14, "train", cls="legend-train"),
        _text(left + 110, 14, "| weight sync", cls="legend-sync"),
    ]
    plot_bottom = top + row_h * len(steps)
    for t in _ticks(0, span / 1000, 8):
        x = x_of(t0 + t * 1000)
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{plot_bottom:.1f}" class="grid"/>')
        parts.append(_text(x, plot_bottom + 16, f"{num(t)} s", "middle", 10))
    for i, s in enumerate(steps):
        y = top + i * row_h
        if i % every == 0:
            parts.append(_text(left - 6, y + row_h / 2 + 4, f"step {s.step}", "end", 11 if row_h >= 12 else 10))
        for start, end, color, label, dy in (
            (s.rollout_start_ms, s.rollout_end_ms, PALETTE[0], "rollout", row_h * 0.1),
            (s.train_start_ms, s.train_end_ms, PALETTE[1], "train", max(row_h * 0.5, row_h * 0.1 + bar_h)),
        ):
            if start is None or end is None:
                continue
            x, w = x_of(start), max(x_of(end) - x_of(start), 4.0)
            parts.append(
                f'<rect x="{x:.1f}" y="{y + dy:.1f}" width="{w:.1f}" height="{bar_h:.1f}" fill="{color}">'
                f"<title>step {s.step} {label}: {_esc(ms(end - start))}</title></rect>"
            )
        if s.sync_ms is not None:
            x = x_of(s.sync_ms)
            parts.append(
                f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y + 1:.1f}" y2="{y + row_h - 1:.1f}" stroke="{PALETTE[3]}" '
                f'stroke-width="2"><title>step {s.step} weights synced</title></line>'
            )
    parts.append(_axes(width, height, left, "time since the first step's first row (s)", "global step"))
    return _svg(height, "".join(parts), "step windows", width)


def stacked(a: Analysis) -> str:
    """Staleness: samples per train step, stacked by staleness."""
    if not a.staleness:
        return _no_data("staleness: no trained samples with a generation step")
    steps = sorted({r.train_step for r in a.staleness})
    values = sorted({r.staleness for r in a.staleness})
    counts = {(r.train_step, r.staleness): r.count for r in a.staleness}
    totals = [sum(counts.get((s, v), 0) for v in values) for s in steps]
    height, left, bottom, top = 240, 62, 44, 30
    plot_h = height - top - bottom
    vmax = max(totals) or 1
    bw = (W - left - 10) / len(steps)
    # the legend: "staleness +0 +1 ..." in one line, as many lags as fit
    parts = [_text(left, 14, "staleness")]
    at = left + 64.0
    for i, v in enumerate(values):
        if at + 30 > W - 10:
            parts.append(_text(at, 14, "…"))
            break
        parts.append(_text(at, 14, f"+{v}", cls=f"swatch-{i % len(PALETTE)}"))
        at += 12 + 7 * len(str(v))
    for t in _ticks(0, vmax):
        y = top + plot_h - t / vmax * plot_h
        parts.append(f'<line x1="{left}" x2="{W - 10}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>')
        parts.append(_text(left - 4, y + 4, num(t), "end"))
    every = max(1, math.ceil(len(steps) / 12))
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
        if i % every == 0:
            parts.append(_text(x + bw / 2, height - bottom + 14, step, "middle", 10))
    parts.append(_axes(W, height, left, "train step", "trained samples"))
    return _svg(height, "".join(parts), "staleness")


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
            f"<figure><figcaption><b>{_esc(title)}</b><br><span>{_esc(caption)}</span></figcaption>"
            f"{loghist(hist, title)}</figure>"
        )
    return "".join(out) or "<p>No transitions.</p>"


def _table(section: Section, links: dict[str, str] | None = None) -> str:
    """The section as a table; a first cell named in ``links`` links to that anchor of the page."""
    head = "".join(f"<th>{_esc(c)}</th>" for c in section.columns)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td><a href="#{links[c]}">{_esc(c)}</a></td>'
            if i == 0 and links and c in links
            else f"<td>{_esc(c)}</td>"
            for i, c in enumerate(row)
        )
        + "</tr>"
        for row in section.rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body or '<tr><td>(none)</td></tr>'}</tbody></table>"


def _opened(a: Analysis) -> str:
    """The slowest rollouts opened turn by turn, each under an anchor the table above links to."""
    parts = []
    for index, detail in enumerate(a.slowest_details):
        lines = "".join(f"<p>{_esc(line)}</p>" for line in summary_lines(detail))
        parts.append(
            f'<details id="trajectory-{index}" class="trajectory"><summary>{_esc(detail.sample_id)}</summary>'
            f"{lines}{_table(turns_section(detail))}{_table(rows_section(detail))}</details>"
        )
    return "".join(parts)


CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1f2328;background:#f6f8fa}
header{background:#24292f;color:#fff;padding:16px 28px}header h1{margin:0 0 6px;font-size:20px}
header p{margin:2px 0;font-size:13px;color:#d0d7de;font-family:ui-monospace,Menlo,monospace}
main{padding:12px 28px 40px;display:grid;grid-template-columns:repeat(auto-fill,minmax(680px,1fr));gap:18px}
section{background:#fff;border:1px solid #d0d7de;border-radius:8px;padding:12px 16px;overflow-x:auto}
section.wide{grid-column:1/-1}details.trajectory{margin:8px 0;border-top:1px solid #d0d7de;padding-top:6px}
details.trajectory summary{cursor:pointer;font-family:ui-monospace,Menlo,monospace}h2{font-size:16px;margin:4px 0 10px}
svg.chart{display:block;max-width:100%;height:auto}
figure{display:inline-block;margin:0 14px 14px 0;vertical-align:top;width:300px}figcaption{font-size:12px;margin-bottom:4px;min-height:34px}
figcaption span{color:#57606a}svg text{fill:#24292f;font-family:system-ui,sans-serif}
.grid{stroke:#eaeef2}.axis{stroke:#8c959f}.note{color:#9a6700;background:#fff8c5;padding:6px 10px;border-radius:6px}
table{border-collapse:collapse;font-size:12px;font-variant-numeric:tabular-nums}
th,td{border-bottom:1px solid #eaeef2;padding:3px 8px;text-align:right;white-space:nowrap}
th:first-child,td:first-child{text-align:left}th{background:#f6f8fa;position:sticky;top:0}
.legend-rollout{fill:#4e79a7!important}.legend-train{fill:#f28e2b!important}.legend-sync{fill:#e15759!important}
""" + "".join(f".swatch-{i}{{fill:{c}!important}}" for i, c in enumerate(PALETTE))

SCRIPT = """
document.addEventListener('DOMContentLoaded', function () {
  var charts = document.querySelectorAll('svg.chart'), shown = 0;
  charts.forEach(function (svg) { var r = svg.getBoundingClientRect(); if (r.width > 0 && r.height > 0) shown++; });
  document.body.setAttribute('data-charts', String(charts.length));
  document.body.setAttribute('data-charts-rendered', String(shown));
  openLinked();
});
// a link to an opened trajectory unfolds it
function openLinked() {
  var target = location.hash && document.getElementById(location.hash.slice(1));
  if (target && target.tagName === 'DETAILS') target.open = true;
}
window.addEventListener('hashchange', openLinked);
"""


def _score_trend(a: Analysis) -> str:
    """Mean reward score per step (bars; steps without scored samples are left out)."""
    scored = [(w.step, w.score.mean) for w in a.steps if w.score.count and w.score.mean is not None]
    # bars start at zero: negative scores would be drawn wrong, so then the table alone shows them
    if not scored or min(score for _, score in scored) < 0:
        return ""
    return bars(
        [str(step) for step, _ in scored],
        [score for _, score in scored],
        "mean reward score per step",
        "",
        PALETTE[2],
        W_WIDE,
        x_label="global step",
        y_label="mean reward score",
    )


def _turns_trend(a: Analysis) -> str:
    """Mean turns per trajectory per step."""
    return bars(
        [str(r.step) for r in a.step_rollouts],
        [r.turns.mean or 0.0 for r in a.step_rollouts],
        "mean turns per trajectory per step",
        " turns",
        PALETTE[4],
        W_WIDE,
        x_label="global step",
        y_label="turns per trajectory",
    )


def page(a: Analysis, extra: Sequence[Section] = (), reload_seconds: float | None = None) -> str:
    """The whole report as one HTML document; ``extra`` sections (the baseline comparison) as tables
    after it; ``reload_seconds``: the page reloads itself that often (``analyze --follow``)."""
    h = a.header
    by_key = {s.key: s for s in sections(a)}
    r = a.rollouts
    blocks = [
        ("wide", "step-windows", "Step windows", gantt(a) + _table(by_key["step-windows"])),
        ("wide", "training-per-step", "Training per step", _score_trend(a) + _table(by_key["training-per-step"])),
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
                + _table(by_key["response-length"]),
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
            (
                "wide",
                "rollouts-per-step",
                by_key["rollouts-per-step"].title,
                _turns_trend(a) + _table(by_key["rollouts-per-step"]),
            )
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
                x_label="global step",
                y_label="tokens/s",
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
    notes = "".join(f'<p class="note">{_esc(n)}</p>' for n in a.notes)
    body = "".join(
        f'<section id="{key}" class="{cls}"><h2>{_esc(title)}</h2>{content}</section>'
        for cls, key, title, content in blocks
    )
    head_lines = "".join(f"<p>{_esc(line)}</p>" for line in header_lines(h))
    title = f"Trace analysis — {', '.join(h.job_ids) or 'run'}"
    reload = f'<meta http-equiv="refresh" content="{reload_seconds:g}">' if reload_seconds else ""
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="en"><head><meta charset="utf-8"><title>{_esc(title)}</title>'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">{reload}<style>{CSS}</style></head>'
        f"<body><header><h1>{_esc(title)}</h1>{head_lines}</header>"
        f'<main><section id="warnings" class="wide">{notes or "<p>No warnings.</p>"}</section>{body}</main>'
        f"<script>{SCRIPT}</script></body></html>\n"
    )


def write_html(
    analysis: Analysis, target: Path, extra: Sequence[Section] = (), reload_seconds: float | None = None
) -> None:
    """Write the report to ``target``, whole or not at all (a reloading browser never sees half a page)."""
    partial = target.with_name(target.name + ".partial")
    partial.write_text(page(analysis, extra, reload_seconds), encoding="utf-8")
    partial.replace(target)
