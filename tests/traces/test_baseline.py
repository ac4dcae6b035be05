"""`analyze RUN --baseline OTHER`: both runs' figures side by side, each from its own run, never added up."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import recompute
import simulate
from typer.testing import CliRunner

from trace_instrument.cli import app

runner = CliRunner()


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("baseline")
    return (
        simulate.run_plan(simulate.plan_run(simulate.small_config(3, prompts_per_step=4)), base / "current"),
        simulate.run_plan(simulate.plan_run(simulate.small_config(4, prompts_per_step=4)), base / "baseline"),
    )


def _compared(trace: Path, baseline: Path, *more: str) -> dict:
    result = runner.invoke(
        app, ["analyze", str(trace), "--no-cache", "--format", "json", "--baseline", str(baseline), *more]
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _mean_turns(trace: Path) -> float:
    return float(np.mean([len(t["turns"]) for t in recompute.trajectories(trace)]))


def test_run_wide_figures_side_by_side(runs: tuple[Path, Path]) -> None:
    current, baseline = runs
    doc = _compared(current, baseline)
    figures = {c["key"]: c for c in doc["baseline"]["metrics"]}
    turns = figures["num_turns/mean"]
    assert turns["value"] == pytest.approx(_mean_turns(current))
    assert turns["baseline"] == pytest.approx(_mean_turns(baseline))
    assert turns["difference"] == pytest.approx(_mean_turns(current) - _mean_turns(baseline))
    # a key only one run has: the other side is empty, and there is no difference
    mine = {recompute.stop_reason(t) for t in recompute.trajectories(current)}
    theirs = {recompute.stop_reason(t) for t in recompute.trajectories(baseline)}
    for reason in mine ^ theirs:
        entry = figures[f"stop_reason/{reason}/count"]
        assert entry["difference"] is None and (entry["value"] is None) == (reason not in mine)
    assert doc["baseline"]["run_id"] != doc["baseline"]["baseline_run_id"]


def test_per_step_figures_side_by_side(runs: tuple[Path, Path]) -> None:
    current, baseline = runs
    doc = _compared(current, baseline)
    mine = recompute.step_scores(recompute.read_rows(current))
    theirs = recompute.step_scores(recompute.read_rows(baseline))
    steps = {s["step"]: {c["key"]: c for c in s["figures"]} for s in doc["baseline"]["steps"]}
    assert set(mine) & set(theirs) and set(steps) == {1, 2, 3}
    for step in set(mine) & set(theirs):
        score = steps[step]["critic/score/mean"]
        assert score["value"] == pytest.approx(np.mean(mine[step]))
        assert score["baseline"] == pytest.approx(np.mean(theirs[step]))
        assert score["difference"] == pytest.approx(np.mean(mine[step]) - np.mean(theirs[step]))
    # the current run's own figures are what it gives without a baseline
    alone = json.loads(runner.invoke(app, ["analyze", str(current), "--no-cache", "--format", "json"]).stdout)
    # (DuckDB's parallel float sums may differ in the last bits)
    assert alone["metrics"] == {key: pytest.approx(value, rel=1e-12) for key, value in doc["metrics"].items()}


def test_text_and_page_show_the_comparison(runs: tuple[Path, Path], tmp_path: Path) -> None:
    current, baseline = runs
    page = tmp_path / "page.html"
    result = runner.invoke(
        app, ["analyze", str(current), "--no-cache", "--baseline", str(baseline), "--html", str(page)]
    )
    assert result.exit_code == 0, result.output
    assert "Compared with the baseline run" in result.stdout and "num_turns/mean" in result.stdout
    text = page.read_text(encoding="utf-8")
    assert '<section id="baseline-metrics"' in text and '<section id="baseline-steps"' in text


def test_a_baseline_with_two_runs_is_refused_with_its_own_option(runs: tuple[Path, Path], tmp_path: Path) -> None:
    current, baseline = runs
    both = tmp_path / "both"
    shutil.copytree(current, both / "a")
    shutil.copytree(baseline, both / "b")
    result = runner.invoke(app, ["analyze", str(current), "--no-cache", "--baseline", str(both)])
    assert result.exit_code == 2
    assert "--baseline-run RUN" in result.output and "the baseline's folders hold 2 runs" in result.output


@pytest.fixture(scope="module")
def third(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A second baseline run, of its own seed."""
    config = simulate.small_config(5, prompts_per_step=4)
    return simulate.run_plan(simulate.plan_run(config), tmp_path_factory.mktemp("third") / "trace")


def test_each_baseline_its_own_comparison_with_the_change_in_percent(runs: tuple[Path, Path], third: Path) -> None:
    """Two --baseline folders holding a run each: each run compared on its own, never added up, in
    the order of the options (here the third run first)."""
    current, baseline = runs
    result = runner.invoke(
        app,
        [
            "analyze",
            str(current),
            "--no-cache",
            "--format",
            "json",
            "--baseline",
            str(third),
            "--baseline",
            str(baseline),
        ],
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    mine = _mean_turns(current)
    assert len(doc["baselines"]) == 2 and doc["baseline"] == doc["baselines"][0]
    for each, other in zip(doc["baselines"], (third, baseline)):
        assert {each["baseline_run_id"]} == _run_ids(other)
        theirs = _mean_turns(other)
        turns = {c["key"]: c for c in each["metrics"]}["num_turns/mean"]
        assert turns["value"] == pytest.approx(mine)
        assert turns["baseline"] == pytest.approx(theirs)
        assert turns["difference"] == pytest.approx(mine - theirs)
        assert turns["percent"] == pytest.approx((mine - theirs) / theirs * 100)


def _run_ids(trace: Path) -> set[str]:
    alone = json.loads(runner.invoke(app, ["analyze", str(trace), "--no-cache", "--format", "json"]).stdout)
    return {alone["run"]["run_id"]}


def test_text_shows_each_baseline_in_columns_of_its_own(runs: tuple[Path, Path], third: Path, tmp_path: Path) -> None:
    current, baseline = runs
    page = tmp_path / "page.html"
    args = ["analyze", str(current), "--no-cache", "--baseline", str(baseline), "--baseline", str(third)]
    result = runner.invoke(app, [*args, "--format", "markdown", "--html", str(page)])
    assert result.exit_code == 0, result.output
    header = next(line for line in result.stdout.splitlines() if line.startswith("| figure"))
    cells = [c.strip() for c in header.strip("|").split("|")]
    assert cells == ["figure", "this run", *(f"{h} {i}" for i in (1, 2) for h in ("baseline", "difference", "change"))]
    row = next(line for line in result.stdout.splitlines() if line.startswith("| num_turns/mean "))
    values = [c.strip() for c in row.strip("|").split("|")]
    mine, first, second = _mean_turns(current), _mean_turns(baseline), _mean_turns(third)
    expected = [(f"{a:,.3f}", f"{(mine - a) / a * 100:+.1f}%") for a in (first, second)]
    assert [(values[2], values[4]), (values[5], values[7])] == expected
    text = page.read_text(encoding="utf-8")
    # both baselines drawn on the per-step charts: the legend names each
    assert text.count("baseline 1 (") >= 1 and text.count("baseline 2 (") >= 1
