"""What the options promise: --steps selects which steps are shown and never changes a shown step's
figures; refused options say why; output paths are never guessed."""

from __future__ import annotations

import shutil
from pathlib import Path

import simulate
from recompute import read_rows
from typer.testing import CliRunner

from trace_instrument.cli import app
from trace_instrument.traces.analyze import Options, analyze

runner = CliRunner()


def test_a_step_filter_leaves_every_figure_of_a_shown_step_alone(sim_run: tuple[Path, simulate.RunPlan]) -> None:
    trace, _plan = sim_run
    full = analyze([trace], Options(cache=False))
    some = analyze([trace], Options(cache=False, steps=(3, 4)))
    assert [w.step for w in some.steps] == [3, 4]
    assert some.steps == tuple(w for w in full.steps if w.step in (3, 4))
    assert some.step_throughput == tuple(t for t in full.step_throughput if t.step in (3, 4))
    # the trained count of step 4 is every TRAIN_UPDATE row carrying step 4, whichever step generated it
    rows = read_rows(trace)
    trained = sum(1 for r in rows if r["step"] == 4 and r["detail"] == "actor_parameters_updated")
    assert some.steps[1].samples_trained == trained > 0
    # the async trainer of this run trains while rollouts run: step 4's overlap is known and positive
    assert some.steps[1].overlap_ms == full.steps[3].overlap_ms and some.steps[1].overlap_ms > 0


def test_a_step_range_outside_the_run_is_refused_with_its_steps(tiny_run: Path) -> None:
    result = runner.invoke(app, ["analyze", str(tiny_run), "--no-cache", "--steps", "50"])
    assert result.exit_code == 2
    assert "--steps 50" in result.stderr and "steps 1-2" in result.stderr


def test_a_progress_only_folder_does_not_claim_zero_overlap(tiny_run: Path, tmp_path: Path) -> None:
    only = tmp_path / "trace"
    shutil.copytree(tiny_run / "progress", only / "progress")
    result = analyze([only], Options(cache=False))
    assert result.steps and all(w.overlap_ms is None for w in result.steps)
    assert all(w.train_start_ms is None for w in result.steps)


def test_output_paths_in_missing_folders_are_refused(tiny_run: Path, tmp_path: Path) -> None:
    html = tmp_path / "no" / "such" / "report.html"
    result = runner.invoke(app, ["analyze", str(tiny_run), "--no-cache", "--html", str(html)])
    assert result.exit_code == 2 and "does not exist" in result.stderr
    assert not (tmp_path / "no").exists()
    perfetto = tmp_path / "gone" / "trace.json"
    result = runner.invoke(app, ["export", str(tiny_run), "--no-cache", "--perfetto", str(perfetto)])
    assert result.exit_code == 2 and not (tmp_path / "gone").exists()


def test_a_negative_trajectory_limit_is_refused(tiny_run: Path, tmp_path: Path) -> None:
    target = tmp_path / "trace.json"
    result = runner.invoke(app, ["export", str(tiny_run), "--perfetto", str(target), "--max-trajectories", "-5"])
    assert result.exit_code == 2 and "--max-trajectories" in result.stderr
    assert not target.exists()


def test_the_spark_hint_names_the_extra(tiny_run: Path, monkeypatch) -> None:
    import sys

    analyze_module = sys.modules["trace_instrument.traces.analyze"]  # the module whose `analyze` the command calls

    def missing(*_args, **_kwargs):
        raise ModuleNotFoundError("No module named 'pyspark'", name="pyspark")

    monkeypatch.setattr(analyze_module, "analyze", missing)
    result = runner.invoke(app, ["analyze", str(tiny_run), "--engine", "spark"])
    assert result.exit_code == 2
    assert "pip install 'trace-instrument[spark]'" in result.stderr
