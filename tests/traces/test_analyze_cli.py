"""`trace-instrument analyze`: the JSON document's keys, markdown, --steps, the cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trace_instrument.cli import app
from trace_instrument.traces.analyze import Options, analyze

runner = CliRunner()


def _json(*args: str) -> dict:
    result = runner.invoke(app, ["analyze", *args, "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_json_metrics_use_verl_names(tiny_run: Path) -> None:
    doc = _json(str(tiny_run), "--no-cache")
    m = doc["metrics"]
    # hand-computed for the tiny run (conftest.tiny_plan): stop 2, length 1; turns [1, 1, 2]
    assert m["stop_reason/stop/count"] == 2
    assert m["stop_reason/length/frac"] == pytest.approx(1 / 3)
    assert m["num_turns/p99"] == pytest.approx(1.98)
    assert m["num_turns/max"] == 2
    assert m["completion_tokens/p50"] == 150
    # the tiny run's trajectories predate verl's response length: its keys are absent, never zero
    assert not any(k.startswith("response_length/") for k in m)
    assert m["tool_time_ms/search/max"] == 100
    assert m["latency_ms/sending_generate_request->received_generate_response/p50"] == 250
    # rollout windows 415 ms and 305 ms; training 500 ms in both steps
    assert m["timing_s/gen"] == pytest.approx((0.415 + 0.305) / 2)
    assert m["timing_s/train"] == pytest.approx(0.5)
    assert m["staleness/max"] == 0
    assert m["funnel/trained/trajectories"] == 3
    assert m["in_flight/count"] == 1
    assert not any(k.startswith("sglang_ms/") for k in m)  # not collected: absent, never zero
    assert [s["step"] for s in doc["steps"]] == [1, 2]
    assert doc["steps"][1]["timing_s/trainer_idle"] == pytest.approx(0.5)
    assert doc["run"]["job_ids"] == ["job-tiny"]


def test_steps_option_selects_samples_generated_in_the_range(tiny_run: Path) -> None:
    doc = _json(str(tiny_run), "--no-cache", "--steps", "2")
    funnel = {row["milestone"]: row["trajectories"] for row in doc["details"]["funnel"]}
    assert funnel["generated"] == 2 and funnel["trained"] == 1  # U2/0 and U2/1; only U2/0 trained
    assert [s["step"] for s in doc["steps"]] == [2]
    assert doc["metrics"]["completion_tokens/max"] == 20
    bad = runner.invoke(app, ["analyze", str(tiny_run), "--steps", "3-1"])
    assert bad.exit_code == 2


def test_markdown_has_every_section(tiny_run: Path) -> None:
    result = runner.invoke(app, ["analyze", str(tiny_run), "--no-cache", "--format", "markdown"])
    assert result.exit_code == 0
    for title in (
        "## Step windows",
        "## Stage latencies",
        "## Funnel",
        "## Stop reasons",
        "## Staleness",
        "## Generation throughput per step",
        "## sglang timing",
    ):
        assert title in result.stdout


def test_second_run_reuses_the_cache(tiny_run: Path, tmp_path: Path) -> None:
    import shutil

    trace = shutil.copytree(tiny_run, tmp_path / "trace")
    large = Options(in_memory_max_bytes=0)  # as a run too large to read into memory
    first = analyze([trace], large)
    second = analyze([trace], large)
    assert not first.cached and second.cached
    assert second.latencies == first.latencies and second.header == first.header
    assert any((trace / ".trace-instrument-cache").iterdir())
    with open(next((trace / "progress").glob("*.log")), "a") as f:
        f.write("Step 3 rollout started\n")  # a run still being written: the cache is rebuilt
    third = analyze([trace], large)
    assert not third.cached
    assert 3 in third.header.steps


def test_cached_result_round_trips_exactly(sim_run, tmp_path: Path) -> None:
    import shutil

    from trace_instrument.traces import serde

    trace = shutil.copytree(sim_run[0], tmp_path / "trace")
    large = Options(in_memory_max_bytes=0)
    first = analyze([trace], large)
    back = serde.from_json(serde.to_json(first))
    assert back == first
    # str enums compare equal to their text: the members themselves must come back
    assert back.step_rollouts_by is first.step_rollouts_by is not None
    second = analyze([trace], large)
    assert second.cached and second == type(first)(**{**first.__dict__, "cached": True})
    other_steps = analyze([trace], Options(steps=(2, 3), in_memory_max_bytes=0))  # computed from the cached tables
    assert other_steps.cached and [s.step for s in other_steps.steps] == [2, 3]


def test_a_small_run_is_read_in_memory_and_not_cached(tiny_run: Path, tmp_path: Path) -> None:
    import shutil

    trace = shutil.copytree(tiny_run, tmp_path / "trace")
    first = analyze([trace], Options())
    second = analyze([trace], Options())
    assert not first.cached and not second.cached
    assert not (trace / ".trace-instrument-cache").exists()
    assert second == first


def test_memory_and_a_database_file_give_the_same_analysis(sim_run) -> None:
    import dataclasses

    in_memory = analyze([sim_run[0]], Options(cache=False))
    on_disk = analyze([sim_run[0]], Options(cache=False, in_memory_max_bytes=0))
    # the rollouts' float means may differ in the last bit between two runs (DuckDB sums in parallel)
    assert dataclasses.replace(on_disk, rollouts=None) == dataclasses.replace(in_memory, rollouts=None)
    assert on_disk.rollouts is not None and in_memory.rollouts is not None
    assert on_disk.rollouts.stop_reasons == in_memory.rollouts.stop_reasons


def test_format_html_writes_the_page_to_stdout(tiny_run: Path, tmp_path: Path) -> None:
    """``--format html`` is the page ``--html FILE`` writes, on stdout (``> report.html``); with
    --follow (one page per refresh) or --trajectory (no page) it is refused."""
    page = tmp_path / "report.html"
    written = runner.invoke(app, ["analyze", str(tiny_run), "--no-cache", "--html", str(page)])
    assert written.exit_code == 0, written.output
    result = runner.invoke(app, ["analyze", str(tiny_run), "--no-cache", "--format", "html"])
    assert result.exit_code == 0, result.output
    assert result.stdout == page.read_text(encoding="utf-8")
    assert result.stdout.lstrip().lower().startswith("<!doctype html")
    for refused in (["--follow", "--refreshes", "1"], ["--trajectory", "U1/0"]):
        bad = runner.invoke(app, ["analyze", str(tiny_run), "--no-cache", "--format", "html", *refused])
        assert bad.exit_code == 2 and "--format html" in bad.stderr, bad.output
