"""Losses are visible while the run goes on: a periodic stderr line and the status file, also in a killed worker."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import tracemalloc

import pytest

STATUS_KEYS = ["schema", "host", "pid", "updated_at", "final", "lost", "written"]

LOSSY_THEN_KILLED = """
    import os, signal, sys, time
    import verl.utils.tracing as tracing
    from verl.utils.tracing import settings

    settings.STATUS_INTERVAL_SECONDS = 0.1
    settings.STDERR_REPORT_INTERVAL_SECONDS = 0.1
    settings.SAMPLE_QUEUE_MAX_BYTES = 1000  # a 100-row batch is larger: dropped whole
    sys.stderr.write("PID %d START %.6f\\n" % (os.getpid(), time.time()))
    for _ in range(3):
        tracing.trace_flow("u", [str(i) for i in range(100)], "A", "B", "S")
    tracing.trace_flow("kept", "1", "A", "B", "S")
    time.sleep(1.5)  # several report intervals
    sys.stderr.write("END %.6f\\n" % time.time())
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)  # no exit hook: only what was reported on the way survives
"""


@pytest.mark.slow
def test_a_killed_worker_has_already_reported_its_losses(script, tmp_path):
    trace_dir = tmp_path / "trace"
    proc, _ = script.run(LOSSY_THEN_KILLED, stdout=subprocess.DEVNULL, VERL_TRACE_DIR=trace_dir)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    pid, start = re.search(r"PID (\d+) START (\S+)", proc.stderr).groups()
    end = float(re.search(r"END (\S+)", proc.stderr).group(1))
    status_path = trace_dir / "status" / f"{socket.gethostname()}-pid{pid}.json"
    reports = [line for line in proc.stderr.splitlines() if line.startswith("[verl tracing]")]
    expected = "[verl tracing] lost since the last report: sample-flow dropped 300 row(s) (queue full: 300); "
    assert reports == [expected + f"counts in {status_path}"]
    status = json.loads(status_path.read_text())
    assert list(status) == STATUS_KEYS
    assert (status["schema"], status["host"], status["pid"], status["final"]) == (
        1,
        socket.gethostname(),
        int(pid),
        False,
    )
    assert float(start) <= status["updated_at"] <= end
    assert status["lost"] == {"sample_flow": {"queue full": 300}, "progress": {}, "trajectory": {}}
    assert set(status["written"]) == {"sample_flow", "progress", "trajectory"}


CLEAN_RUN = """
    import os, sys, time
    import verl.utils.tracing as tracing

    sys.stderr.write("PID %d START %.6f\\n" % (os.getpid(), time.time()))
    tracing.trace_flow("u", ["0", "1", "2"], "A", "B", "S")
    tracing.log_progress("one")
    tracing.log_progress("two")
    store = tracing.TrajectoryStore(tracing.get_trace_dir() + "/trajectory", 1)
    store.write(tracing.Trajectory(request_id="0"))
    store.close(10)
    sys.stderr.write("END %.6f\\n" % time.time())
"""


@pytest.mark.slow
def test_every_tracing_process_leaves_a_final_status_file(script, tmp_path):
    trace_dir = tmp_path / "trace"
    proc, _ = script.run(CLEAN_RUN, stdout=subprocess.DEVNULL, VERL_TRACE_DIR=trace_dir)
    assert proc.returncode == 0, proc.stderr
    pid, start = re.search(r"PID (\d+) START (\S+)", proc.stderr).groups()
    end = float(re.search(r"END (\S+)", proc.stderr).group(1))
    assert "[verl tracing]" not in proc.stderr
    status = json.loads((trace_dir / "status" / f"{socket.gethostname()}-pid{pid}.json").read_text())
    updated_at = status.pop("updated_at")
    assert float(start) <= updated_at and updated_at - end < 5.0
    assert status == {
        "schema": 1,
        "host": socket.gethostname(),
        "pid": int(pid),
        "final": True,
        "lost": {"sample_flow": {}, "progress": {}, "trajectory": {}},
        "written": {"sample_flow": 3, "progress": 2, "trajectory": 1},
    }
    assert [path.name for path in (trace_dir / "status").iterdir()] == [f"{socket.gethostname()}-pid{pid}.json"]


def test_a_process_that_traced_nothing_writes_no_status(script, tmp_path):
    trace_dir = tmp_path / "trace"
    proc, _ = script.run("import verl.utils.tracing", VERL_TRACE_DIR=trace_dir)
    assert proc.returncode == 0, proc.stderr
    assert not (trace_dir / "status").exists()


class Unprintable:
    def __str__(self):
        raise RuntimeError("no str")

    __repr__ = __format__ = __str__


class BadLength(list):
    def __len__(self):
        raise RuntimeError("no len")


def test_format_failures_and_progress_write_errors_are_counted(traced, trace_dir):
    trace_dir.mkdir()
    (trace_dir / "progress").write_text("a file where the progress folder belongs")
    traced.trace_flow(["ok", Unprintable()], ["0", "1"], "A", "B", "S")  # two rows, one unprintable id
    traced.trace_flow(BadLength(["a"]), "0", "A", "B", "S")  # how many rows it held cannot be told: one
    traced.log_progress(Unprintable())
    traced.log_progress("first")
    traced.log_progress("second")
    store = traced.TrajectoryStore(str(trace_dir / "trajectory"), 1)
    store.write(object())
    assert store.close(10) and traced.flush(10)
    assert traced.losses.status()["lost"] == {
        "sample_flow": {"format error": 3},
        "progress": {"format error": 1, "write error": 2},
        "trajectory": {"unserializable": 1},
    }


@pytest.mark.slow
def test_exit_report_covers_every_facility(script, tmp_path):
    trace_dir = tmp_path / "trace"
    trace_dir.mkdir()
    (trace_dir / "progress").write_text("a file where the progress folder belongs")
    code = """
        import verl.utils.tracing as tracing
        tracing.log_progress("lost line")
        tracing.trace_flow("u", "0", "A", "B", "S")
    """
    proc, _ = script.run(code, stdout=subprocess.DEVNULL, VERL_TRACE_DIR=trace_dir)
    assert proc.returncode == 0, proc.stderr
    reports = [line for line in proc.stderr.splitlines() if line.startswith("[verl tracing]")]
    assert reports == ["[verl tracing] progress writer dropped 1 line(s) (write error: 1)"]


def test_counting_a_long_run_holds_no_memory_per_record(traced, trace_dir):
    for _ in range(2000):  # warm up: the first folds allocate the totals
        traced.losses.count_written("progress", 1)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(100_000):
            traced.losses.count_written("progress", 1)
            traced.losses.count_lost("sample_flow", "queue full", 2, report=False)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held < 256 * 1024  # a deque entry per record would be ~15 MB here
    status = traced.losses.status()
    assert status["written"]["progress"] == 102_000 and status["lost"]["sample_flow"] == {"queue full": 200_000}
