"""The page's axes: ticks at round values (1, 2, 5 x 10^k), never 0 on a log axis, never a bin edge
such as 3.98107 ms; and the change in percent the baseline comparison gives."""

from __future__ import annotations

import math
import re

import pytest

from trace_instrument.traces.model import Histogram
from trace_instrument.traces.render.charts import (
    duration_label,
    linear_ticks,
    log_ticks,
    round_above,
    round_below,
    round_step,
    round_steps,
)
from trace_instrument.traces.render.compare import change_percent, percent_text
from trace_instrument.traces.render.html import loghist


def _mantissa(value: float) -> float:
    """``value`` / 10^k with k its decade, rounded to the digits a tick can have."""
    return round(value / 10 ** math.floor(math.log10(value) + 1e-12), 6)


@pytest.mark.parametrize(
    ("lo", "hi", "expected"),
    [
        (1.0, 50.0, [1.0, 10.0]),  # 1 2 5 10 20 50 are 6 ticks: more than 5, so the powers of ten
        (1.0, 10.0, [1.0, 2.0, 5.0, 10.0]),
        (2.0, 5.0, [2.0, 5.0]),
        (0.002, 0.05, [0.002, 0.005, 0.01, 0.02, 0.05]),
        (1.0, 1e12, [1.0, 1e3, 1e6, 1e9, 1e12]),  # 13 powers of ten: every third
    ],
)
def test_log_ticks_are_round(lo: float, hi: float, expected: list[float]) -> None:
    assert log_ticks(lo, hi, 5) == expected


@pytest.mark.parametrize(("lo", "hi"), [(0.7, 3.3), (1.26, 7.94), (13.0, 94_000.0), (0.0031, 0.4), (5.0, 5.0)])
def test_every_log_tick_is_one_two_or_five_times_a_power_of_ten(lo: float, hi: float) -> None:
    ticks = log_ticks(lo, hi)
    assert ticks == sorted(set(ticks)) and len(ticks) <= 7
    for t in ticks:
        assert t > 0 and lo * (1 - 1e-9) <= t <= hi * (1 + 1e-9)
        assert _mantissa(t) in {1.0, 2.0, 5.0}, t


def test_a_log_axis_refuses_zero() -> None:
    with pytest.raises(ValueError, match="log axis"):
        log_ticks(0.0, 10.0)


@pytest.mark.parametrize(
    ("value", "below", "above"),
    [(3.98107, 2.0, 5.0), (7.94, 5.0, 10.0), (1.0, 1.0, 1.0), (0.012, 0.01, 0.02), (250.0, 200.0, 500.0)],
)
def test_round_bounds(value: float, below: float, above: float) -> None:
    assert round_below(value) == pytest.approx(below)
    assert round_above(value) == pytest.approx(above)


def test_linear_ticks_hold_no_float_noise() -> None:
    # 3 x 0.2 is 0.6000000000000001 and 3 x 0.1 is 0.30000000000000004 in floats
    assert linear_ticks(0.0, 1.0, 5) == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert linear_ticks(0.0, 0.3, 3) == [0.0, 0.1, 0.2, 0.3]
    assert linear_ticks(0.0, 1.0, 4) == [0.0, 0.5, 1.0]  # a step of 0.25 is not 1, 2 or 5 x 10^k


@pytest.mark.parametrize(("ms", "label"), [(0.5, "0.5 ms"), (500.0, "500 ms"), (2000.0, "2 s"), (1e6, "1,000 s")])
def test_duration_labels(ms: float, label: str) -> None:
    assert duration_label(ms) == label


def _tick_texts(svg: str) -> list[str]:
    return re.findall(r'class="tick x"[^>]*>([^<]*)</text>', svg)


def test_a_narrow_latency_histogram_is_ticked_at_round_durations() -> None:
    """Bins 10^(b/10) ms for b = 6..8 (3.98 to 7.94 ms, one decade not reached): the old page
    labelled the first and last bin edges, 3.98107 ms and 6.30957 ms."""
    edges = tuple(10 ** (b / 10) for b in range(6, 10))
    svg = loghist(Histogram(edges, (3, 5, 2)), "narrow")
    assert _tick_texts(svg) == ["2 ms", "5 ms", "10 ms"]  # the axis runs from 2 ms to 10 ms


def test_a_latency_histogram_from_zero_shows_no_zero() -> None:
    """The first bin of the engine's histogram starts at 0 ms: a log axis has no place for 0."""
    edges = (0.0, *(10 ** (b / 10) for b in range(1, 32)))
    svg = loghist(Histogram(edges, tuple(range(1, 32))), "wide")
    ticks = _tick_texts(svg)
    assert "0" not in ticks and "0 ms" not in ticks
    # the first bin drawn as wide as the others, from 1 ms; the last edge 10^3.1 = 1,259 ms: the axis
    # runs from 1 to 2,000 ms, whose 11 round values are too many, so only the powers of ten
    assert ticks == ["1 ms", "10 ms", "100 ms", "1 s"]


@pytest.mark.parametrize(
    ("value", "baseline", "percent"),
    [(150.0, 100.0, 50.0), (75.0, 100.0, -25.0), (-3.0, -2.0, -50.0), (0.0, -4.0, 100.0), (5.0, 5.0, 0.0)],
)
def test_change_in_percent_of_the_baseline(value: float, baseline: float, percent: float) -> None:
    assert change_percent(value, baseline) == pytest.approx(percent)


@pytest.mark.parametrize(("value", "baseline"), [(1.0, 0.0), (None, 1.0), (1.0, None)])
def test_no_change_without_a_baseline_value(value: float | None, baseline: float | None) -> None:
    assert change_percent(value, baseline) is None


@pytest.mark.parametrize(("percent", "text"), [(12.345, "+12.3%"), (-3.0, "-3.0%"), (0.0, "0.0%"), (None, "-")])
def test_percent_text(percent: float | None, text: str) -> None:
    assert percent_text(percent) == text


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        (list(range(1, 121)), {20, 40, 60, 80, 100, 120}),  # 119 / 10 steps: 20 apart
        (list(range(1, 13)), {2, 4, 6, 8, 10, 12}),
        ([3, 4, 7], {3, 4, 7}),  # 3 4 5 6 7 are round (0.5 apart, the whole ones): those with a bar
        ([5], {5}),
    ],
)
def test_step_axes_label_round_step_numbers(steps: list[int], expected: set[int]) -> None:
    assert round_steps(steps) == expected


@pytest.mark.parametrize(("least", "step"), [(0.4, 1), (1.0, 1), (1.5, 2), (3.6, 5), (7.0, 10), (18.0, 20)])
def test_every_kth_step_is_round(least: float, step: int) -> None:
    assert round_step(least) == step
