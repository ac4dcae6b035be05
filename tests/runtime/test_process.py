"""Process-level behaviour, each in its own interpreter: fork safety, exit flush, drop report.

The only timing assertions are the 2-second bounds the runtime promises.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess

import pytest

END_MARK = re.compile(r"END_OF_SCRIPT (\d+\.\d+)")


def seconds_from_script_end_to_exit(proc, ended_at):
    """time.monotonic() is system-wide on Linux, so the child's stamp is comparable."""
    match = END_MARK.search(proc.stderr)
    assert match, proc.stderr
    return ended_at - float(match.group(1))


def csv_rows(trace_dir, pid):
    path = trace_dir / "sample" / f"{socket.gethostname()}-pid{pid}.csv"
    return path.read_bytes().splitlines() if path.exists() else []


FORK_WHILE_WRITER_IS_BUSY = """
    import os, sys, threading, time
    import verl.utils.tracing as tracing
    from verl.utils.tracing import files, process

    AT_FORK_HOOK = {hook}
    CHILD_STARTS_WITH = "{first}"
    if not AT_FORK_HOOK:  # simulate a fork that bypasses os.register_at_fork
        process._at_fork_in_child = lambda: None

    parent_pid = os.getpid()
    entered, release = threading.Event(), threading.Event()
    real_write_all = files.write_all

    progress_entered, store_entered = threading.Event(), threading.Event()

    def gated_write_all(fd, data):  # only the parent's CSV and progress writes block
        if os.getpid() == parent_pid:
            gates = ((b"ENV_NOTFOUND", entered), (b"parent progress", progress_entered),
                     (b'{"prompt_uid": "parent', store_entered))
            for prefix, event in gates:
                if data.startswith(prefix):
                    event.set()
                    release.wait(30)
        real_write_all(fd, data)

    files.write_all = gated_write_all
    tracing.trace_flow("parent", ["0", "1"], "A", "B", "S")
    assert entered.wait(10), "writer never started"
    tracing.trace_flow("parent", ["2", "3"], "A", "B", "S")  # still queued at fork time
    # A parent thread is inside a progress-file write, holding the progress lock.
    progress_thread = threading.Thread(target=tracing.log_progress, args=("parent progress",), daemon=True)
    progress_thread.start()
    assert progress_entered.wait(10)
    store = tracing.TrajectoryStore(tracing.get_trace_dir() + "/trajectory", 1)
    store.write(tracing.Trajectory(request_id="0", prompt_uid="parent"))  # blocks the store's writer
    assert store_entered.wait(10)
    store.write(tracing.Trajectory(request_id="1", prompt_uid="parent"))  # queued at fork time
    sys.stdout.flush()

    child = os.fork()
    if child == 0:
        # With the hook, state is reset eagerly, before any tracing call.
        inherited = process._pid != os.getpid()
        assert inherited != AT_FORK_HOOK, "at-fork reset did not behave as configured"
        # Each call first in its own fork so none relies on another's reset.
        if CHILD_STARTS_WITH == "store":
            store.write(tracing.Trajectory(request_id="0", prompt_uid="child"))
        tracing.log_progress("child progress")
        tracing.trace_flow("child", ["0"], "A", "B", "S")
        if CHILD_STARTS_WITH != "store":
            store.write(tracing.Trajectory(request_id="0", prompt_uid="child"))
        sys.exit(0)  # normal exit: the child's atexit flush runs

    started = time.monotonic()
    while True:
        done, status = os.waitpid(child, os.WNOHANG)
        if done:
            break
        if time.monotonic() - started > 2.0:
            os.kill(child, 9)
            os.waitpid(child, 0)
            print("CHILD_HUNG")
            sys.exit(3)
        time.sleep(0.01)
    release.set()
    print("CHILD", child, os.waitstatus_to_exitcode(status), flush=True)
    progress_thread.join(10)
    assert tracing.flush(10) and store.close(10)
"""


@pytest.mark.parametrize("first", ["store", "progress"])
@pytest.mark.parametrize("hook", [True, False], ids=["at-fork-hook", "pid-check-only"])
def test_fork_while_writers_are_busy(script, tmp_path, hook, first):
    trace_dir = tmp_path / "trace"
    code = FORK_WHILE_WRITER_IS_BUSY.replace("{hook}", str(hook)).replace("{first}", first)
    proc, _ = script.run(code, VERL_TRACE_DIR=trace_dir)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    child_line = next(line for line in proc.stdout.splitlines() if line.startswith("CHILD"))
    _, child_pid, child_exit = child_line.split()
    assert child_exit == "0", proc.stderr
    child_rows = csv_rows(trace_dir, int(child_pid))
    assert [row.split(b",")[2] for row in child_rows] == [b"child/0"]  # none of the parent's queued rows
    child_file_name = f"{socket.gethostname()}-pid{child_pid}.csv"
    (parent_file,) = [path for path in (trace_dir / "sample").iterdir() if path.name != child_file_name]
    assert [row.split(b",")[2] for row in parent_file.read_bytes().splitlines()] == [
        b"parent/0",
        b"parent/1",
        b"parent/2",
        b"parent/3",
    ]
    (progress_file,) = (trace_dir / "progress").iterdir()
    assert sorted(progress_file.read_text().splitlines()) == ["child progress", "parent progress"]
    trajectory_files = sorted(
        [
            (json.loads(json.loads(line)["raw_message"])["request_id"], json.loads(line)["prompt_uid"])
            for line in path.read_text().splitlines()
        ]
        for path in (trace_dir / "trajectory").iterdir()
    )
    assert trajectory_files == [[("0", "child")], [("0", "parent"), ("1", "parent")]]


@pytest.mark.slow
def test_exit_flushes_queued_rows_within_two_seconds(script, tmp_path):
    trace_dir = tmp_path / "trace"
    code = """
        import sys, time
        import verl.utils.tracing as tracing
        for batch in range(50):
            tracing.trace_flow("u%d" % batch, [str(i) for i in range(1000)], "A", "B", "S")
        store = tracing.TrajectoryStore(tracing.get_trace_dir() + "/trajectory", 1)
        for i in range(500):
            store.write(tracing.Trajectory(request_id=str(i)))
        sys.stderr.write("END_OF_SCRIPT %.6f\\n" % time.monotonic())
    """
    proc, ended_at = script.run(code, stdout=subprocess.DEVNULL, VERL_TRACE_DIR=trace_dir)
    assert proc.returncode == 0, proc.stderr
    assert seconds_from_script_end_to_exit(proc, ended_at) < 2.0
    (csv_file,) = (trace_dir / "sample").iterdir()
    assert csv_file.read_bytes().count(b"\r\n") == 50_000
    (jsonl_file,) = (trace_dir / "trajectory").iterdir()
    assert len(jsonl_file.read_bytes().splitlines()) == 500
    assert "[verl tracing]" not in proc.stderr  # nothing dropped, nothing reported


@pytest.mark.slow
def test_exit_is_bounded_even_when_the_disk_hangs(script, tmp_path):
    code = """
        import sys, threading, time
        import verl.utils.tracing as tracing
        from verl.utils.tracing import files
        files.write_all = lambda fd, data: threading.Event().wait()  # a write that never returns
        tracing.trace_flow("u", [str(i) for i in range(10)], "A", "B", "S")
        sys.stderr.write("END_OF_SCRIPT %.6f\\n" % time.monotonic())
    """
    proc, ended_at = script.run(code, stdout=subprocess.DEVNULL, VERL_TRACE_DIR=tmp_path / "trace")
    assert proc.returncode == 0, proc.stderr
    assert seconds_from_script_end_to_exit(proc, ended_at) < 2.0
    assert "[verl tracing] sample-flow writer dropped 10 row(s) (not flushed at exit: 10)\n" in proc.stderr


@pytest.mark.slow
def test_dropped_rows_are_reported_once_on_stderr(script, tmp_path):
    trace_dir = tmp_path / "trace"
    code = """
        import verl.utils.tracing as tracing
        from verl.utils.tracing import settings
        settings.SAMPLE_QUEUE_MAX_BYTES = 2000
        tracing.trace_flow("big", [str(i) for i in range(100)], "A", "B", "S")  # > 2000 chars: dropped
        tracing.trace_flow("small", "1", "A", "B", "S")
        tracing.trace_flow("big", [str(i) for i in range(30)], "A", "B", "S")  # dropped too
    """
    proc, _ = script.run(code, stdout=subprocess.DEVNULL, VERL_TRACE_DIR=trace_dir)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "[verl tracing] sample-flow writer dropped 130 row(s) (queue full: 130)\n"
    (csv_file,) = (trace_dir / "sample").iterdir()
    assert csv_file.read_bytes().splitlines()[0].split(b",")[2] == b"small/1"
    assert csv_file.read_bytes().count(b"\r\n") == 1


@pytest.mark.slow
def test_explicit_flush_before_os_exit(script, tmp_path):
    trace_dir = tmp_path / "trace"
    code = """
        import os
        import verl.utils.tracing as tracing
        tracing.trace_flow("u", [str(i) for i in range(5000)], "A", "B", "S")
        store = tracing.TrajectoryStore(tracing.get_trace_dir() + "/trajectory", 1)
        store.write(tracing.Trajectory(request_id="0"))
        os._exit(0 if tracing.flush(timeout=10) else 1)
    """
    proc, _ = script.run(code, stdout=subprocess.DEVNULL, VERL_TRACE_DIR=trace_dir)
    assert proc.returncode == 0, proc.stderr
    (csv_file,) = (trace_dir / "sample").iterdir()
    assert csv_file.read_bytes().count(b"\r\n") == 5000
    (jsonl_file,) = (trace_dir / "trajectory").iterdir()
    assert len(jsonl_file.read_bytes().splitlines()) == 1


@pytest.mark.slow
def test_multiprocessing_fork_children_get_their_own_files(script, tmp_path):
    trace_dir = tmp_path / "trace"
    code = """
        import multiprocessing, os
        import verl.utils.tracing as tracing

        def work(tag):
            tracing.trace_flow(tag, "0", "A", "B", "S")

        if __name__ == "__main__":
            tracing.trace_flow("parent", "0", "A", "B", "S")
            context = multiprocessing.get_context("fork")
            workers = [context.Process(target=work, args=("child%d" % i,)) for i in range(3)]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join(10)
            assert [worker.exitcode for worker in workers] == [0, 0, 0]
            assert tracing.flush(10)
    """
    proc, _ = script.run(code, stdout=subprocess.DEVNULL, VERL_TRACE_DIR=trace_dir)
    assert proc.returncode == 0, proc.stderr
    files = list((trace_dir / "sample").iterdir())
    assert len(files) == 4
    ids = sorted(row.split(b",")[2] for path in files for row in path.read_bytes().splitlines())
    assert ids == [b"child0/0", b"child1/0", b"child2/0", b"parent/0"]
    assert all(path.read_bytes().count(b"\r\n") == 1 for path in files)
