"""The reader's text tables give each column of durations one unit, named in its header (issue 39):
never `15.7 s` above `9,919 ms` in the same column."""

from __future__ import annotations

import re

import pytest
import simulate

from trace_instrument.traces.analyze import Options, analyze
from trace_instrument.traces.model import Analysis
from trace_instrument.traces.render.tables import sections, timed

WITH_UNIT = re.compile(r"\d (ms|s)$")  # a cell that names its own unit


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> Analysis:
    run = simulate.run_plan(simulate.plan_run(simulate.small_config(1)), tmp_path_factory.mktemp("units") / "run")
    return analyze([run], Options(cache=False))


def test_a_column_of_a_long_and_a_short_duration_is_in_seconds() -> None:
    section = timed("t", "T", ("step", "rollout"), (("1", 15_700.0), ("2", 9_919.0), ("3", None)), ("rollout",))
    assert section.columns == ("step", "rollout (s)")
    assert [row[1] for row in section.rows] == ["15.7", "9.9", "-"]
    short = timed("t", "T", ("step", "rollout"), (("1", 9_919.0), ("2", 12.5)), ("rollout",))
    assert short.columns == ("step", "rollout (ms)") and [row[1] for row in short.rows] == ["9,919", "12.5"]
    tiny = timed("t", "T", ("step", "rollout"), (("1", 20_000.0), ("2", 45.0)), ("rollout",))
    assert [row[1] for row in tiny.rows] == ["20.000", "0.045"], "a duration a tenth would show as 0.0 keeps its ms"


def test_no_cell_of_a_real_analysis_names_its_own_unit(result: Analysis) -> None:
    units = []
    for section in sections(result):
        for index, column in enumerate(section.columns):
            cells = [row[index] for row in section.rows]
            assert not [c for c in cells if WITH_UNIT.search(c)], (section.key, column, cells)
            unit = re.search(r"\((ms|s)\)$", column)
            if unit:
                units.append(unit.group(1))
                assert all(c == "-" or float(c.replace(",", "").lstrip("+")) >= 0 for c in cells), (column, cells)
    assert {"ms", "s"} <= set(units), "both units occur (else this test proves little)"
    windows = next(s for s in sections(result) if s.key == "step-windows")
    column = next(i for i, c in enumerate(windows.columns) if c.startswith("rollout ("))
    first = result.steps[0].rollout_ms
    assert first is not None
    shown = float(windows.rows[0][column].replace(",", ""))
    expected = first / 1000 if windows.columns[column].endswith("(s)") else first
    assert shown == pytest.approx(expected, abs=0.05 if windows.columns[column].endswith("(s)") else 0.5)
