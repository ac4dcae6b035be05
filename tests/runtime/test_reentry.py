"""Re-entrant calls (a signal handler that traces, a __str__ that logs) never block and never vanish."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

SIGNAL_STORM = """
    import faulthandler, os, signal, sys, time
    import verl.utils.tracing as tracing

    faulthandler.dump_traceback_later(45, exit=True)  # watchdog: a hang dumps every stack and fails
    handled = [0]

    def on_timer(signum, frame):
        handled[0] += 1
        tracing.trace_flow("handler", ["0", "1"], "Timer", "Disk", "S")
        tracing.log_progress("from the handler")

    signal.signal(signal.SIGALRM, on_timer)
    signal.setitimer(signal.ITIMER_REAL, 0.002, 0.002)
    calls = 0
    end = time.monotonic() + 4.0
    while time.monotonic() < end:
        tracing.trace_flow("main", ["0", "1", "2"], "Loop", "Disk", "S")
        tracing.log_progress("from the loop")
        calls += 1
    signal.setitimer(signal.ITIMER_REAL, 0, 0)
    assert tracing.flush(30)
    sys.stderr.write("COUNTS %d %d\\n" % (calls, handled[0]))
"""


@pytest.mark.slow
def test_a_signal_handler_that_traces_never_deadlocks_and_loses_nothing_silently(script, tmp_path):
    trace_dir = tmp_path / "trace"
    proc, _ = script.run(SIGNAL_STORM, timeout=90, stdout=subprocess.DEVNULL, VERL_TRACE_DIR=trace_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    calls, handled = map(int, re.search(r"COUNTS (\d+) (\d+)", proc.stderr).groups())
    assert calls > 0 and handled > 0
    (csv_file,) = (trace_dir / "sample").iterdir()
    uids = [row.split(b",")[2].split(b"/")[0] for row in csv_file.read_bytes().splitlines()]
    (progress_file,) = (trace_dir / "progress").iterdir()
    lines = progress_file.read_text().splitlines()
    (status_file,) = (trace_dir / "status").iterdir()
    lost = json.loads(status_file.read_text())["lost"]
    # The loop's own calls are never re-entrant: all written.
    assert uids.count(b"main") == 3 * calls and lines.count("from the loop") == calls
    # A handler's call is written, or dropped and counted when it interrupted one of ours.
    assert uids.count(b"handler") + lost["sample_flow"].get("re-entrant call", 0) == 2 * handled
    assert lines.count("from the handler") + lost["progress"].get("re-entrant call", 0) == handled
    assert set(lost["sample_flow"]) <= {"re-entrant call"} and set(lost["progress"]) <= {"re-entrant call"}


def test_a_str_that_traces_is_counted_not_deadlocked(traced, trace_dir, load_runtime):
    class Chatty:
        def __format__(self, spec):
            traced.trace_flow("inner", "0", "A", "B", "S")  # re-enters while the outer call formats
            traced.log_progress("inner progress")
            return "chatty"

    traced.trace_flow(Chatty(), ["0", "1"], "A", "B", "S")
    rows = load_runtime.read_csv(traced, trace_dir)
    assert [row.split(b",")[2] for row in rows.splitlines()] == [b"chatty/0", b"chatty/1"]
    lost = traced.losses.status()["lost"]
    assert lost["sample_flow"] == {"re-entrant call": 2} and lost["progress"] == {"re-entrant call": 2}
