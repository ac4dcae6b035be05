"""TrajectoryStore: JSONL lines byte for byte, file names, size rotation, discovery file."""

from __future__ import annotations

import json
import re
import threading
import time

import pytest

FIXED_NOW = time.mktime((2026, 8, 11, 15, 4, 5, 0, 0, -1)) + 0.042  # 15:04:05.042 local
FIXED_STAMP = "20260811_150405_042"


@pytest.fixture
def dump_dir(tmp_path):
    return tmp_path / "trace" / "trajectory"


@pytest.fixture
def fixed_clock(traced):
    traced.settings.clock = lambda: FIXED_NOW


def make_trajectory(runtime):
    turns = [
        runtime.Turn(
            turn_index=0,
            prompt_token_count=87,
            prompt_text="dropped",
            completion_text="To determine «x»",
            completion_token_ids=[1, 2],
            completion_token_count=2,
            finish_reason="length",
            start_ts=10.5,
            end_ts=11.5,
            completion_time_ms=1000.0,
            sglang_rid="rid",
            sglang_time_ms=900.0,
            sglang_decode_time_ms=900.0,
        ),
        runtime.Turn(
            turn_index=1,
            observation_text="tool\nout",
            observation_token_ids=[5],
            observation_time_ms=20.0,
            completion_time_ms=None,
            turn_total_time_ms=None,
            template_overhead_tokens=13,
            template_overhead_text="<|im_start|>",
        ),
        runtime.Turn(turn_index=2, completion_time_ms=5.0, observation_time_ms=1.0, turn_total_time_ms=99.0),
    ]
    return runtime.Trajectory(
        request_id="3",
        prompt_uid="92ee95cb",
        sample_index=3,
        n_samples=4,
        replica_id=777,
        global_step=3,
        created_at_ts=1787215072.088314,
        completed_at_ts=1787215073.420837,
        total_time_ms=1332.52,
        turns=turns,
        initial_prompt_text="<|im_start|>system\nYou are Qwen",
        initial_prompt_token_ids=[1, 2, 3],
        agent_metrics={"generate_sequences": 1.201, "num_preempted": -1},
        agent_stop_reason="no_tool_call",
        response_length=120,
        max_response_length=512,
        min_global_steps=3,
        max_global_steps=4,
    )


def expected_turn(
    turn_index,
    completion_text="",
    completion_token_count=None,
    finish_reason="",
    observation_text=None,
    start_ts=0.0,
    end_ts=0.0,
    turn_total_time_ms=0.0,
    completion_time_ms=0.0,
    observation_time_ms=None,
    sglang_time_ms=None,
    sglang_decode_time_ms=None,
    overhead=(None, None),
    prompt_token_count=None,
):
    """A dumped turn, keys spelled out in the documented order."""
    return {
        "turn_index": turn_index,
        "prompt_token_count": prompt_token_count,
        "completion_text": completion_text,
        "completion_token_count": completion_token_count,
        "finish_reason": finish_reason,
        "observation_text": observation_text,
        "start_ts": start_ts,
        "end_ts": end_ts,
        "observation_start_ts": None,
        "observation_end_ts": None,
        "turn_total_time_ms": turn_total_time_ms,
        "completion_time_ms": completion_time_ms,
        "observation_time_ms": observation_time_ms,
        "sglang_time_ms": sglang_time_ms,
        "sglang_queue_time_ms": None,
        "sglang_ttft_ms": None,
        "sglang_prefill_ms": None,
        "sglang_decode_time_ms": sglang_decode_time_ms,
        "template_overhead_tokens": overhead[0],
        "template_overhead_text": overhead[1],
    }


def expected_line() -> bytes:
    raw = {
        "request_id": "3",
        "n_samples": 4,
        "global_step": 3,
        "created_at_ts": 1787215072.088314,
        "completed_at_ts": 1787215073.420837,
        "total_time_ms": 1332.52,
        "turns": [
            expected_turn(
                0,
                "To determine «x»",
                2,
                "length",
                start_ts=10.5,
                end_ts=11.5,
                turn_total_time_ms=1000.0,
                completion_time_ms=1000.0,
                sglang_time_ms=900.0,
                sglang_decode_time_ms=900.0,
                prompt_token_count=87,
            ),
            expected_turn(
                1,
                observation_text="tool\nout",
                turn_total_time_ms=20.0,
                completion_time_ms=None,
                observation_time_ms=20.0,
                overhead=(13, "<|im_start|>"),
            ),
            expected_turn(2, turn_total_time_ms=99.0, completion_time_ms=5.0, observation_time_ms=1.0),
        ],
        "initial_prompt_text": "<|im_start|>system\nYou are Qwen",
        "agent_metrics": {"generate_sequences": 1.201, "num_preempted": -1},
        # additions to the seed's format, after its fields
        "agent_stop_reason": "no_tool_call",
        "response_length": 120,
        "max_response_length": 512,
        "min_global_steps": 3,
        "max_global_steps": 4,
    }
    line = {"prompt_uid": "92ee95cb", "sample_index": 3, "raw_message": json.dumps(raw, ensure_ascii=False)}
    return (json.dumps(line, ensure_ascii=False) + "\n").encode("utf-8")


def written_files(dump_dir):
    return sorted(dump_dir.glob("*.jsonl"))


def test_line_format_byte_for_byte(traced, dump_dir, fixed_clock):
    store = traced.TrajectoryStore(str(dump_dir), 4242)
    store.write(make_trajectory(traced))
    store.close()
    (path,) = written_files(dump_dir)
    assert path.name == f"trajectory_4242_{FIXED_STAMP}.jsonl"
    assert path.read_bytes() == expected_line()
    assert "«x»".encode() in path.read_bytes()  # ensure_ascii=False


def test_dict_input_gives_the_same_line(traced, dump_dir, fixed_clock):
    store = traced.TrajectoryStore(str(dump_dir), 1)
    as_dict = make_trajectory(traced).to_dict()
    store.write(as_dict)
    store.close()
    assert written_files(dump_dir)[0].read_bytes() == expected_line()
    assert "replica_id" in as_dict and "prompt_text" in as_dict["turns"][0]  # input untouched


def test_store_does_not_mutate_the_trajectory(traced, dump_dir):
    trajectory = make_trajectory(traced)
    before = trajectory.to_dict()
    store = traced.TrajectoryStore(str(dump_dir), 1)
    store.write(trajectory)
    store.close()
    assert trajectory.to_dict() == before


def test_one_line_per_write_in_order(traced, dump_dir):
    store = traced.TrajectoryStore(str(dump_dir), 1)
    for index in range(200):
        store.write(traced.Trajectory(request_id=str(index), prompt_uid="p", sample_index=index))
    assert store.flush(10)
    lines = written_files(dump_dir)[0].read_text().splitlines()
    assert [json.loads(line)["sample_index"] for line in lines] == list(range(200))
    assert [json.loads(json.loads(line)["raw_message"])["request_id"] for line in lines] == [str(i) for i in range(200)]
    store.close()


def test_default_size_limit_is_100_mb(traced, dump_dir):
    assert traced.TrajectoryStore(str(dump_dir), 1).max_file_size_bytes == 100 * 1024 * 1024
    assert traced.TrajectoryStore(str(dump_dir), 1, max_file_size_mb=2).max_file_size_bytes == 2 * 1024 * 1024


def test_rotation_at_size_limit(traced, dump_dir, fixed_clock):
    line_length = len(traced.trajectory_store.format_trajectory_line(traced.Trajectory(request_id="0000"))) + 1
    limit = 3 * line_length  # a file is full once its third line reaches the limit exactly
    store = traced.TrajectoryStore(str(dump_dir), 9, max_file_size_bytes=limit)
    for index in range(10):
        store.write(traced.Trajectory(request_id=f"{index:04d}"))
    store.close()
    files = written_files(dump_dir)
    # One fixed clock: every new file moves the stamp 1 ms on instead of reusing a name.
    assert [path.name for path in files] == [f"trajectory_9_20260811_150405_{ms:03d}.jsonl" for ms in (42, 43, 44, 45)]
    assert [len(path.read_text().splitlines()) for path in files] == [3, 3, 3, 1]
    lines = [line for path in files for line in path.read_text().splitlines()]
    ids = [json.loads(json.loads(line)["raw_message"])["request_id"] for line in lines]
    assert ids == [f"{index:04d}" for index in range(10)]


def test_rotation_with_variable_line_sizes(traced, dump_dir):
    store = traced.TrajectoryStore(str(dump_dir), 9, max_file_size_bytes=1000)
    for index in range(60):
        store.write(traced.Trajectory(request_id=str(index), initial_prompt_text="x" * (index * 7 % 300)))
    store.close()
    files = written_files(dump_dir)
    assert len(files) > 3
    for path in files[:-1]:
        sizes = [len(line) for line in path.read_bytes().splitlines(keepends=True)]
        assert sum(sizes) >= 1000 > sum(sizes[:-1])  # rotated exactly when the limit was reached
    assert all(re.fullmatch(r"trajectory_9_\d{8}_\d{6}_\d{3}\.jsonl", path.name) for path in files)


def test_store_publishes_discovery_file(traced, dump_dir, load_runtime):
    traced.TrajectoryStore(str(dump_dir), 1).close()
    assert (load_runtime.discovery_dir / "verl_trace_trajectory_path.txt").read_text() == str(dump_dir)
    assert dump_dir.is_dir() and written_files(dump_dir) == []  # no empty file before the first write


def test_write_after_close_is_dropped_and_counted(traced, dump_dir):
    store = traced.TrajectoryStore(str(dump_dir), 1)
    store.close()
    store.write(traced.Trajectory(request_id="late"))
    assert written_files(dump_dir) == []
    assert "writer closed: 1" in store._writer.drop_report()


# -- bursts: a queue bounded in bytes, and a short wait for room ---------------------------------


@pytest.mark.parametrize(
    ("value", "expected_bytes"),
    [(None, 256 * 1024 * 1024), ("64", 64 * 1024 * 1024), ("0.5", 512 * 1024), ("lots", 256 * 1024 * 1024)],
)
def test_trajectory_queue_bound_comes_from_the_environment(load_runtime, monkeypatch, tmp_path, value, expected_bytes):
    if value is not None:
        monkeypatch.setenv("VERL_TRACE_TRAJECTORY_QUEUE_MB", value)
    runtime = load_runtime(trace_dir=tmp_path / "trace")
    assert runtime.settings.TRAJECTORY_QUEUE_MAX_BYTES == expected_bytes


def slow_disk(runtime, monkeypatch, seconds_per_write):
    real_write_all = runtime.files.write_all

    def slow(fd, data):
        time.sleep(seconds_per_write)
        real_write_all(fd, data)

    monkeypatch.setattr(runtime.files, "write_all", slow)


def test_a_burst_waits_for_room_instead_of_dropping(traced, dump_dir, monkeypatch):
    """4 threads x 25 lines into room for 4 lines, on a disk taking 5 ms a line: all 100 are written."""
    line = {"request_id": "0", "initial_prompt_text": "x" * 10_000}
    line_bytes = len(json.dumps({"prompt_uid": None, "sample_index": None, "raw_message": json.dumps(line)})) + 1
    store = traced.TrajectoryStore(str(dump_dir), 1, max_queue_bytes=4 * line_bytes)
    slow_disk(traced, monkeypatch, 0.005)

    def produce(thread_index):
        for index in range(25):
            store.write({**line, "request_id": f"{thread_index}-{index}"})

    threads = [threading.Thread(target=produce, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert store.close(30)
    (path,) = written_files(dump_dir)
    ids = sorted(json.loads(json.loads(text)["raw_message"])["request_id"] for text in path.read_text().splitlines())
    assert ids == sorted(f"{k}-{i}" for k in range(4) for i in range(25))
    assert store._writer.drop_report() is None


def test_a_stuck_writer_is_waited_for_once_then_writes_drop_at_once(traced, dump_dir, monkeypatch):
    monkeypatch.setattr(traced.settings, "TRAJECTORY_QUEUE_WAIT_SECONDS", 1.0)
    line = {"request_id": "0"}
    line_bytes = len(json.dumps({"prompt_uid": None, "sample_index": None, "raw_message": json.dumps(line)})) + 1
    store = traced.TrajectoryStore(str(dump_dir), 1, max_queue_bytes=line_bytes)
    entered, release = threading.Event(), threading.Event()
    real_write_all = traced.files.write_all

    def stuck(fd, data):
        entered.set()
        release.wait(30)
        real_write_all(fd, data)

    monkeypatch.setattr(traced.files, "write_all", stuck)
    store.write(line)  # taken by the writer, which then hangs: the queue is full
    assert entered.wait(10)
    started = time.monotonic()
    store.write(line)  # waits its second, then is dropped
    waited = time.monotonic() - started
    started = time.monotonic()
    for _ in range(3):
        store.write(line)  # the writer has not moved since: dropped without waiting
    assert waited >= 1.0 and time.monotonic() - started < 0.5
    release.set()
    assert store.close(10)
    assert store._writer.drop_report() == "[verl tracing] trajectory writer dropped 4 trajectory(s) (queue full: 4)"


TRICKY_TEXTS = [
    'plain "quoted" \\ backslash \\\\ double',
    "control \x00 \x01 \x1f \t \n \r chars",
    "unicode é → ✓ 工具 \U0001f680 \u2028 \u2029 \x7f",
    "lone \udc80 surrogate",
    '\\"already escaped\\"',
]


@pytest.mark.parametrize("text", TRICKY_TEXTS, ids=["quotes", "controls", "unicode", "surrogate", "escaped"])
def test_lines_are_exactly_what_json_dumps_gives(traced, dump_dir, text):
    record = {"prompt_uid": text, "sample_index": 3, "request_id": text, "turns": [{"completion_text": text * 50}]}
    store = traced.TrajectoryStore(str(dump_dir), 1)
    store.write(record)
    store.close()
    raw = {"request_id": text, "turns": [{"completion_text": text * 50, "turn_total_time_ms": 0.0}]}
    line = {"prompt_uid": text, "sample_index": 3, "raw_message": json.dumps(raw, ensure_ascii=False)}
    expected = (json.dumps(line, ensure_ascii=False) + "\n").encode("utf-8", "backslashreplace")
    assert written_files(dump_dir)[0].read_bytes() == expected
