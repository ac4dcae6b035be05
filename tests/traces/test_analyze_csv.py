"""`analyze --csv DIR`: every view as a CSV file of plain values, checked against a plain-Python reading."""

from __future__ import annotations

import csv
import json
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import recompute
import simulate
from typer.testing import CliRunner

from trace_instrument.cli import app

runner = CliRunner()


def _read(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="module")
def written(sim_run: tuple[Path, simulate.RunPlan], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    trace_dir, _ = sim_run
    folder = tmp_path_factory.mktemp("csv") / "views"
    result = runner.invoke(app, ["analyze", str(trace_dir), "--no-cache", "--format", "json", "--csv", str(folder)])
    assert result.exit_code == 0, result.output
    return trace_dir, folder


def test_steps_csv_holds_the_per_step_keys_as_numbers(written: tuple[Path, Path]) -> None:
    trace_dir, folder = written
    rows = recompute.read_rows(trace_dir)
    scores = recompute.step_scores(rows)
    steps = {int(row["step"]): row for row in _read(folder / "steps.csv")}
    assert set(scores) <= set(steps) and len(scores) > 2
    for step, values in scores.items():
        assert float(steps[step]["critic/score/mean"]) == pytest.approx(np.mean(values))
        assert float(steps[step]["critic/score/min"]) == min(values)


def test_nested_views_get_files_of_their_own(written: tuple[Path, Path]) -> None:
    """The stop reasons of each step: a file led by the step, the counts a recomputation gives."""
    trace_dir, folder = written
    trained = recompute.trained_steps(recompute.read_rows(trace_dir))
    expected: Counter[tuple[int, str]] = Counter()
    for t in recompute.trajectories(trace_dir):
        step = trained.get(f"{t['prompt_uid']}/{t['request_id']}")
        if step is not None:
            expected[(step, recompute.stop_reason(t))] += 1
    got = {(int(r["step"]), r["reason"]): int(r["count"]) for r in _read(folder / "step_rollouts_stop_reasons.csv")}
    assert got == dict(expected)


def test_every_list_view_of_the_json_has_its_file(written: tuple[Path, Path], sim_run) -> None:
    trace_dir, folder = written
    result = runner.invoke(app, ["analyze", str(trace_dir), "--no-cache", "--format", "json"])
    details = json.loads(result.stdout)["details"]
    for name, value in details.items():
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            table = "step_windows" if name == "steps" else name
            assert len(_read(folder / f"{table}.csv")) == len(value), name
    metrics = {row["key"]: row["value"] for row in _read(folder / "metrics.csv")}
    assert int(metrics["funnel/trained/trajectories"]) == len(
        {s for s in recompute.trained_steps(recompute.read_rows(trace_dir)) if not s.endswith("/sample")}
    )


def _cells(folder: Path, approx: bool = False) -> dict[str, list[list[object]]]:
    """Every file's cells, numbers as floats; ``approx``: compared as equal to the last bits
    (DuckDB's parallel sums may differ there)."""

    def close(value: object) -> object:
        if isinstance(value, float):
            return pytest.approx(value, rel=1e-12) if approx else value
        if isinstance(value, dict):
            return {k: close(v) for k, v in value.items()}
        if isinstance(value, list):
            return [close(v) for v in value]
        return value

    def cell(text: str) -> object:
        if text[:1] in ("{", "["):  # a JSON cell: the numbers in it too
            return close(json.loads(text))
        try:
            return close(float(text))
        except ValueError:
            return text

    out = {}
    for path in sorted(folder.iterdir()):
        with open(path, newline="", encoding="utf-8") as handle:
            out[path.name] = [[cell(c) for c in row] for row in csv.reader(handle)]
    return out


def test_a_second_run_rewrites_the_same_files(written: tuple[Path, Path]) -> None:
    trace_dir, folder = written
    before = _cells(folder, approx=True)
    result = runner.invoke(app, ["analyze", str(trace_dir), "--no-cache", "--csv", str(folder)])
    assert result.exit_code == 0, result.output
    assert _cells(folder) == before


def test_csv_into_a_missing_folder_or_onto_a_file_is_refused(tiny_run: Path, tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such"
    result = runner.invoke(app, ["analyze", str(tiny_run), "--no-cache", "--csv", str(missing)])
    assert result.exit_code == 2 and not missing.parent.exists()
    a_file = tmp_path / "file.csv"
    a_file.write_text("keep me")
    result = runner.invoke(app, ["analyze", str(tiny_run), "--no-cache", "--csv", str(a_file)])
    assert result.exit_code == 2 and a_file.read_text() == "keep me"


def test_the_files_and_their_columns_do_not_depend_on_the_data(
    written: tuple[Path, Path], tiny_run: Path, tmp_path: Path
) -> None:
    """A folder written again for another run holds no file of the first: the same files, each with
    the columns of its view (a view with no rows keeps its header)."""
    folder = shutil.copytree(written[1], tmp_path / "views")
    before = {p.name: _read_header(p) for p in folder.iterdir()}
    result = runner.invoke(app, ["analyze", str(tiny_run), "--no-cache", "--csv", str(folder)])
    assert result.exit_code == 0, result.output
    after = {p.name: _read_header(p) for p in folder.iterdir()}
    assert set(after) == set(before)
    assert {k: v for k, v in after.items() if k != "steps.csv"} == {k: v for k, v in before.items() if k != "steps.csv"}
    assert after["slowest_details.csv"][:2] == ["sample_id", "file"]  # no trajectory opened: the header alone
    run = _read(folder / "run.csv")[0]
    assert run["step_rollouts_by"] == "train_step" and run["engine"] == "duckdb"


def _read_header(path: Path) -> list[str]:
    with open(path, newline="", encoding="utf-8") as handle:
        return next(csv.reader(handle), [])
