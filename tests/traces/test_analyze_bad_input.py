"""Bad input: clear messages, counts of what was skipped with the first examples, exit 2 only when nothing is usable."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import simulate
from typer.testing import CliRunner

from trace_instrument.cli import app
from trace_instrument.traces.analyze import Options, analyze

runner = CliRunner()
TINY_ROWS = 47  # test_analyze_tiny.test_header


def _skipped(result) -> dict[str, tuple[int, tuple[str, ...]]]:
    return {s.reason: (s.count, s.examples) for s in result.header.skipped}


@pytest.fixture
def damaged(tiny_run: Path, tmp_path: Path) -> Path:
    """The tiny run with every kind of damage the issue lists."""
    trace = shutil.copytree(tiny_run, tmp_path / "trace")
    worker_csv = next(p for p in (trace / "sample").glob("node-b-*.csv"))
    trainer_csv = next(p for p in (trace / "sample").glob("node-a-*.csv"))
    rows = worker_csv.read_bytes().splitlines(keepends=True)
    with open(worker_csv, "ab") as f:
        f.write(b"a,b,c\r\n")  # too few columns: line len(rows)+1
        f.write(b"job-tiny,sample,x/0,RUNNING,1787215021000,from=A|to=B|stage=LLM_GENERATE|detail=\xff\xfe\r\n")
        f.write(b"job-tiny,sample,x/0,RUNNING,1787215021001,from=A|to=B|stage=MYSTERY_STAGE|detail=what\r\n")
        f.write(b"job-tiny,sample,x/0,RUNNING,1787215021002,this is not a content field\r\n")
        f.write(rows[3])  # a duplicate of an earlier row
    torn = simulate.tear_tail(trainer_csv)  # the trainer was still writing
    assert not torn.endswith(b"\n")
    traj_file = next((trace / "trajectory").glob("*.jsonl"))
    flat = {
        "request_id": "7",
        "prompt_uid": "flat-uid",
        "global_step": 1,
        "turns": [{"turn_index": 0, "completion_token_count": 5, "finish_reason": "stop"}],
    }
    huge_payload = {
        "request_id": "8",
        "global_step": 1,
        "turns": [
            {
                "turn_index": 0,
                "completion_token_count": 9,
                "finish_reason": "length",
                "completion_text": "x" * (100 * 1024 * 1024),
            }
        ],
    }
    with open(traj_file, "a", encoding="utf-8") as f:
        f.write(json.dumps(flat) + "\n")  # the old flat format
        f.write("{not json at all\n")
        f.write(json.dumps({"prompt_uid": "huge", "sample_index": 8, "raw_message": json.dumps(huge_payload)}) + "\n")
        f.write('{"prompt_uid": "torn", "sample_ind')  # torn last line
    status = trace / "status"
    status.mkdir(exist_ok=True)  # the runtime leaves its own status files there too
    (status / "node-b-pid1.json").write_text(
        json.dumps(
            {
                "schema": 1,
                "host": "node-b",
                "pid": 1,
                "updated_at": 0.0,
                "lost": {"sample_flow": {"queue full": 3}, "progress": {}, "trajectory": {"unserializable": 1}},
            }
        )
    )
    (status / "node-a-pid2.json").write_text("{broken")
    return trace


def test_damage_is_counted_with_examples(damaged: Path) -> None:
    result = analyze([damaged], Options(cache=False))
    skipped = _skipped(result)
    worker_csv = next(p for p in (damaged / "sample").glob("node-b-*.csv"))
    n_lines = len(worker_csv.read_bytes().splitlines())
    assert skipped["CSV row with too few columns"] == (1, (f"{worker_csv}:{n_lines - 4}",))
    assert skipped["CSV row with bytes that are not UTF-8"] == (1, (f"{worker_csv}:{n_lines - 3}",))
    count, examples = skipped["row with an unknown stage or detail"]
    assert count == 1 and examples[0].startswith(f"{worker_csv}:{n_lines - 2} ")
    count, examples = skipped["row whose content does not parse"]
    assert count == 1 and examples[0].startswith(f"{worker_csv}:{n_lines - 1} ")
    assert skipped["duplicate row (left out of the latencies)"][0] == 1
    assert skipped["torn last CSV row (run still being written)"][0] == 1
    assert skipped["torn last trajectory line (run still being written)"][0] == 1
    count, examples = skipped["trajectory line that is not JSON"]
    assert count == 1 and examples[0].endswith(":5")  # 3 trajectories, the flat one, then this
    assert skipped["status file that is not valid JSON"][0] == 1
    # read: the tiny run's rows minus the torn one, plus the unknown, unparsable and duplicate rows
    assert result.header.rows_read == TINY_ROWS - 1 + 3
    assert result.header.rows_rejected == 2 + 1 + 1 + 1 + 1  # refused 2, torn, unknown, unparsable, duplicate
    assert result.header.lost == {"sample_flow": {"queue full": 3}, "progress": {}, "trajectory": {"unserializable": 1}}
    r = result.rollouts
    assert r is not None and r.trajectories == 3 + 2  # the flat line and the 100 MB one are read
    assert r.formats == {"raw_message": 4, "flat": 1}


def test_an_empty_content_field_is_a_row_that_does_not_parse(tiny_run: Path, tmp_path: Path) -> None:
    trace = shutil.copytree(tiny_run, tmp_path / "trace")
    worker_csv = next(p for p in (trace / "sample").glob("node-b-*.csv"))
    with open(worker_csv, "ab") as f:
        f.write(b"job-tiny,sample,x/0,RUNNING,1787215021003,\r\n")
    n_lines = len(worker_csv.read_bytes().splitlines())
    result = analyze([trace], Options(cache=False))
    assert result.header.rows_read == TINY_ROWS + 1
    count, examples = _skipped(result)["row whose content does not parse"]
    assert count == 1 and examples[0].startswith(f"{worker_csv}:{n_lines} ")


def test_damage_leaves_the_numbers_of_good_rows_alone(damaged: Path, tiny_run: Path) -> None:
    clean = analyze([tiny_run], Options(cache=False))
    result = analyze([damaged], Options(cache=False))
    lat = {(x.from_event, x.to_event): (x.count, x.p50, x.max) for x in clean.latencies}
    got = {(x.from_event, x.to_event): (x.count, x.p50, x.max) for x in result.latencies}
    # the torn trainer row is the step-2 SYNC_PARAMS row (its last), which has no latency
    assert got == lat


def test_cli_reports_and_exits_0_on_partly_bad_input(damaged: Path) -> None:
    result = runner.invoke(app, ["analyze", str(damaged), "--no-cache"])
    assert result.exit_code == 0, result.output
    assert "skipped 1 CSV row with too few columns" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("layout", ["empty", "missing", "garbage"])
def test_nothing_usable_exits_2_with_a_message(tmp_path: Path, layout: str) -> None:
    target = tmp_path / "t"
    if layout == "empty":
        target.mkdir()
    elif layout == "garbage":
        (target / "sample").mkdir(parents=True)
        (target / "sample" / "h-pid1.csv").write_bytes(b"x,y\r\n\xff\xff\r\n")
    result = runner.invoke(app, ["analyze", str(target), "--no-cache"])
    assert result.exit_code == 2
    message = {"empty": "no trace files found", "missing": "not a folder", "garbage": "no usable rows"}[layout]
    assert message in result.output
    assert "Traceback" not in result.output
    if layout == "garbage":
        assert "2 CSV row" in result.output or "CSV row with too few columns" in result.output
