"""What interrupts a call is the caller's: a signal handler's exception reaches it, every time, and
leaves the runtime usable; only the tracing's own failures are counted and kept from the caller.

The watchdog test runs real ``setitimer`` alarms in a subprocess. The sweep tests raise an
exception in-process at every point of a call where CPython could run a signal handler, one run
after another (see ``Sweep``): wherever it lands, it reaches the caller, and the next call is
written, not shut out as re-entrant nor stuck behind a lock.
"""

from __future__ import annotations

import functools
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

WATCHDOG = """
    import faulthandler, json, signal, sys, time
    import verl.utils.tracing as tracing

    faulthandler.dump_traceback_later(120, exit=True)  # a hang dumps every stack and fails
    ALARMS, TRIES = 40, 60

    def busy(seconds):
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass

    class Slow:  # formatted by the runtime, slowly: the alarm lands inside the call
        def __format__(self, spec):
            busy(0.0005)
            return "slow"

        __str__ = lambda self: format(self)

    class Broken:  # a caller's value the tracing cannot format: counted, never raised
        def __format__(self, spec):
            raise ValueError("no text")

        __str__ = lambda self: format(self)

    fired = [0]

    def watchdog(signum, frame):
        fired[0] += 1
        raise TimeoutError("step took too long")

    signal.signal(signal.SIGALRM, watchdog)
    store = tracing.TrajectoryStore(sys.argv[1], 0)
    entries = [
        lambda: tracing.trace_flow([Slow()] * 8, "0", "A", "B", "S"),
        lambda: tracing.log_progress(Slow()),
        lambda: store.write({"prompt_uid": "p", "sample_index": 0, "turns": [Slow()] * 8}),
    ]
    reached = []
    for alarm in range(ALARMS):
        try:  # armed inside the try: on a loaded machine the alarm may fire before the first call
            signal.setitimer(signal.ITIMER_REAL, 0.0003 + 0.0001 * (alarm % 13))
            for _ in range(TRIES):
                entries[alarm % len(entries)]()
        except TimeoutError as exc:
            reached.append(str(exc) == "step took too long")
        signal.setitimer(signal.ITIMER_REAL, 0)
        tracing.trace_flow(Broken(), "0", "A", "B", "S")
        tracing.log_progress(Broken())
    for step in range(1000):
        tracing.trace_flow("after", str(step), "A", "B", "S")
    for step in range(100):
        tracing.log_progress(f"after {step}")
    assert tracing.flush(30) and store.close(30)
    sys.stderr.write("RESULT " + json.dumps({"fired": fired[0], "reached": reached}) + "\\n")
"""


@pytest.mark.slow
def test_every_watchdog_alarm_reaches_the_caller_and_tracing_goes_on(script, tmp_path):
    trace_dir = tmp_path / "trace"
    proc, _ = script.run(
        WATCHDOG.replace("sys.argv[1]", repr(str(tmp_path / "store"))),
        timeout=150,
        stdout=subprocess.DEVNULL,
        VERL_TRACE_DIR=trace_dir,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(re.search(r"RESULT (.*)", proc.stderr).group(1))
    assert result == {"fired": 40, "reached": [True] * 40}
    (csv_file,) = (trace_dir / "sample").iterdir()
    after = [row for row in csv_file.read_bytes().splitlines() if b",after/" in row]
    assert len(after) == 1000  # no call was shut out as re-entrant after an interruption
    (progress_file,) = (trace_dir / "progress").iterdir()
    lines = progress_file.read_text().splitlines()
    assert [line for line in lines if line.startswith("after ")] == [f"after {step}" for step in range(100)]
    (status_file,) = (trace_dir / "status").iterdir()
    lost = json.loads(status_file.read_text())["lost"]
    # the 40 broken values, each one row and one line; nothing counted for an interrupted call
    assert lost == {"sample_flow": {"format error": 40}, "progress": {"format error": 40}, "trajectory": {}}


# -- every interruption point, in-process -------------------------------------------------


class Interrupted(Exception):
    """What the sweep's "signal handler" raises; an Exception, so the runtime's handlers see it."""


class Sweep:
    """Raise ``Interrupted`` at the ``target``-th point of a runtime call where a handler could run.

    CPython runs a signal handler when a function starts and right after a call returns (and on a
    loop's jump back): here the profiler's ``call`` event of any function called in or by the
    runtime, and its ``return``/``c_return`` events back into a runtime frame (the exception then
    comes out of that frame's call, as a handler's does). The profile function is registered as
    the handler of SIGUSR2 (never sent) for the sweep, so its frame in the traceback of what it
    raises marks that exception as a handler's, as a real handler's frame does.
    """

    def __init__(self, runtime_dir: Path, target: int):
        self.runtime_dir = runtime_dir
        self.target = target
        self.events = 0

    def _in_runtime(self, frame) -> bool:
        return frame is not None and frame.f_code.co_filename.startswith(self.runtime_dir)

    def __call__(self, frame, event, arg):
        if event == "c_return":
            point = self._in_runtime(frame)
        elif event == "call":
            point = self._in_runtime(frame) or self._in_runtime(frame.f_back)
        elif event == "return":
            point = self._in_runtime(frame.f_back)
        else:
            point = False
        if point:
            self.events += 1
            if self.events == self.target:
                raise Interrupted(self.target)


def sweep(runtime, call, check):
    """Interrupt ``call()`` at each of its events in turn; after each, ``check()`` must hold."""
    runtime_dir = str(Path(runtime.__file__).parent)
    previous = signal.signal(signal.SIGUSR2, Sweep.__call__)
    try:
        target = 1
        while True:
            tracer = Sweep(runtime_dir, target)
            sys.setprofile(tracer)
            try:
                call()
            except Interrupted as exc:
                assert exc.args == (target,)
            else:
                if tracer.events < target:  # the call ran to its end: every point was tried
                    return target - 1
                pytest.fail(f"the exception raised at event {target} did not reach the caller")
            finally:
                sys.setprofile(None)
            check(target)
            target += 1
    finally:
        signal.signal(signal.SIGUSR2, previous)


def test_trace_flow_interrupted_anywhere_raises_and_the_next_call_is_written(traced, trace_dir, load_runtime):
    written = []

    def next_call_is_written(target):
        traced.trace_flow("next", str(target), "A", "B", "S")
        assert traced.losses.status()["lost"]["sample_flow"] == {}, f"after the exception at point {target}"
        written.append(target)

    points = sweep(traced, lambda: traced.trace_flow(["u1", "u2"], ["0", "1"], "A", "B", "S"), next_call_is_written)
    assert points > 50  # the sweep went through the whole call, not just its first lines
    rows = load_runtime.read_csv(traced, trace_dir).splitlines()
    assert [row.split(b",")[2] for row in rows if b",next/" in row] == [f"next/{t}".encode() for t in written]
    assert "re-entrant call" not in traced.losses.status()["lost"]["sample_flow"]


def test_log_progress_interrupted_anywhere_raises_and_the_next_line_is_written(traced, trace_dir):
    written = []

    def next_line_is_written(target):
        traced.log_progress(f"next {target}")
        assert traced.losses.status()["lost"]["progress"] == {}, f"after the exception at point {target}"
        written.append(target)

    points = sweep(traced, lambda: traced.log_progress("interrupted"), next_line_is_written)
    assert points > 20
    (progress_file,) = (trace_dir / "progress").iterdir()
    lines = progress_file.read_text().splitlines()
    assert [line for line in lines if line.startswith("next ")] == [f"next {t}" for t in written]
    lost = traced.losses.status()["lost"]["progress"]
    assert "re-entrant call" not in lost and "lock timeout" not in lost


def test_a_format_failure_is_counted_not_raised_while_a_handler_is_registered(traced, trace_dir):
    class Broken:
        def __format__(self, spec):
            raise TimeoutError("a TimeoutError of the caller's value, not of a handler")

        __str__ = lambda self: format(self)

    previous = signal.signal(signal.SIGUSR2, lambda signum, frame: None)
    try:
        traced.trace_flow(Broken(), "0", "A", "B", "S")
        traced.log_progress(Broken())
    finally:
        signal.signal(signal.SIGUSR2, previous)
    lost = traced.losses.status()["lost"]
    assert lost["sample_flow"] == {"format error": 1} and lost["progress"] == {"format error": 1}


class Watchdog:
    def __call__(self, signum, frame):
        raise TimeoutError("callable object")

    def method(self, signum, frame):
        raise TimeoutError("bound method")


def raise_timeout(signum, frame, what="function"):
    raise TimeoutError(what)


HANDLERS = {
    "function": raise_timeout,
    "partial": functools.partial(raise_timeout, what="partial"),
    "callable object": Watchdog(),
    "bound method": Watchdog().method,
    "lambda calling a function": lambda signum, frame: raise_timeout(signum, frame, "lambda calling a function"),
}


@pytest.mark.parametrize("shape", sorted(HANDLERS))
@pytest.mark.parametrize("entry", ["trace_flow", "log_progress", "store"])
def test_a_real_signal_inside_a_call_reaches_the_caller_whatever_the_handler(traced, trace_dir, shape, entry):
    class SignalsWhileFormatted:  # the handler runs right after os.kill returns: inside the runtime's call
        def __format__(self, spec):
            os.kill(os.getpid(), signal.SIGUSR2)
            return "never"

        __str__ = lambda self: format(self)

    calls = {
        "trace_flow": lambda: traced.trace_flow(SignalsWhileFormatted(), "0", "A", "B", "S"),
        "log_progress": lambda: traced.log_progress(SignalsWhileFormatted()),
        "store": lambda: traced.TrajectoryStore(str(trace_dir / "store"), 0).write({"x": SignalsWhileFormatted()}),
    }
    previous = signal.signal(signal.SIGUSR2, HANDLERS[shape])
    try:
        with pytest.raises(TimeoutError, match=f"^{shape}$"):
            calls[entry]()
    finally:
        signal.signal(signal.SIGUSR2, previous)
    assert traced.losses.status()["lost"] == {"sample_flow": {}, "progress": {}, "trajectory": {}}
