"""Fault injection: nothing the disk, stdout or the caller does may raise into training.

Tests run as root, so permission bits cannot make a directory unwritable; the
disk faults are injected with a file where a directory should be and
monkeypatched writes that fail with ENOSPC for one file (/dev/full would be
simpler, but the runtime refuses devices: writing to one could block).
"""

from __future__ import annotations

import dataclasses
import errno
import io
import json
import threading
import time
import tracemalloc

import numpy as np  # a test dependency: pip install -e '.[test]'
import pytest


def exercise_everything(runtime, store_dir):
    """Call every public entry point once; returns the store used."""
    runtime.trace_flow(["u1", "u2"], ["0", "1"], "A", "B", "TRAIN_UPDATE", detail="d", global_step=1)
    runtime.log_progress("start generation")
    runtime.log_step_window(1, "train", "started")
    runtime.log_gen_throughput_tokens(100, 2.0)
    runtime.log_rollout_completed("u1", "0", 1.0)
    store = runtime.TrajectoryStore(str(store_dir), 1)
    record = runtime.TurnRecord([1, 2, 3])
    record.stamp_end()
    store.write(runtime.Trajectory(request_id="0", turns=[record.turn]))
    return store


def gate_writes(runtime, monkeypatch):
    """Make background writes block until the returned ``release`` event is set."""
    entered, release = threading.Event(), threading.Event()
    real_write_all = runtime.files.write_all

    def gated(fd, data):
        entered.set()
        release.wait(30)
        real_write_all(fd, data)

    monkeypatch.setattr(runtime.files, "write_all", gated)
    return entered, release


# -- disk faults ----------------------------------------------------------------


def test_trace_dir_is_a_regular_file(load_runtime, tmp_path, capsys):
    not_a_dir = tmp_path / "trace"
    not_a_dir.write_text("occupied")
    runtime = load_runtime(trace_dir=not_a_dir)
    store = exercise_everything(runtime, not_a_dir / "trajectory")
    assert store.close(10)
    assert runtime.flush(10)
    out = capsys.readouterr().out
    assert out.count("[FLOW_TRACE]") == 2 and "start generation\n" in out and "Step 1 train started\n" in out
    assert "write error: 2" in load_runtime.writer(runtime).drop_report()
    assert "write error: 1" in store._writer.drop_report()
    assert not_a_dir.read_text() == "occupied"


def test_sample_dir_is_a_file_then_recovers(traced, trace_dir, load_runtime):
    trace_dir.mkdir()
    (trace_dir / "sample").write_text("occupied")
    traced.trace_flow("lost", "0", "A", "B", "S")
    assert traced.flush(10)
    assert "write error: 1" in load_runtime.writer(traced).drop_report()
    (trace_dir / "sample").unlink()
    traced.trace_flow("kept", "0", "A", "B", "S")
    assert load_runtime.read_csv(traced, trace_dir).count(b"\r\n") == 1
    assert b"kept/0" in load_runtime.read_csv(traced, trace_dir)


def full_disk_for(runtime, monkeypatch, path):
    """Every write to the file at ``path`` fails with ENOSPC, as on a full disk; returns the cure."""
    real_os = runtime.files.os

    class FullDiskOs:
        def __getattr__(self, name):
            return getattr(real_os, name)

        def write(self, fd, data):
            if real_os.readlink(f"/proc/self/fd/{fd}") == str(path):
                raise OSError(errno.ENOSPC, "No space left on device")
            return real_os.write(fd, data)

    monkeypatch.setattr(runtime.files, "os", FullDiskOs())
    return lambda: monkeypatch.setattr(runtime.files, "os", real_os)


def test_sample_csv_on_a_full_disk(traced, trace_dir, load_runtime, monkeypatch):
    csv_path = load_runtime.csv_path(trace_dir)
    cure = full_disk_for(traced, monkeypatch, csv_path)
    traced.trace_flow("u", ["0", "1", "2"], "A", "B", "S")
    assert traced.flush(10)
    assert "write error: 3" in load_runtime.writer(traced).drop_report()
    cure()
    traced.trace_flow("after", "0", "A", "B", "S")
    assert load_runtime.read_csv(traced, trace_dir).startswith(b"ENV_NOTFOUND_DLC_JOB_ID,sample,after/0,")


def test_progress_log_on_a_full_disk(traced, trace_dir, capsys, monkeypatch):
    traced.settings.clock = lambda: 1787215029.0
    hour = time.strftime("%Y%m%d-%H", time.localtime(1787215029.0))
    log_path = trace_dir / "progress" / f"{hour}.log"
    cure = full_disk_for(traced, monkeypatch, log_path)
    traced.log_progress("lost in the full disk")
    assert capsys.readouterr().out == "lost in the full disk\n"
    assert traced.losses.status()["lost"]["progress"] == {"write error": 1}
    cure()
    traced.log_progress("written")
    assert log_path.read_text() == "written\n"


def test_trajectory_write_errors_are_counted(traced, trace_dir, monkeypatch):
    # The store creates files with O_EXCL: nothing can be planted in its way;
    # inject ENOSPC at the write call instead.
    def disk_full(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    store = traced.TrajectoryStore(str(trace_dir / "trajectory"), 1)
    monkeypatch.setattr(traced.files, "write_all", disk_full)
    store.write(traced.Trajectory(request_id="lost"))
    assert store.flush(10)
    assert "write error: 1" in store._writer.drop_report()
    monkeypatch.undo()
    store.write(traced.Trajectory(request_id="kept"))
    store.close()
    lines = [line for path in (trace_dir / "trajectory").glob("*.jsonl") for line in path.read_text().splitlines()]
    assert [json.loads(json.loads(line)["raw_message"])["request_id"] for line in lines] == ["kept"]


def test_store_never_appends_to_a_planted_file(traced, trace_dir, tmp_path):
    traced.settings.clock = lambda: 1787215029.5
    dump_dir = trace_dir / "trajectory"
    dump_dir.mkdir(parents=True)
    stamp = time.strftime("%Y%m%d_%H%M%S", time.localtime(1787215029))
    victim = tmp_path / "victim"
    victim.write_text("untouched")
    planted = dump_dir / f"trajectory_1_{stamp}_500.jsonl"
    planted.symlink_to(victim)
    store = traced.TrajectoryStore(str(dump_dir), 1)
    store.write(traced.Trajectory(request_id="x"))
    store.close()
    assert store.current_file == str(dump_dir / f"trajectory_1_{stamp}_501.jsonl")
    assert planted.is_symlink() and victim.read_text() == "untouched"


# -- stdout faults ----------------------------------------------------------------


class RaisingStdout:
    def __init__(self, exc):
        self.exc = exc

    def write(self, text):
        raise self.exc

    def flush(self):
        raise self.exc


def _closed_stream():
    stream = io.StringIO()
    stream.close()
    return stream


@pytest.mark.parametrize(
    "make_stdout",
    [
        lambda: None,
        lambda: _closed_stream(),
        lambda: RaisingStdout(BrokenPipeError(errno.EPIPE, "Broken pipe")),
        lambda: RaisingStdout(OSError(errno.EIO, "I/O error")),
        lambda: object(),
    ],
    ids=["none", "closed", "broken-pipe", "eio", "no-write-method"],
)
def test_unusable_stdout_never_raises_and_files_are_still_written(
    traced, trace_dir, load_runtime, monkeypatch, make_stdout
):
    monkeypatch.setattr("sys.stdout", make_stdout())
    store = exercise_everything(traced, trace_dir / "trajectory")
    store.close(10)
    assert load_runtime.read_csv(traced, trace_dir).count(b"\r\n") == 2
    (progress_file,) = (trace_dir / "progress").iterdir()
    assert progress_file.read_text().startswith("start generation\nStep 1 train started\n")


def test_stdout_that_cannot_encode_gets_escapes(traced, trace_dir, load_runtime, monkeypatch):
    raw = io.BytesIO()
    ascii_stdout = io.TextIOWrapper(raw, encoding="ascii", errors="strict")
    monkeypatch.setattr("sys.stdout", ascii_stdout)
    traced.trace_flow("日本", "0", "A", "B", "S")
    traced.log_progress("naïve")
    ascii_stdout.flush()
    echoed = raw.getvalue().decode("ascii")
    assert "uid=\\u65e5\\u672c | traj_uid=0" in echoed and "na\\xefve\n" in echoed
    assert "日本/0".encode() in load_runtime.read_csv(traced, trace_dir)


def test_broken_stdout_pipe_in_a_real_process(script, tmp_path):
    trace_dir = tmp_path / "trace"
    proc_code = """
        import os, sys
        import verl.utils.tracing as tracing
        sys.stdout.flush()
        os.close(1)
        read_end, write_end = os.pipe()
        os.dup2(write_end, 1)
        os.close(read_end)  # nobody will ever read: writes fail with EPIPE
        tracing.trace_flow("u", [str(i) for i in range(20000)], "A", "B", "S")
        tracing.log_progress("progress line")
        ok = tracing.flush(10)
        sys.stderr.write("RESULT ok=%s\\n" % ok)
        sys.stderr.flush()
        os._exit(0)
    """
    proc, _ = script.run(proc_code, VERL_TRACE_DIR=trace_dir)
    assert proc.returncode == 0, proc.stderr
    assert "RESULT ok=True" in proc.stderr
    (csv_file,) = (trace_dir / "sample").iterdir()
    assert csv_file.read_bytes().count(b"\r\n") == 20000
    (progress_file,) = (trace_dir / "progress").iterdir()
    assert progress_file.read_text() == "progress line\n"


# -- odd inputs -------------------------------------------------------------------------


class Unprintable:
    def __str__(self):
        raise RuntimeError("no str")

    __repr__ = __format__ = __str__


class Unhashable(list):
    pass


ODD_VALUES = [
    None,
    5,
    3.5,
    object(),
    Unprintable(),
    (x for x in "ab"),
    {"k": 1},
    {1, 2},
    b"bytes",
    [["nested"]],
    np.array([["2d", "array"]]),
    np.array(7),
    np.float32(0.1),
    float("nan"),
    "",
]


@pytest.mark.parametrize("value", ODD_VALUES, ids=lambda v: type(v).__name__)
def test_odd_ids_never_raise(traced, value):
    traced.trace_flow(value, "0", "A", "B", "S")
    traced.trace_flow("u", value, "A", "B", "S")
    traced.trace_flow(value, value, value, value, value, detail=value, global_step=value)
    traced.log_progress(value)
    traced.log_rollout_completed(value, value, value)
    traced.log_step_window(value, value, value)
    traced.log_gen_throughput_tokens(value, value)
    traced.log_gen_throughput(value, value)
    traced.suppress_sample_trace(value)
    traced.suppress_sample_trace(False)
    assert traced.flush(10)


def test_odd_stage_detail_and_step_are_rendered(traced, trace_dir, load_runtime):
    traced.trace_flow(None, 3, ["stage"], "B", Unhashable(["S"]), detail=np.array([1, 2]), global_step=np.int64(-1))
    row = load_runtime.read_csv(traced, trace_dir)
    assert row.split(b",")[2:4] == [b"None/3", b"RUNNING"]
    assert row.endswith(b"from=['stage']|to=B|stage=['S']|detail=[1 2]\r\n")


def test_a_failing_id_drops_only_its_own_event(traced, trace_dir, load_runtime):
    traced.trace_flow(["ok", Unprintable()], ["0", "1"], "A", "B", "S")
    traced.trace_flow("next", "0", "A", "B", "S")
    rows = load_runtime.read_csv(traced, trace_dir)
    assert rows.count(b"\r\n") == 1 and b"next/0" in rows


def test_odd_trace_dir_values(load_runtime):
    runtime = load_runtime()
    runtime.set_trace_dir(b"/some/bytes/path")
    assert runtime.get_trace_dir() == "/some/bytes/path"
    runtime.set_trace_dir(123)
    assert runtime.get_trace_dir() == "123"
    runtime.set_trace_dir(None)
    assert runtime.get_trace_dir() is None


@dataclasses.dataclass
class Timing:
    seconds: float


class Opaque:
    def __str__(self):
        return "<opaque>"


class PydanticLike:
    def model_dump(self):
        return {"generate_sequences": 1.0, "tool_calls": 0.0}


def test_unserializable_agent_metrics_are_converted(traced, trace_dir):
    metrics = {
        "pydantic": PydanticLike(),
        "dataclass": Timing(0.5),
        "array": np.arange(3),
        "np_float": np.float32(2.5),
        "set": {7},
        "opaque": Opaque(),
        "unprintable": Unprintable(),
    }
    store = traced.TrajectoryStore(str(trace_dir / "trajectory"), 1)
    store.write(traced.Trajectory(request_id="0", agent_metrics=metrics))
    store.write(traced.Trajectory(request_id="1", agent_metrics=PydanticLike()))
    store.close()
    (path,) = (trace_dir / "trajectory").glob("*.jsonl")
    first, second = [json.loads(json.loads(line)["raw_message"]) for line in path.read_text().splitlines()]
    assert first["agent_metrics"] == {
        "pydantic": {"generate_sequences": 1.0, "tool_calls": 0.0},
        "dataclass": {"seconds": 0.5},
        "array": [0, 1, 2],
        "np_float": 2.5,
        "set": [7],
        "opaque": "<opaque>",
        "unprintable": "<unserializable Unprintable>",
    }
    assert second["agent_metrics"] == {"generate_sequences": 1.0, "tool_calls": 0.0}


def test_circular_metrics_and_garbage_trajectories_are_dropped_and_counted(traced, trace_dir):
    circular = {}
    circular["self"] = circular
    store = traced.TrajectoryStore(str(trace_dir / "trajectory"), 1)
    store.write(traced.Trajectory(request_id="0", agent_metrics=circular))
    store.write(None)
    store.write("not a trajectory")
    store.write(traced.Trajectory(request_id="ok"))
    store.close()
    (path,) = (trace_dir / "trajectory").glob("*.jsonl")
    assert len(path.read_text().splitlines()) == 1
    assert "unserializable: 3" in store._writer.drop_report()


def test_garbage_into_turn_records_and_tracker(traced):
    record = traced.TurnRecord(5)  # unsized prompt ids
    assert record.turn.prompt_token_count == 0
    record.fill_sglang_response("t", [1], "stop", "not a mapping")
    record.fill_sglang_response("t", [1], "stop", None)
    record.fill_sglang_response("t", [1], "stop", {"e2e_latency": "0.5", "queue_time": "soon"})
    assert record.turn.sglang_time_ms == 500.0 and record.turn.sglang_queue_time_ms is None
    record.fill_sglang_response("t", [1], "stop", {"request_received_ts": "a", "prefill_finished_ts": 1.0})
    assert record.turn.sglang_ttft_ms is None
    record.patch_observation(None, 0, 3)
    record.patch_observation([None, 5, "text", {"role": "tool", "content": 42}], 0, 4)
    assert record.turn.observation_text == "42"
    record.patch_observation([{"role": "tool", "content": "x"}], "a", 1)
    record.turn = None
    record.stamp_end()
    record.mark_skipped()

    tracker = traced.TrajectoryTracker()
    key, traj_uid = tracker.register_trajectory(None)
    assert traj_uid == str(id(None)) and key.endswith(traj_uid)
    tracker.append_turn_record(["unhashable"], record)
    assert tracker.get_turn_records(["unhashable"]) == []
    tracker.unregister_trajectory({})
    assert tracker.build_trajectory(None, ["unhashable"], None, "never", None, None, None).turns == []


# -- bounded queues ------------------------------------------------------------------


def test_full_sample_queue_drops_and_counts_rows(load_runtime, trace_dir, monkeypatch):
    runtime = load_runtime(trace_dir=trace_dir)
    runtime.settings.clock = lambda: 1787215029.123
    batch_bytes = 100 * len(b"ENV_NOTFOUND_DLC_JOB_ID,sample,u/0,RUNNING,1787215029123,from=A|to=B|stage=S\r\n")
    # The bound covers the batch being written too: room for 2.5 batches in all.
    monkeypatch.setattr(runtime.settings, "SAMPLE_QUEUE_MAX_BYTES", int(batch_bytes * 2.5))
    entered, release = gate_writes(runtime, monkeypatch)
    ids = ["0"] * 100
    runtime.trace_flow("u", ids, "A", "B", "S")  # taken by the writer, which then blocks
    assert entered.wait(10)
    runtime.trace_flow("u", ids, "A", "B", "S")  # fits in the queue
    runtime.trace_flow("u", ids, "A", "B", "S")  # does not fit: dropped, counted
    runtime.trace_flow("u", "0", "A", "B", "S")  # small enough to fit
    release.set()
    assert load_runtime.read_csv(runtime, trace_dir).count(b"\r\n") == 201
    assert load_runtime.writer(runtime).drop_report() == (
        "[verl tracing] sample-flow writer dropped 100 row(s) (queue full: 100)"
    )


def test_full_trajectory_queue_drops_and_counts(traced, trace_dir, monkeypatch):
    def trajectory(index):
        return {"request_id": str(index), "initial_prompt_text": "x" * 200}

    raw = json.dumps(trajectory(0))
    line_bytes = len(json.dumps({"prompt_uid": None, "sample_index": None, "raw_message": raw})) + 1
    monkeypatch.setattr(traced.settings, "TRAJECTORY_QUEUE_WAIT_SECONDS", 0.0)
    # Lines of equal length; room for three: the one being written and two queued.
    store = traced.TrajectoryStore(str(trace_dir / "trajectory"), 1, max_queue_bytes=3 * line_bytes)
    entered, release = gate_writes(traced, monkeypatch)
    store.write(trajectory(0))
    assert entered.wait(10)
    for index in range(1, 5):
        store.write(trajectory(index))  # 2 fit, 2 dropped
    release.set()
    store.close(10)
    (path,) = (trace_dir / "trajectory").glob("*.jsonl")
    assert len(path.read_text().splitlines()) == 3
    assert store._writer.drop_report() == "[verl tracing] trajectory writer dropped 2 trajectory(s) (queue full: 2)"


def test_missing_or_blocked_discovery_dir_is_harmless(load_runtime, trace_dir, monkeypatch, tmp_path):
    runtime = load_runtime(trace_dir=trace_dir)
    blocked = tmp_path / "discovery-is-a-file"
    blocked.write_text("x")
    for discovery_dir in (tmp_path / "does-not-exist", blocked):
        monkeypatch.setattr(runtime.settings, "DISCOVERY_DIR", str(discovery_dir))
        runtime.progress._announced = False
        runtime.log_progress("line")
        runtime.TrajectoryStore(str(trace_dir / "trajectory"), 1).close()
    runtime.trace_flow("u", "0", "A", "B", "S")
    assert load_runtime.read_csv(runtime, trace_dir).count(b"\r\n") == 1
    assert blocked.read_text() == "x"


class NullStdout:
    def write(self, text):
        pass

    def flush(self):
        pass


def test_queued_rows_are_bounded_in_encoded_bytes(load_runtime, trace_dir, monkeypatch):
    """Emoji details: 4 bytes each, whatever a character count says; the memory held stays near the bound."""
    runtime = load_runtime(trace_dir=trace_dir)
    runtime.settings.clock = lambda: 1787215029.123
    bound = 1024 * 1024
    monkeypatch.setattr(runtime.settings, "SAMPLE_QUEUE_MAX_BYTES", bound)
    monkeypatch.setattr("sys.stdout", NullStdout())
    entered, release = gate_writes(runtime, monkeypatch)
    runtime.trace_flow("warm-up", "0", "A", "B", "S")  # the writer takes it and blocks
    assert entered.wait(10)
    tracemalloc.start()
    try:
        held_before = tracemalloc.get_traced_memory()[0]
        for _ in range(200):  # ~24 KB of encoded rows per call, ~4.8 MB in all
            runtime.trace_flow("u", ["0"] * 100, "A", "B", "S", detail="\U0001f680" * 40)
        held = tracemalloc.get_traced_memory()[0] - held_before
    finally:
        tracemalloc.stop()
        release.set()
    assert runtime.flush(10)
    assert held < 1.25 * bound
    # Calls are queued while the bytes queued or in flight fit the bound; the rest are dropped whole.
    warm_up = len(b"ENV_NOTFOUND_DLC_JOB_ID,sample,warm-up/0,RUNNING,1787215029123,from=A|to=B|stage=S\r\n")
    row = "ENV_NOTFOUND_DLC_JOB_ID,sample,u/0,RUNNING,1787215029123,from=A|to=B|stage=S|detail=" + "\U0001f680" * 40
    call_bytes = 100 * len((row + "\r\n").encode())
    queued_calls = (bound - warm_up) // call_bytes
    assert load_runtime.writer(runtime).drop_report() == (
        f"[verl tracing] sample-flow writer dropped {(200 - queued_calls) * 100} row(s) "
        f"(queue full: {(200 - queued_calls) * 100})"
    )
