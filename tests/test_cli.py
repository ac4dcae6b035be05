"""The command line: exit codes, formats, and what the summaries say."""

from __future__ import annotations

import json
import subprocess
import sys

from support import tree_bytes
from typer.testing import CliRunner

from trace_instrument.cli import app

runner = CliRunner()


def _run(*args: str):
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)


def test_apply_check_remove_exit_codes(checkout_090, verl_090):
    assert _run("check", checkout_090).exit_code == 1  # pristine: every point missing
    first = _run("apply", checkout_090)
    assert first.exit_code == 0
    assert first.output.strip().splitlines()[-1] == "apply: 93 applied — written"
    assert _run("apply", checkout_090).output.strip().splitlines()[-1] == "apply: 93 present — nothing to write"
    assert _run("check", checkout_090).exit_code == 0
    assert _run("verify", checkout_090).exit_code == 0
    removed = _run("remove", checkout_090)
    assert removed.exit_code == 0
    assert tree_bytes(checkout_090) == tree_bytes(verl_090)


def test_dry_run_prints_a_diff_and_writes_nothing(checkout_090, verl_090):
    result = _run("apply", "--dry-run", checkout_090)
    assert result.exit_code == 0
    assert (
        "+from verl.utils.tracing import log_gen_throughput, log_progress, log_step_window, trace_flow" in result.output
    )
    assert result.output.strip().endswith("dry run, nothing written")
    assert tree_bytes(checkout_090) == tree_bytes(verl_090)


def test_json_output(checkout_090):
    trainer = (checkout_090 / "verl/trainer/ppo/ray_trainer.py").read_text(encoding="utf-8").splitlines()
    anchor_line = next(
        i for i, line in enumerate(trainer, 1) if line.lstrip().startswith('batch.non_tensor_batch["uid"] =')
    )
    body = json.loads(_run("apply", "--format", "json", "--only", "flow.v0.uid-generated", checkout_090).output)
    assert body["summary"]["by_status"] == {"applied": 1}
    assert [(p["id"], p["line"]) for p in body["points"]] == [("flow.v0.uid-generated", anchor_line)]
    check = json.loads(_run("check", "--format", "json", "--only", "flow.v0.uid-generated", checkout_090).output)
    assert [p["status"] for p in check["points"] if p["id"] != "runtime"] == ["present"]
    assert set(check["points"][0]) >= {"id", "facility", "status", "file", "line", "message"}


def test_bad_arguments_and_bad_checkouts_exit_2(tmp_path, checkout_090):
    assert _run("apply", tmp_path).exit_code == 2  # no verl/ inside
    assert "not a verl checkout" in _run("apply", tmp_path).output
    assert _run("apply", "--only", "no.such.point", checkout_090).exit_code == 2
    assert _run("apply", "--facility", "telemetry", checkout_090).exit_code == 2
    assert _run("check", tmp_path / "missing").exit_code == 2


def test_points_lists_the_catalog_and_marks_extras():
    result = _run("points")
    assert result.exit_code == 0
    assert "extra.sglang-timing" in result.output and "changes verl's behaviour" in result.output
    body = json.loads(_run("points", "--format", "json").output)
    assert len(body["points"]) == 97 and body["validated_on"]
    assert {p["id"] for p in body["points"] if not p["default"]} == {
        "extra.sglang-timing",
        "extra.reward-score.field",
        "extra.reward-score.carry",
        "extra.reward-score.aggregate",
    }


def test_python_dash_m_runs_the_cli():
    done = subprocess.run(
        [sys.executable, "-m", "trace_instrument", "--version"], check=False, capture_output=True, text=True
    )
    assert done.returncode == 0 and done.stdout.startswith("trace-instrument ")
