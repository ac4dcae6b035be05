"""`export --to tensorboard|mlflow|wandb`: the runs written are read back with each tracker's own
reader (trackers_readback.py), and every value equals the one `analyze --format json` gives of the
same files; `--follow` logs each step once, when complete.

The slow tier: these need the trackers' libraries (the `trackers-test` extra, which .ci/run installs
before the other tiers)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
import trackers_readback as readback
from typer.testing import CliRunner

from trace_instrument.cli import app

pytestmark = pytest.mark.slow
runner = CliRunner()
PREFIX = "trace/"
OVERLAP = PREFIX + "timing_s/overlap"
# a step's never-trained samples: no completeness settles them, so --follow logs them not per step
NEVER_TRAINED = PREFIX + "in_flight/count"


def _invoke(*args: str) -> str:
    result = runner.invoke(app, [*args, "--no-cache"])
    assert result.exit_code == 0, result.output
    return result.stderr


def _json(trace: Path) -> dict:
    result = runner.invoke(app, ["analyze", str(trace), "--format", "json", "--no-cache"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _name(prefix: str, key: str) -> str:
    """A JSON key as the trackers name it: behind the prefix, a transition's "->" as "_to_"."""
    assert set(key) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./>"), key
    return prefix + key.replace("->", "_to_")


def _numbers(entry: dict, prefix: str) -> dict[str, float]:
    """The numbers of one JSON object (a step's or the run's), by tracker name: text and null are not figures."""
    return {
        _name(prefix, key): float(value)
        for key, value in entry.items()
        if key != "step" and isinstance(value, (int, float)) and value is not None
    }


def _expected(doc: dict, prefix: str = PREFIX, steps: set[int] | None = None) -> dict[str, list[tuple[int, float]]]:
    """Each per-step figure of the JSON document as its points, (global step, value) in step order."""
    points: dict[str, list[tuple[int, float]]] = {}
    for entry in doc["steps"]:
        if steps is None or entry["step"] in steps:
            for name, value in _numbers(entry, prefix).items():
                points.setdefault(name, []).append((entry["step"], value))
    return points


def _followed(doc: dict) -> dict[str, list[tuple[int, float]]]:
    """The per-step figures ``--follow`` logs: all but each step's never-trained samples (which it has)."""
    points = _expected(doc)
    assert [s for s, _ in points.pop(NEVER_TRAINED)] == [entry["step"] for entry in doc["steps"]]
    return points


def _split(run: readback.Run, prefix: str = PREFIX) -> tuple[dict, dict]:
    """A run's per-step series (under the prefix) and the last value of each run-wide one (under prefix/run/)."""
    steps = {k: v for k, v in run.points.items() if k.startswith(prefix) and not k.startswith(prefix + "run/")}
    summary = {k: v[-1][1] for k, v in run.points.items() if k.startswith(prefix + "run/")}
    return steps, summary


def test_tensorboard_holds_every_figure_at_verls_step(sim_run, tmp_path: Path) -> None:
    trace, plan = sim_run
    doc = _json(trace)
    folder = tmp_path / "tensorboard_log" / "verl_project" / "experiment"
    folder.parent.mkdir(parents=True)  # verl made it; export writes into a folder only inside one that exists
    said = _invoke("export", str(trace), "--to", "tensorboard", str(folder))
    steps, summary = _split(readback.tensorboard_run(folder))
    assert steps == _expected(doc)
    assert summary == _numbers(doc["metrics"], PREFIX + "run/")
    assert sorted({s for points in steps.values() for s, _ in points}) == [s.step for s in plan.steps]
    # the trace figures the issue names are there, at every step
    for key in ("stop_reason/stop/frac", "num_turns/p90", "response_length/mean", "staleness/mean", "stage_s/ref"):
        assert PREFIX + key in steps, key
    assert any("latency_ms/" in name and "_to_" in name for name in summary)
    assert f"into {folder}" in said and f"{len(plan.steps)} steps" in said
    assert [p.name.endswith(".trace-instrument") for p in folder.iterdir()] == [True]


def test_a_prefix_of_ones_own_and_a_second_export_replaces_the_first(tiny_run, tmp_path: Path) -> None:
    readback.require("tensorboardX", "trackers-test")
    from tensorboardX import SummaryWriter

    doc = _json(tiny_run)
    with SummaryWriter(str(tmp_path / "tb")) as verl:  # verl's own series, in the same run folder
        for step in (1, 2):
            verl.add_scalar("critic/score/mean", step / 4, step)
    for _ in range(2):
        _invoke("export", str(tiny_run), "--to", "tensorboard", str(tmp_path / "tb"), "--prefix", "traces.")
    assert len(list((tmp_path / "tb").iterdir())) == 2  # verl's file, and the last export's
    run = readback.tensorboard_run(tmp_path / "tb")
    assert run.points["critic/score/mean"] == [(1, 0.25), (2, 0.5)]
    steps, summary = _split(run, "traces.")
    assert steps == _expected(doc, "traces.")
    assert summary == _numbers(doc["metrics"], "traces.run/")


def test_mlflow_new_run_in_a_sqlite_store(sim_run, tmp_path: Path) -> None:
    trace, _ = sim_run
    doc = _json(trace)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    said = _invoke("export", str(trace), "--to", "mlflow", uri)
    run_id = said.split("(run ")[-1].split(")")[0]
    steps, summary = _split(readback.mlflow_run(uri, run_id))
    assert steps == _expected(doc)
    assert summary == _numbers(doc["metrics"], PREFIX + "run/")
    from mlflow.tracking import MlflowClient

    finished = MlflowClient(tracking_uri=uri).get_run(run_id)
    assert finished.info.status == "FINISHED" and finished.info.run_name == doc["run"]["run_id"]


def test_mlflow_run_id_adds_to_verls_own_run(sim_run, tmp_path: Path) -> None:
    """verl's run keeps its own series untouched; the trace figures sit beside them at the same steps."""
    readback.require("mlflow", "trackers-test")
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    trace, plan = sim_run
    doc = _json(trace)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    verl_run = client.create_run("0", run_name="verl")
    own = [Metric("critic/score/mean", 0.25 * s.step, 0, s.step) for s in plan.steps]
    client.log_batch(verl_run.info.run_id, metrics=own)
    said = _invoke("export", str(trace), "--to", "mlflow", uri, "--run-id", verl_run.info.run_id)
    assert f"(run {verl_run.info.run_id})" in said
    run = readback.mlflow_run(uri, verl_run.info.run_id)
    assert run.points.pop("critic/score/mean") == [(m.step, m.value) for m in own]
    steps, summary = _split(run)
    assert set(run.points) == set(steps) | {k for k in run.points if k.startswith(PREFIX + "run/")}
    assert steps == _expected(doc)
    assert summary == _numbers(doc["metrics"], PREFIX + "run/")
    assert client.get_run(verl_run.info.run_id).info.status == "RUNNING"  # verl's run: left as it was


def test_mlflow_unknown_run_id_is_one_line_and_writes_nothing(tiny_run, tmp_path: Path) -> None:
    readback.require("mlflow", "trackers-test")
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    result = runner.invoke(app, ["export", str(tiny_run), "--to", "mlflow", uri, "--run-id", "nope", "--no-cache"])
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()[-1:]
    assert line.startswith("error: could not write into mlflow") and "nope" in line
    assert MlflowClient(tracking_uri=uri).search_runs(["0"]) == []


def test_wandb_offline_run_with_a_step_metric_of_its_own(sim_run, tmp_path: Path, monkeypatch) -> None:
    """A resumed W&B run refuses earlier steps: the trace figures are drawn against `trace/step`,
    which holds verl's global_step; the run-wide figures are the run's summary."""
    monkeypatch.delenv("WANDB_MODE", raising=False)
    trace, plan = sim_run
    doc = _json(trace)
    said = _invoke("export", str(trace), "--to", "wandb", str(tmp_path), "--run-id", "verlrun1")
    run = readback.wandb_run(tmp_path)
    assert run.run_id == "verlrun1" and "(run verlrun1)" in said
    assert run.step_metrics == {PREFIX + "*": PREFIX + "step"}
    points: dict[str, list[tuple[int, float]]] = {}
    for row in run.rows:
        step = row.pop(PREFIX + "step")
        for name, value in row.items():
            if name.startswith(PREFIX):
                points.setdefault(name, []).append((step, value))
    assert points == _expected(doc)
    assert [row for row in run.rows if not set(row) - {"_step", "_runtime", "_timestamp"}] == []
    summary = {k: v for k, v in run.summary.items() if k.startswith(PREFIX + "run/")}
    assert summary == _numbers(doc["metrics"], PREFIX + "run/")
    assert len(run.rows) == len(plan.steps)


def _cut(full: Path, target: Path, fraction: float) -> dict[Path, bytes]:
    """``target``: ``full`` with every growing file cut at ``fraction`` of its bytes, mid-line (a
    run being written); the full contents of each, by path in ``target``."""
    shutil.copytree(full, target, ignore=shutil.ignore_patterns(".trace-instrument-cache"))
    contents = {}
    for path in sorted([*target.glob("sample/*.csv"), *target.glob("trajectory/*.jsonl"), *target.glob("**/*.log")]):
        data = path.read_bytes()
        contents[path] = data
        path.write_bytes(data[: int(len(data) * fraction)])
    return contents


@pytest.mark.parametrize("fraction", [0.35, 0.6, 0.85])
def test_follow_logs_each_step_once_when_complete(sim_run, tmp_path: Path, fraction: float) -> None:
    """Each refresh logs the steps that became complete: the values logged then are those of the whole
    run read afterwards (no later row changes a complete step), no step gets a second point, and the
    run-wide figures' latest point is the whole run's."""
    from trace_instrument.traces.analyze import Options
    from trace_instrument.traces.follow import Follower
    from trace_instrument.traces.render.trackers import Exporter
    from trace_instrument.traces.render.trackers.tensorboard_events import TensorBoardWriter

    readback.require("tensorboardX", "trackers-test")
    trace = tmp_path / "trace"
    full = _cut(sim_run[0], trace, fraction)
    writer = TensorBoardWriter(str(tmp_path / "tb"))
    exporter = Exporter(writer, PREFIX, complete_only=True)
    with Follower([trace], Options(cache=False)) as follower:
        first = exporter.add(follower.refresh().analysis)
        for path, data in full.items():
            path.write_bytes(data)
        second = exporter.add(follower.refresh().analysis)
        third = exporter.add(follower.refresh().analysis)
    writer.close()
    doc = _json(trace)
    every = [entry["step"] for entry in doc["steps"]]
    assert third == () and not set(first) & set(second)
    assert sorted(first + second) == every  # the run is over: every step complete, once
    assert len(first) < len(every)  # the cut run's last steps were not complete yet
    steps, summary = _split(readback.tensorboard_run(tmp_path / "tb"))
    # a step's overlap with the rollouts counts those of later steps too: rows of a rollout that ran
    # during its training, written late by another process, can only add to it
    expected = _followed(doc)
    logged, final = steps.pop(OVERLAP), expected.pop(OVERLAP)
    assert [s for s, _ in logged] == [s for s, _ in final]
    assert all(early <= late for (_, early), (_, late) in zip(logged, final))
    assert steps == expected
    ended = _numbers(doc["metrics"], PREFIX + "run/")
    assert {k: v for k, v in summary.items() if k in ended} == ended
    assert all(math.isnan(v) for k, v in summary.items() if k not in ended)  # no longer given: NaN


def test_the_cli_follows_into_a_tracker(sim_run, tmp_path: Path) -> None:
    trace, plan = sim_run
    doc = _json(trace)
    args = ["--to", "tensorboard", str(tmp_path / "tb"), "--follow", "--interval", "0", "--refreshes", "2"]
    said = _invoke("export", str(trace), *args)
    assert "logged steps 1, 2, 3, 4, 5" in said and "logged no new step" in said
    steps, summary = _split(readback.tensorboard_run(tmp_path / "tb"))
    assert steps == _followed(doc)
    assert summary == _numbers(doc["metrics"], PREFIX + "run/")
    assert f"{len(plan.steps)} steps" in said.splitlines()[-1]


@pytest.mark.parametrize("tracker", ["mlflow", "wandb"])
def test_following_into_mlflow_and_wandb_logs_each_step_once(sim_run, tmp_path: Path, tracker: str, monkeypatch):
    """Three refreshes of an unchanged, finished run: every step once, the summary the whole run's."""
    monkeypatch.delenv("WANDB_MODE", raising=False)
    trace, plan = sim_run
    doc = _json(trace)
    dest = f"sqlite:///{tmp_path / 'mlflow.db'}" if tracker == "mlflow" else str(tmp_path)
    said = _invoke("export", str(trace), "--to", tracker, dest, "--follow", "--interval", "0", "--refreshes", "3")
    assert said.count("logged no new step") == 2
    if tracker == "mlflow":
        run = readback.mlflow_run(dest, said.split("(run ")[-1].split(")")[0])
        steps, summary = _split(run)
    else:
        wandb = readback.wandb_run(tmp_path)
        assert len(wandb.rows) == len(plan.steps)
        steps = {}
        for row in wandb.rows:
            for name, value in row.items():
                if name.startswith(PREFIX) and name != PREFIX + "step":
                    steps.setdefault(name, []).append((row[PREFIX + "step"], value))
        summary = {k: v for k, v in wandb.summary.items() if k.startswith(PREFIX + "run/")}
    assert steps == _followed(doc)
    assert summary == _numbers(doc["metrics"], PREFIX + "run/")
