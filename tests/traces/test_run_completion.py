"""The shell completes --run with the runs of the trace folders given before it (issue 39)."""

from __future__ import annotations

from pathlib import Path

import pytest
import simulate
from typer.testing import CliRunner

from trace_instrument.cli import app
from trace_instrument.traces.analyze import Options, analyze
from trace_instrument.traces.model import MultipleRunsError


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("runs")
    return simulate.run_plan(simulate.plan_run(simulate.small_config(1)), base / "A"), simulate.run_plan(
        simulate.plan_run(simulate.small_config(2)), base / "B"
    )


def _complete(words: str) -> list[str]:
    """What bash completion offers for the last word of `words` (as the shell asks Click)."""
    word = len(words.split()) - (0 if words.endswith(" ") else 1)  # the index of the word completed
    env = {"_TRACE_INSTRUMENT_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(word)}
    outcome = CliRunner().invoke(app, [], prog_name="trace-instrument", env=env)
    assert outcome.exit_code == 0, outcome.output
    return outcome.output.split()


def test_run_completes_to_the_run_ids_of_the_folders_given(two_runs) -> None:
    a, b = two_runs
    with pytest.raises(MultipleRunsError) as refused:  # the runs, as the reader itself names them
        analyze([a, b], Options(cache=False))
    run_ids = {run.run_id for run in refused.value.runs}
    assert len(run_ids) == 2
    offered = _complete(f"trace-instrument analyze {a} {b} --run ")
    assert run_ids <= set(offered)
    first = min(run_ids)
    assert set(_complete(f"trace-instrument analyze {a} {b} --run {first}")) == {first}
    assert _complete("trace-instrument analyze --run ") == [], "no folders yet: nothing to offer"
