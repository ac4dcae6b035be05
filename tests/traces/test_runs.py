"""Several runs among the inputs are found, named and never added up; one is analysed with --run.

Two simulated runs with the same job id and the same (virtual) times, the hard case: only their
uids tell them apart. What each run holds is known from how the folders were built (which files
each simulation wrote), independently of the tool.
"""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import asdict, replace
from pathlib import Path

import pytest
import simulate
from recompute import read_rows, trajectories
from typer.testing import CliRunner

from trace_instrument.cli import app
from trace_instrument.traces.analyze import Options, analyze
from trace_instrument.traces.model import MultipleRunsError, Run, TraceInputError
from trace_instrument.traces.runs import RunPartition, choose_run
from trace_instrument.traces.salvage import RowProblem

runner = CliRunner()


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("runs")
    return simulate.run_plan(simulate.plan_run(simulate.small_config(1)), base / "A"), simulate.run_plan(
        simulate.plan_run(simulate.small_config(2)), base / "B"
    )


def _moved_name(name: str) -> str:
    """The name ``_reused`` gives a file of run B (its processes got other pids)."""
    return name.replace("-pid", "-pid9").replace("trajectory_", "trajectory_9")


def _samples_of(run: Path, reused: Path, moved: bool) -> list[Path]:
    """The sample files of ``run`` in the folder ``_reused`` made (run B's under their new names).

    By name, not by a pattern: run A's own pids are real process ids, which may start with a 9."""
    names = sorted(_moved_name(p.name) if moved else p.name for p in (run / "sample").glob("*.csv"))
    return [reused / "sample" / name for name in names]


def _reused(a: Path, b: Path, target: Path) -> Path:
    """One folder both runs wrote into: B's processes got other pids, its progress lines were appended."""
    shutil.copytree(a, target)
    for path in b.rglob("*"):
        if path.is_dir():
            continue
        relative = path.relative_to(b)
        destination = target / relative
        if relative.parts[0] == "progress":
            with open(destination, "ab") as f:
                f.write(path.read_bytes())
            continue
        name = _moved_name(path.name)
        destination = destination.with_name(name)
        assert not destination.exists()
        destination.write_bytes(path.read_bytes())
    return target


def _same(x: object, y: object) -> bool:
    """Equal, floats within 1e-9: DuckDB's parallel sums may differ in the last bits from run to run."""
    if isinstance(x, float) and isinstance(y, float):
        return math.isclose(x, y, rel_tol=1e-9)
    if isinstance(x, dict) and isinstance(y, dict):
        return x.keys() == y.keys() and all(_same(x[k], y[k]) for k in x)
    if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
        return len(x) == len(y) and all(_same(a, b) for a, b in zip(x, y))
    return x == y


def _figures(result) -> dict:
    data = asdict(result)
    data["header"].pop("skipped")
    data.pop("notes")
    return data


def test_two_folders_of_two_runs_are_refused_with_the_list(two_runs) -> None:
    a, b = two_runs
    with pytest.raises(MultipleRunsError) as refused:
        analyze([a, b], Options(cache=False))
    runs = refused.value.runs
    assert len(runs) == 2
    rows = sorted(r.sample_rows for r in runs)
    assert rows == sorted([len(read_rows(a)), len(read_rows(b))])
    assert sorted(r.trajectories for r in runs) == sorted([len(trajectories(a)), len(trajectories(b))])
    assert all(r.job_ids == ("dlc-sim-job",) for r in runs)


def test_run_picks_one_run_and_its_figures_are_that_runs_alone(two_runs) -> None:
    a, b = two_runs
    alone = analyze([a], Options(cache=False))
    with pytest.raises(MultipleRunsError) as refused:
        analyze([a, b], Options(cache=False))
    run_a = next(r for r in refused.value.runs if r.sample_rows == len(read_rows(a)))
    picked = analyze([a, b], Options(cache=False, run=run_a.run_id))
    assert picked.header.run_id == run_a.run_id == alone.header.run_id
    assert _same(_figures(picked), _figures(alone))
    assert picked.header.rows_read == len(read_rows(a))


def test_a_reused_folder_is_split_by_uid_and_its_shared_progress_file_left_out(two_runs, tmp_path: Path) -> None:
    a, b = two_runs
    reused = _reused(a, b, tmp_path / "reused")
    with pytest.raises(MultipleRunsError) as refused:
        analyze([reused], Options(cache=False))
    runs = refused.value.runs
    run_b = next(r for r in runs if r.sample_rows == len(read_rows(b)))
    picked = analyze([reused], Options(cache=False, run=run_b.run_id))
    alone = analyze([b], Options(cache=False))
    assert picked.header.rows_read == alone.header.rows_read == len(read_rows(b))
    assert picked.latencies == alone.latencies
    assert picked.funnel == alone.funnel
    # the progress lines are not its own
    assert _same(asdict(picked.rollouts), asdict(replace(alone.rollouts, completed_lines=0)))
    left_out = [s for s in picked.header.skipped if s.reason.startswith("progress file in no run")]
    assert left_out and left_out[0].count == len(list((reused / "progress").glob("*.log")))
    assert all(w.progress == "absent" for w in picked.steps)


def test_a_file_without_uids_joins_the_one_run_it_overlaps_and_no_run_when_two_do(two_runs, tmp_path: Path) -> None:
    a, b = two_runs
    row = next(line for line in (next((a / "sample").glob("*.csv"))).read_text().splitlines() if "AGENT_TOOL" in line)
    fields = row.split(",")
    fields[2] = "unknown/sample"
    orphan = ",".join(fields) + "\r\n"
    single = shutil.copytree(a, tmp_path / "single")
    (single / "sample" / "node-x-pid4.csv").write_text(orphan, newline="")
    result = analyze([single], Options(cache=False))
    assert result.header.unattributable_rows == 1 and result.header.rows_read == len(read_rows(a)) + 1
    reused = _reused(a, b, tmp_path / "reused")
    (reused / "sample" / "node-x-pid4.csv").write_text(orphan, newline="")
    with pytest.raises(MultipleRunsError) as refused:
        analyze([reused], Options(cache=False))
    run_a = next(r for r in refused.value.runs if r.sample_rows == len(read_rows(a)))
    picked = analyze([reused], Options(cache=False, run=run_a.run_id))
    assert picked.header.unattributable_rows == 0
    assert any(s.reason.startswith("sample file in no run") for s in picked.header.skipped)


def test_the_cli_lists_the_runs_and_how_to_pick_one(two_runs) -> None:
    a, b = two_runs
    result = runner.invoke(app, ["analyze", str(a), str(b), "--no-cache"])
    assert result.exit_code == 2
    with pytest.raises(MultipleRunsError) as refused:
        analyze([a, b], Options(cache=False))
    for run in refused.value.runs:
        assert run.run_id in result.stderr
    assert "--run" in result.stderr
    picked = runner.invoke(app, ["analyze", str(a), str(b), "--no-cache", "--run", refused.value.runs[0].run_id])
    assert picked.exit_code == 0, picked.stderr
    wrong = runner.invoke(app, ["analyze", str(a), str(b), "--no-cache", "--run", "no-such-run"])
    assert wrong.exit_code == 2 and "no-such-run" in wrong.stderr


def _run(run_id: str, *jobs: str) -> Run:
    return Run(run_id, jobs, 0, 1, (), None, (), 0, 0)


def test_a_run_is_chosen_by_its_id_or_by_a_job_id_only_one_run_has() -> None:
    partition = RunPartition((_run("r1", "job-a"), _run("r2", "job-b"), _run("r3", "job-b")), ())
    assert choose_run(partition, "r2").run_id == "r2"
    assert choose_run(partition, "job-a").run_id == "r1"
    with pytest.raises(MultipleRunsError):
        choose_run(partition, "job-b")  # two runs share it
    with pytest.raises(MultipleRunsError):
        choose_run(partition, None)
    assert choose_run(RunPartition((_run("only"),), ()), None).run_id == "only"
    assert choose_run(RunPartition((), ()), None) is None


def test_export_refuses_two_runs_and_writes_the_one_picked(two_runs, tmp_path: Path) -> None:
    a, b = two_runs
    target = tmp_path / "tables"
    refused = runner.invoke(app, ["export", str(a), str(b), "--no-cache", "--parquet", str(target)])
    assert refused.exit_code == 2 and "--run" in refused.stderr and not target.exists()
    alone = analyze([a], Options(cache=False))
    picked = runner.invoke(
        app, ["export", str(a), str(b), "--no-cache", "--parquet", str(target), "--run", str(alone.header.run_id)]
    )
    assert picked.exit_code == 0, picked.stderr
    manifest = json.loads((target / "manifest.json").read_text())
    assert manifest["run"] == alone.header.run_id
    assert manifest["tables"]["events"] == len(read_rows(a))
    assert manifest["tables"]["trajectories"] == len(trajectories(a))
    assert {Path(s["path"]).parent.parent for s in manifest["sources"]} == {a}


def _is_trainer_file(path: Path) -> bool:
    text = path.read_text()
    return "uid_generated" in text or "TRAIN_" in text


def test_a_worker_nodes_folder_without_the_trainer_is_one_run(two_runs, tmp_path: Path) -> None:
    """Two workers never share a prompt; with no trainer among the inputs, overlapping files are one run."""
    a, _ = two_runs
    workers = tmp_path / "workers"
    (workers / "sample").mkdir(parents=True)
    kept = [p for p in (a / "sample").glob("*.csv") if not _is_trainer_file(p)]
    for path in kept:
        shutil.copy(path, workers / "sample" / path.name)
    shutil.copytree(a / "trajectory", workers / "trajectory")
    result = analyze([workers], Options(cache=False))
    assert len(kept) >= 2
    assert result.header.rows_read == sum(len(p.read_bytes().splitlines()) for p in kept)
    assert result.rollouts is not None and result.rollouts.trajectories == len(trajectories(a))


def test_trajectory_files_of_one_process_rotated_between_steps_are_one_run(two_runs, tmp_path: Path) -> None:
    a, _ = two_runs
    only = tmp_path / "trajectories"
    (only / "trajectory").mkdir(parents=True)
    for path in (a / "trajectory").glob("*.jsonl"):
        lines = path.read_bytes().splitlines(keepends=True)
        half = len(lines) // 2
        (only / "trajectory" / path.name).write_bytes(b"".join(lines[:half]))
        stem, stamp = path.stem.rsplit("_", 1)
        (only / "trajectory" / f"{stem}_{int(stamp) + 1:03d}.jsonl").write_bytes(b"".join(lines[half:]))
    result = analyze([only], Options(cache=False))
    assert result.rollouts is not None and result.rollouts.trajectories == len(trajectories(a))
    # and --steps reads the trajectories' own steps
    steps = {t["global_step"] for t in trajectories(a)}
    some = analyze([only], Options(cache=False, steps=(min(steps), min(steps))))
    assert some.rollouts.trajectories == sum(1 for t in trajectories(a) if t["global_step"] == min(steps))


def test_a_stray_file_outside_the_runs_time_is_left_out_not_a_run_of_its_own(two_runs, tmp_path: Path) -> None:
    a, _ = two_runs
    copy = shutil.copytree(a, tmp_path / "trace")
    row = next(line for line in next((a / "sample").glob("*.csv")).read_text().splitlines() if "AGENT_TOOL" in line)
    fields = row.split(",")
    fields[2], fields[4] = "unknown/sample", "1000"  # 1970: long before the run
    stray = copy / "sample" / "node-x-pid4.csv"
    stray.write_text(",".join(fields) + "\r\n", newline="")
    result = analyze([copy], Options(cache=False))
    assert result.header.rows_read == len(read_rows(a))
    left = [s for s in result.header.skipped if s.reason.startswith("sample file in no run")]
    assert left and left[0].examples == (str(stray),)


def test_damage_in_another_runs_file_is_that_runs_alone(two_runs, tmp_path: Path) -> None:
    """The rows skipped while reading are counted per file: a run shows its own files' only."""
    a, b = two_runs
    reused = _reused(a, b, tmp_path / "reused")
    damaged = _samples_of(b, reused, moved=True)[0]  # one of run B's files
    with open(damaged, "ab") as f:
        f.write(b"a,b,c\r\n")
    with pytest.raises(MultipleRunsError) as refused:
        analyze([reused], Options(cache=False))
    run_a = next(r for r in refused.value.runs if r.sample_rows == len(read_rows(a)))
    run_b = next(r for r in refused.value.runs if r.run_id != run_a.run_id)
    picked = analyze([reused], Options(cache=False, run=run_a.run_id))
    assert picked.header.rows_read == len(read_rows(a))
    assert picked.header.rows_rejected == 0 and not any(
        str(damaged) in e for s in picked.header.skipped for e in s.examples
    )
    other = analyze([reused], Options(cache=False, run=run_b.run_id))
    columns = [s for s in other.header.skipped if s.per_file == ((str(damaged), 1),)]
    assert len(columns) == 1 and columns[0].count == 1 and other.header.rows_rejected == 1
    assert columns[0].examples == (f"{damaged}:{len(damaged.read_bytes().splitlines())}",)
    assert not any("counted over" in note for note in picked.notes + other.notes)


def _shifted(csv_bytes: bytes, ms: int) -> bytes:
    """The rows with their timestamps moved by ``ms`` (a run started that much later)."""
    rows = []
    for line in csv_bytes.splitlines():
        fields = line.split(b",", 5)
        fields[4] = str(int(fields[4]) + ms).encode()
        rows.append(b",".join(fields))
    return b"".join(row + b"\r\n" for row in rows)


def test_a_second_run_appended_to_the_same_trainer_file_is_refused_with_the_reason(two_runs, tmp_path: Path) -> None:
    """Same host name and pid (a restarted container): the runtime appends the second run to the file."""
    a, b = two_runs
    reused = shutil.copytree(a, tmp_path / "reused")
    trainer_a = next(p for p in (reused / "sample").glob("*.csv") if _is_trainer_file(p))
    trainer_b = next(p for p in (b / "sample").glob("*.csv") if _is_trainer_file(p))
    with open(trainer_a, "ab") as f:
        f.write(_shifted(trainer_b.read_bytes(), 3_600_000))
    with pytest.raises(TraceInputError, match="hold rows of two runs") as refused:
        analyze([reused], Options(cache=False))
    assert str(trainer_a) in str(refused.value) and "step 1" in str(refused.value)
    result = runner.invoke(app, ["analyze", str(reused), "--no-cache"])
    assert result.exit_code == 2 and "VERL_TRACE_DIR" in result.stderr


def test_each_run_keeps_examples_of_its_own_damage(two_runs, tmp_path: Path) -> None:
    """Four bad rows in run B's file and two in run A's: each run lists its own rows as examples
    (loading keeps the first examples of every file, not of all files together)."""
    a, b = two_runs
    reused = _reused(a, b, tmp_path / "reused")
    in_b = _samples_of(b, reused, moved=True)[0]
    in_a = _samples_of(a, reused, moved=False)[0]
    expected = {}
    for path, bad in ((in_b, 4), (in_a, 2)):
        n = len(path.read_bytes().splitlines())
        with open(path, "ab") as f:
            f.write(b"a,b,c\r\n" * bad)
        expected[path] = tuple(f"{path}:{n + i}" for i in range(1, bad + 1))[:3]
    with pytest.raises(MultipleRunsError) as refused:
        analyze([reused], Options(cache=False))
    for run in refused.value.runs:
        result = analyze([reused], Options(cache=False, run=run.run_id))
        (short,) = [s for s in result.header.skipped if s.reason == RowProblem.TOO_FEW_COLUMNS.value]
        (path,) = [p for p in expected if any(e.startswith(str(p)) for e in short.examples)]
        assert short.examples == expected[path] and short.count == len(expected[path]) + (path == in_b)


def _progress_of_both(a: Path, b: Path, target: Path, with_samples_of_a: bool) -> Path:
    """``target``: A's progress logs with B's lines appended (one folder both runs logged into),
    and A's sample files when asked; no file of B's but its progress lines."""
    if with_samples_of_a:
        shutil.copytree(a, target)
    else:
        shutil.copytree(a / "progress", target / "progress")
    for path in sorted((b / "progress").glob("*.log")):
        with open(target / "progress" / path.name, "ab") as f:
            f.write(path.read_bytes())
    return target


def test_progress_lines_of_two_runs_are_left_out_and_said(two_runs, tmp_path: Path) -> None:
    """Progress lines carry no time and no id: a folder whose lines repeat a step's line holds two
    runs' lines, which are never added up. Alone they are refused; beside a run's samples they are
    left out of that run, with the reason, and the samples' figures stay the run's own."""
    a, b = two_runs
    only = _progress_of_both(a, b, tmp_path / "only", with_samples_of_a=False)
    with pytest.raises(
        TraceInputError, match=r"more than one run \(`Step 1 rollout started` comes after `Step 3 rollout started`\)"
    ):
        analyze([only], Options(cache=False))
    beside = _progress_of_both(a, b, tmp_path / "beside", with_samples_of_a=True)
    result = analyze([beside], Options(cache=False))
    alone = analyze([a], Options(cache=False))
    (left_out,) = [s for s in result.header.skipped if "more than one run" in s.reason]
    assert left_out.count == len(list((beside / "progress").glob("*.log")))
    assert result.header.progress_lines == 0 and alone.header.progress_lines > 0
    assert all(w.progress == "absent" for w in result.steps)
    assert any(w.progress == "complete" for w in alone.steps)
    assert result.latencies == alone.latencies and result.funnel == alone.funnel
    # the exports leave the same files out, and say so
    from trace_instrument.traces.parquet import export_parquet
    from trace_instrument.traces.perfetto import export_perfetto

    parquet = export_parquet([beside], tmp_path / "parquet", Options(cache=False))
    manifest = json.loads((tmp_path / "parquet" / "manifest.json").read_text())
    assert (
        [item["reason"] for item in manifest["left_out"]] == [left_out.reason] == [s.reason for s in parquet.left_out]
    )
    assert parquet.tables["steps"] == len(alone.steps)
    perfetto = export_perfetto([beside], tmp_path / "timeline.json", Options(cache=False))
    assert [s.reason for s in perfetto.left_out] == [left_out.reason]
    # each run's own progress lines, alone in their folder, are kept
    own_lines = sum(len(p.read_bytes().splitlines()) for p in (b / "progress").glob("*.log"))
    assert analyze([b], Options(cache=False)).header.progress_lines == own_lines > 0


def test_one_runs_window_lines_repeated_by_its_inner_loop_are_kept(tmp_path: Path) -> None:
    """The v1 trainer writes each step's window lines once per `_step_once`, `parameter_sync_step`
    times a step; in the disagg mode the kinds interleave across steps. Both are one run's lines."""
    config = replace(simulate.small_config(5), version="v1", mode="separate_async")
    trace = simulate.run_plan(simulate.plan_run(config), tmp_path / "trace")
    (log,) = sorted((trace / "progress").glob("*.log"))
    lines = log.read_bytes().splitlines(keepends=True)
    window = [line for line in lines if line.startswith(b"Step ") and (b" started" in line or b" finished" in line)]
    assert window
    log.write_bytes(b"".join(line * 2 if line in window else line for line in lines))  # parameter_sync_step=2
    result = analyze([trace], Options(cache=False))
    assert not [s for s in result.header.skipped if "more than one run" in s.reason]
    assert result.header.progress_lines == len(lines) + len(window)
    assert any(w.progress == "complete" for w in result.steps)


def test_progress_of_two_folders_together_is_checked(two_runs, tmp_path: Path) -> None:
    """A whole copy of a run's folder: its sample files are duplicates, and its progress lines added
    to the original's would count every line twice; the folders' lines together go back, so they
    are left out, and the exports say so too."""
    a, _ = two_runs
    copy = shutil.copytree(a, tmp_path / "copy")
    result = analyze([a, copy], Options(cache=False))
    alone = analyze([a], Options(cache=False))
    assert result.header.rows_read == alone.header.rows_read
    (together,) = [s for s in result.header.skipped if "2 folders together" in s.reason]
    assert together.count == 2 * len(list((a / "progress").glob("*.log")))
    assert result.header.progress_lines == 0 and alone.header.progress_lines > 0
    from trace_instrument.traces.parquet import export_parquet

    parquet = export_parquet([a, copy], tmp_path / "parquet", Options(cache=False))
    reasons = [s.reason for s in parquet.left_out]
    assert together.reason in reasons and "duplicate file" in reasons
    manifest = json.loads((tmp_path / "parquet" / "manifest.json").read_text())
    assert not [f for f in manifest["sources"] if f["kind"] == "progress"]


def test_the_exports_refuse_what_analyze_refuses(two_runs, tmp_path: Path) -> None:
    a, b = two_runs
    only = _progress_of_both(a, b, tmp_path / "only", with_samples_of_a=False)
    from trace_instrument.traces.parquet import export_parquet
    from trace_instrument.traces.perfetto import export_perfetto

    for export in (
        lambda: export_parquet([only], tmp_path / "parquet", Options(cache=False)),
        lambda: export_perfetto([only], tmp_path / "timeline.json", Options(cache=False)),
    ):
        with pytest.raises(TraceInputError, match="no usable rows .*more than one run"):
            export()
    assert not (tmp_path / "parquet").exists() and not (tmp_path / "timeline.json").exists()
    result = runner.invoke(app, ["export", str(only), "--parquet", str(tmp_path / "p2"), "--no-cache"])
    assert result.exit_code == 2 and "no usable rows" in result.stderr
