"""Standard streams: whole stdout lines under concurrency, trace files never on fds 0-2, fork-safe echo."""

from __future__ import annotations

import re
import socket

import pytest

FLOW_LINE = re.compile(
    r"\[FLOW_TRACE\] \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d \| uid=t\d \| traj_uid=[012] \| from=A \| to=B \| stage=S"
)
PROGRESS_LINE = re.compile(r"progress t\d \d+")

CONCURRENT_ECHOES = """
    import threading
    import verl.utils.tracing as tracing

    def work(k):
        for i in range(100):
            tracing.trace_flow("t%d" % k, ["0", "1", "2"] * 70, "A", "B", "S")  # one write of ~15 KB
            tracing.log_progress("progress t%d %d" % (k, i))  # a small write, then a flush
            tracing.trace_flow("t%d" % k, "0", "A", "B", "S")

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert tracing.flush(30)
"""


def test_concurrent_echoes_on_a_pipe_keep_every_line_whole(script, tmp_path):
    """Four threads echoing to a pipe: CPython's text stream loses and mangles lines unless writes are serialised."""
    proc, _ = script.run(CONCURRENT_ECHOES, VERL_TRACE_DIR=tmp_path / "trace")  # stdout is a pipe
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    flow = [line for line in lines if FLOW_LINE.fullmatch(line)]
    progress = [line for line in lines if PROGRESS_LINE.fullmatch(line)]
    assert (len(flow), len(progress), len(lines)) == (4 * 100 * 211, 4 * 100, 4 * 100 * 212)


CLOSED_STANDARD_FDS = """
    import os, sys
    import verl.utils.tracing as tracing

    sys.stdout.flush()
    sys.stderr.flush()
    for fd in (0, 1, 2):
        os.close(fd)
    tracing.trace_flow("u", ["0", "1"], "A", "B", "S")
    tracing.log_progress("progress line")
    store = tracing.TrajectoryStore(tracing.get_trace_dir() + "/trajectory", 1)
    store.write(tracing.Trajectory(request_id="0"))
    ok = tracing.flush(10) and store.flush(10)
    for fd in (0, 1, 2):  # whatever else the process prints now
        try:
            os.write(fd, b"STRAY\\n")
        except OSError:
            pass
    ok = store.close(10) and ok
    os._exit(0 if ok else 1)
"""


def test_trace_files_never_take_a_closed_standard_descriptor(script, tmp_path):
    trace_dir = tmp_path / "trace"
    proc, _ = script.run(CLOSED_STANDARD_FDS, VERL_TRACE_DIR=trace_dir)
    assert proc.returncode == 0
    (csv_file,) = (trace_dir / "sample").iterdir()
    assert [row.split(b",")[2] for row in csv_file.read_bytes().splitlines()] == [b"u/0", b"u/1"]
    (progress_file,) = (trace_dir / "progress").iterdir()
    assert progress_file.read_text() == "progress line\n"
    (jsonl_file,) = (trace_dir / "trajectory").iterdir()
    assert len(jsonl_file.read_bytes().splitlines()) == 1
    assert not [path for path in trace_dir.rglob("*") if path.is_file() and b"STRAY" in path.read_bytes()]


FORK_WHILE_ECHOING = """
    import os, sys, threading, time
    import verl.utils.tracing as tracing
    from verl.utils.tracing import process, settings

    if not {hook}:  # simulate a fork that bypasses os.register_at_fork's child hook
        process._at_fork_in_child = lambda: None
    settings.LOCK_TIMEOUT_SECONDS = 0.2
    parent_pid = os.getpid()
    entered, release = threading.Event(), threading.Event()
    real_stdout = sys.stdout

    class StuckInTheParent:
        encoding = "utf-8"

        def write(self, text):
            if os.getpid() == parent_pid and "uid=stuck" in text:
                entered.set()
                release.wait(30)
            return real_stdout.write(text)

        def flush(self):
            real_stdout.flush()

        def fileno(self):
            return real_stdout.fileno()

    sys.stdout = StuckInTheParent()
    threading.Thread(target=tracing.trace_flow, args=("stuck", "0", "A", "B", "S"), daemon=True).start()
    assert entered.wait(10)  # a parent thread is now mid-echo, holding the runtime's stdout lock
    real_stdout.flush()

    child = os.fork()
    if child == 0:
        tracing.trace_flow("child", "0", "A", "B", "S")
        tracing.log_progress("child progress")
        os._exit(0 if tracing.flush(5) else 1)

    started = time.monotonic()
    while True:
        done, status = os.waitpid(child, os.WNOHANG)
        if done:
            break
        if time.monotonic() - started > 2.0:
            os.kill(child, 9)
            os.waitpid(child, 0)
            print("CHILD_HUNG", flush=True)
            sys.exit(3)
        time.sleep(0.01)
    release.set()
    time.sleep(0.2)  # the stuck echo finishes
    assert tracing.flush(10)
    sys.stdout = real_stdout
    print("\\nCHILD", child, os.waitstatus_to_exitcode(status), flush=True)
"""


@pytest.mark.parametrize("hook", [True, False], ids=["at-fork-hook", "pid-check-only"])
def test_a_child_forked_mid_echo_never_waits_on_the_inherited_lock(script, tmp_path, hook):
    trace_dir = tmp_path / "trace"
    proc, _ = script.run(FORK_WHILE_ECHOING.replace("{hook}", str(hook)), VERL_TRACE_DIR=trace_dir)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    child_pid, child_exit = re.search(r"^CHILD (\d+) (-?\d+)$", proc.stdout, re.MULTILINE).groups()
    assert child_exit == "0"
    assert "uid=child | traj_uid=0" in proc.stdout and "child progress\n" in proc.stdout
    assert "uid=stuck | traj_uid=0" in proc.stdout
    child_csv = trace_dir / "sample" / f"{socket.gethostname()}-pid{child_pid}.csv"
    assert [row.split(b",")[2] for row in child_csv.read_bytes().splitlines()] == [b"child/0"]
