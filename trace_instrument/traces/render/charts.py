"""SVG chart parts of the page (render/html.py): text, axes with round ticks, line and stacked charts.

Every chart is drawn in its own units (its ``viewBox``) and scaled to its box by the browser. What
the server cannot know, the size of a text once laid out, the page's script measures (html.SCRIPT):
it sets every chart text to the table text's size in pixels, cuts a text that carries
``data-room`` (its room in chart units) only when it does not fit there, and shows as many of an
axis's tick labels (``class="tick x"``) as fit side by side, evenly spaced.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f")
# how each run is drawn on the per-step charts: this run solid, each baseline dashed its own way
RUN_DASHES = ("", "7 4", "2 3", "10 3 2 3", "4 4")
ROUND_MANTISSAS = (1.0, 2.0, 5.0)


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def svg(height: float, body: str, label: str, width: int = 640, empty: bool = False) -> str:
    kind = "chart empty" if empty else "chart"
    return (
        f'<svg class="{kind}" role="img" aria-label="{esc(label)}" width="100%" '
        f'viewBox="0 0 {width} {height:.0f}" preserveAspectRatio="xMinYMin meet">{body}</svg>'
    )


def text(
    x: float,
    y: float,
    content: object,
    anchor: str = "start",
    size: int = 11,
    cls: str = "",
    room: float | None = None,
    value: float | None = None,
) -> str:
    """A chart text; ``room`` (chart units): the page's script cuts it, ending in …, if it is wider;
    ``value``: the number a tick label stands for (the script keeps the round ones when it thins them)."""
    fit = f' data-room="{room:.0f}"' if room is not None else ""
    fit += f' data-v="{value:g}"' if value is not None else ""
    klass = f' class="{cls}"' if cls else ""
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" font-size="{size}"{klass}{fit}>{esc(content)}</text>'


def no_data(title: str, width: int) -> str:
    return svg(60, text(10, 34, f"{title}: no data", room=width - 20), title, width, empty=True)


def axis_titles(width: int, height: float, left: float, x_label: str, y_label: str) -> str:
    """The axis titles, with their units: the x one under the plot, the y one upright at the left edge."""
    parts = [text((left + width - 10) / 2, height - 5, x_label, "middle", 11, "axis-label x", width - 4)]
    if y_label:
        parts.append(
            # the page's script moves it right by its font size once it has set that (data-y: its centre)
            f'<text transform="translate(13,{(height - 24) / 2:.1f}) rotate(-90)" text-anchor="middle" '
            f'font-size="11" class="axis-label y" data-y="{(height - 24) / 2:.1f}" data-room="{height - 30:.0f}">'
            f"{esc(y_label)}</text>"
        )
    return "".join(parts)


def linear_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About ``n`` ticks at 1, 2 or 5 x 10^k steps from ``lo`` to ``hi`` (both included when on a step)."""
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / n
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(s * magnitude for s in (1, 2, 5, 10) if raw <= s * magnitude)
    first = math.ceil(lo / step - 1e-9) * step
    count = int((hi - first) / step + 1e-9) + 1
    # rounded to the step's own digits: 0.30000000000000004 is 0.3
    digits = max(0, -math.floor(math.log10(step)))
    return [round(first + i * step, digits) for i in range(count)]


def round_steps(steps: Sequence[int], most: int = 10) -> set[int]:
    """The steps to label on a step axis: about ``most`` round ones (1, 2 or 5 x 10^k apart)."""
    if not steps:
        return set()
    ticks = {int(t) for t in linear_ticks(min(steps), max(steps), most) if float(t).is_integer()}
    return (ticks & set(steps)) or {min(steps)}


def round_step(least: float) -> int:
    """The smallest 1, 2 or 5 x 10^k (an integer) at least ``least``."""
    return max(1, int(round_above(max(least, 1.0))))


def round_below(value: float) -> float:
    """The largest 1, 2 or 5 x 10^k at most ``value`` (> 0)."""
    k = math.floor(math.log10(value))
    return float(max(m * 10.0**k for m in ROUND_MANTISSAS if m * 10.0**k <= value * (1 + 1e-9)))


def round_above(value: float) -> float:
    """The smallest 1, 2 or 5 x 10^k at least ``value`` (> 0)."""
    k = math.floor(math.log10(value))
    return float(min(m * 10.0**j for j in (k, k + 1) for m in ROUND_MANTISSAS if m * 10.0**j >= value * (1 - 1e-9)))


def log_ticks(lo: float, hi: float, most: int = 7) -> list[float]:
    """Ticks of a log axis from ``lo`` to ``hi`` (both > 0): values 1, 2 and 5 x 10^k, or only the
    powers of ten when those are too many, or every other power when even those are; never 0."""
    if lo <= 0 or hi < lo:
        raise ValueError(f"a log axis needs 0 < lo <= hi, not {lo}, {hi}")
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))

    def inside(v: float) -> bool:
        return lo * (1 - 1e-9) <= v <= hi * (1 + 1e-9)

    dense = [m * 10.0**k for k in range(first, last + 1) for m in ROUND_MANTISSAS if inside(m * 10**k)]
    if len(dense) <= most:
        return [_clean(v) for v in dense]
    powers = [10.0**k for k in range(first, last + 1) if inside(10.0**k)]
    every = max(1, math.ceil(len(powers) / most))
    return [_clean(v) for v in powers[::every]]


def _clean(value: float) -> float:
    """``value`` at the digits it has: 2 x 10^-3 is 0.002, not 0.0020000000000000005."""
    return float(f"{value:.12g}")


def duration_label(value_ms: float) -> str:
    """A round duration as a tick says it: ``500 ms``, ``2 s``, ``1,000 s``."""
    if value_ms >= 1000:
        return f"{value_ms / 1000:,g} s"
    return f"{value_ms:,g} ms"


def number_label(value: float) -> str:
    return f"{value:,g}" if abs(value) < 1e6 else f"{value:.3g}"


@dataclass(frozen=True)
class Series:
    """One line of a chart: its legend text, colour, dash (``""`` solid) and (x, y) points."""

    name: str
    color: str
    dash: str
    points: tuple[tuple[float, float], ...]


@dataclass(frozen=True)
class Frame:
    """A chart's plot area in chart units."""

    width: int
    height: int
    left: float = 64
    right: float = 12
    top: float = 10
    bottom: float = 46

    @property
    def plot_w(self) -> float:
        return self.width - self.left - self.right

    @property
    def plot_h(self) -> float:
        return self.height - self.top - self.bottom

    @property
    def base(self) -> float:
        return self.top + self.plot_h


def _scale(lo: float, hi: float, start: float, length: float, log: bool) -> Callable[[float], float]:
    if log:
        a, b = math.log10(lo), math.log10(hi)
        return lambda v: start + (math.log10(v) - a) / ((b - a) or 1) * length
    return lambda v: start + (v - lo) / ((hi - lo) or 1) * length


def _step_axis(f: Frame, lo: float, hi: float) -> tuple[Callable[[float], float], str]:
    """The x axis of global steps: integer ticks, their labels thinned by the page's script."""
    x_of = _scale(lo, hi, f.left + 6, f.plot_w - 12, False)
    ticks = [t for t in linear_ticks(lo, hi, 10) if float(t).is_integer()] or [lo]
    parts = [f'<line x1="{f.left}" x2="{f.width - f.right}" y1="{f.base}" y2="{f.base}" class="axis"/>']
    for t in ticks:
        x = x_of(t)
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{f.base}" y2="{f.base + 4}" class="axis"/>')
        parts.append(text(x, f.base + 17, f"{t:,.0f}", "middle", 10, "tick x", value=t))
    return x_of, "".join(parts)


def value_axis(
    f: Frame, lo: float, hi: float, log: bool, label: Callable[[float], str]
) -> tuple[Callable[[float], float], str]:
    """The y axis with grid lines at round values (a log axis: see log_ticks), their labels cut to the
    left margin should they not fit (the page's script measures them)."""
    y_of = _scale(lo, hi, f.base, -f.plot_h, log)
    parts = []
    for t in log_ticks(lo, hi) if log else linear_ticks(lo, hi, 4):
        y = y_of(t)
        parts.append(f'<line x1="{f.left}" x2="{f.width - f.right}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>')
        # the room left of the plot, less the upright axis title's
        parts.append(text(f.left - 5, y + 4, label(t), "end", 10, "tick y", f.left - 27))
    return y_of, "".join(parts)


def value_range(values: Sequence[float], log: bool, fraction: bool = False) -> tuple[float, float]:
    """The y axis's domain: round values around ``values`` (log), 0 to 1 for fractions, else from 0
    (or the lowest value, when negative) to the highest, widened to the next round tick."""
    if log:
        positive = [v for v in values if v > 0] or [1.0]
        return round_below(min(positive)), round_above(max(positive))
    if fraction:
        return 0.0, 1.0
    lo, hi = min(0.0, min(values)), max(values)
    if hi <= lo:
        hi = lo + 1
    ticks = linear_ticks(lo, hi, 4)
    step = ticks[1] - ticks[0] if len(ticks) > 1 else 1.0
    return (lo if lo >= 0 else math.floor(lo / step) * step), math.ceil(hi / step - 1e-9) * step


def lines(
    series: Sequence[Series],
    title: str,
    y_label: str,
    label: Callable[[float], str] = number_label,
    log: bool = False,
    fraction: bool = False,
    width: int = 400,
    height: int = 210,
) -> str:
    """Per-step lines (x: global step), a dot per point with its value as tooltip; a log y axis
    leaves out values at or below 0 (they have no place on it)."""
    drawn = [Series(s.name, s.color, s.dash, tuple((x, y) for x, y in s.points if y > 0 or not log)) for s in series]
    drawn = [s for s in drawn if s.points]
    if not drawn:
        return no_data(title, width)
    # round durations ("500 ms") are wider than plain numbers
    f = Frame(width, height, left=92 if log else 74)
    xs = [x for s in drawn for x, _ in s.points]
    x_of, x_axis = _step_axis(f, min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1)
    lo, hi = value_range([y for s in drawn for _, y in s.points], log, fraction)
    y_of, y_axis = value_axis(f, lo, hi, log, label)
    parts = [y_axis, x_axis]
    for s in drawn:
        path = " ".join(f"{'M' if i == 0 else 'L'}{x_of(x):.1f},{y_of(y):.1f}" for i, (x, y) in enumerate(s.points))
        dash = f' stroke-dasharray="{s.dash}"' if s.dash else ""
        parts.append(f'<path d="{path}" fill="none" stroke="{s.color}" stroke-width="2"{dash} class="series"/>')
        # a dot per point while they stand apart; past 40 a point is a tooltip alone (dots would hide the line)
        dot = ' r="2.6"' if len(s.points) <= 40 else ' r="2.6" fill-opacity="0"'
        for x, y in s.points:
            parts.append(
                f'<circle cx="{x_of(x):.1f}" cy="{y_of(y):.1f}"{dot} fill="{s.color}">'
                f"<title>{esc(s.name)}, step {x:.0f}: {esc(label(y) if log else f'{y:,.4g}')}</title></circle>"
            )
    parts.append(axis_titles(width, height, f.left, "global step", y_label))
    return svg(height, "".join(parts), title, width)


def stacked_steps(
    runs: Sequence[tuple[str, dict[int, dict[str, float]]]],
    parts_order: Sequence[str],
    title: str,
    y_label: str,
    width: int = 400,
    height: int = 210,
) -> str:
    """Per step, a bar of fractions stacked in ``parts_order``; with several runs, their bars side by
    side at each step (this run first, each baseline paler), never added up."""
    steps = sorted({step for _, by_step in runs for step in by_step})
    if not steps:
        return no_data(title, width)
    f = Frame(width, height, left=74)
    slot = f.plot_w / len(steps)
    bar = max(slot * 0.86 / len(runs), 0.6)
    y_of, y_axis = value_axis(f, 0.0, 1.0, False, lambda v: f"{v:.0%}")
    parts = [y_axis, f'<line x1="{f.left}" x2="{f.width - f.right}" y1="{f.base}" y2="{f.base}" class="axis"/>']
    ticked = round_steps(steps)  # ticks under the round step numbers that have a bar
    for i, step in enumerate(steps):
        x0 = f.left + i * slot + slot * 0.07
        for r, (name, by_step) in enumerate(runs):
            fracs = by_step.get(step, {})
            top = 0.0
            x = x0 + r * bar
            for j, part in enumerate(parts_order):
                value = fracs.get(part, 0.0)
                if value <= 0:
                    continue
                y1, y0 = y_of(top), y_of(top + value)
                top += value
                parts.append(
                    f'<rect x="{x:.1f}" y="{y0:.1f}" width="{max(bar - 0.4, 0.5):.1f}" height="{y1 - y0:.2f}" '
                    f'fill="{PALETTE[j % len(PALETTE)]}" fill-opacity="{1.0 if r == 0 else 0.55}">'
                    f"<title>{esc(name)}, step {step}: {esc(part)} {value:.1%}</title></rect>"
                )
        if step in ticked:
            parts.append(text(f.left + (i + 0.5) * slot, f.base + 17, f"{step:,}", "middle", 10, "tick x", value=step))
    parts.append(axis_titles(width, height, f.left, "global step", y_label))
    return svg(height, "".join(parts), title, width)


def legend(items: Sequence[tuple[str, str, str]], swatch: str = "line") -> str:
    """An HTML legend (it wraps like any text): (text, colour, dash) per item; ``swatch``: a line or a box."""
    out = []
    for name, color, dash in items:
        if swatch == "box":
            mark = f'<rect x="2" y="1" width="14" height="10" fill="{color}"/>'
        else:
            extra = f' stroke-dasharray="{dash}"' if dash else ""
            mark = f'<line x1="0" x2="22" y1="6" y2="6" stroke="{color}" stroke-width="2.5"{extra}/>'
        out.append(
            f'<span><svg class="swatch" width="22" height="12" aria-hidden="true">{mark}</svg>{esc(name)}</span>'
        )
    return f'<div class="legend">{"".join(out)}</div>'
