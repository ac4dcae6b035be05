"""A run ends whole: killed (SIGKILL, SIGHUP) or interrupted (SIGINT, SIGTERM) at any moment, it leaves no
worker process behind and no lock that blocks the next run. Real command-line runs on verl 0.9.0,
real signals at random delays; the processes of a run are found by a marker in their command line
(the checkout's path: forked workers keep their parent's)."""

from __future__ import annotations

import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest
from support import copy_tree, tree_bytes

from trace_instrument.engine.apply import apply
from trace_instrument.engine.files import LOCK_NAME, checkout_lock
from trace_instrument.engine.parallel import WORKERS_ENV

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

ROUNDS = 20
ENDS_WITHIN = 3.0  # seconds from an interrupt to the end of the run, its workers included
# the earliest signal: the interpreter has started the tool's entry point (tens of milliseconds), which
# catches the stop signals before it loads the command line
EARLIEST = 0.3


def _processes_with(marker: str) -> list[int]:
    """Live processes (zombies left out) whose command line holds the marker."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker.encode() in (entry / "cmdline").read_bytes() and _state(entry) != "Z":
                found.append(int(entry.name))
        except OSError:
            continue  # ended while we looked
    return found


def _state(entry: Path) -> str:
    return (entry / "stat").read_text().rpartition(")")[2].split()[0]


def _gone_within(marker: str, seconds: float) -> list[int]:
    """The marked processes still alive after waiting up to `seconds` for them to end."""
    deadline = time.monotonic() + seconds
    while (left := _processes_with(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def _kill_all(pids: list[int]) -> None:
    for pid in pids:  # the test's own leftovers, by pid, so a failure does not leak them
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _start(root: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, WORKERS_ENV: "2"}  # a pool even on a machine of one core
    command = [sys.executable, "-m", "trace_instrument", "apply", str(root), *args]
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _pool_phase(root: Path, marker: str, verl: Path) -> tuple[float, float]:
    """When, in a whole apply here, its workers start and how long they run: the window the signals
    aim at, at random. Measured as the rounds run it (a real apply from the released tree), three
    times, the median of each: one measurement on a machine whose load changes misplaces the window."""
    firsts, lengths = [], []
    for _ in range(3):
        _pristine_again(root, verl)
        started = time.monotonic()
        process = _start(root)
        first = last = 0.0
        while process.poll() is None:
            if len(_processes_with(marker)) > 1:
                first = first or time.monotonic() - started
                last = time.monotonic() - started
            time.sleep(0.01)
        process.communicate(timeout=300)
        assert first, "the run started no workers"
        firsts.append(first)
        lengths.append(last - first)
    return statistics.median(firsts), statistics.median(lengths)


def _pristine_again(root: Path, verl: Path) -> None:
    """A run that got as far as writing its manifest made the tree instrumented, where the analysis
    is quicker: the next round starts from verl as released again, as the window was measured."""
    if (root / ".trace-instrument.json").exists():
        shutil.rmtree(root)
        copy_tree(verl, root)


def _delay(phase: tuple[float, float]) -> float:
    """A random moment: three in four while the workers run, the others anywhere in the run."""
    first, length = phase
    if random.random() < 0.75:
        return first + random.uniform(0, length)
    return random.uniform(EARLIEST, first + length + 0.5)


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGHUP])
def test_a_killed_run_leaves_no_workers_and_no_lock(verl_090, tmp_path, catalog, signum):
    marker = f"orphans-{uuid.uuid4().hex[:12]}"
    root = copy_tree(verl_090, tmp_path / marker)
    phase = _pool_phase(root, marker, verl_090)
    random.seed(signum)
    with_workers = 0
    for round_number in range(ROUNDS):
        _pristine_again(root, verl_090)
        process = _start(root)
        time.sleep(_delay(phase))
        with_workers += len(_processes_with(marker)) > 1  # the kill lands while the pool runs
        process.send_signal(signum)
        process.communicate(timeout=60)
        left = _gone_within(marker, 2.0)
        _kill_all(left)
        assert not left, f"round {round_number}: {len(left)} processes outlived the run killed by {signum.name}"
        with checkout_lock(root):  # what every later run takes first
            pass
    assert with_workers >= ROUNDS // 2, f"only {with_workers} of {ROUNDS} kills landed while workers ran"
    reference = copy_tree(verl_090, tmp_path / "reference")
    assert apply(reference, catalog).written
    finished = _start(root)
    _, stderr = finished.communicate(timeout=300)
    assert finished.returncode == 0, stderr
    assert tree_bytes(root) == tree_bytes(reference)
    assert not (root / LOCK_NAME).exists()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_every_interrupt_ends_the_run_and_its_workers_within_seconds(verl_090, tmp_path, signum):
    marker = f"interrupts-{uuid.uuid4().hex[:12]}"
    root = copy_tree(verl_090, tmp_path / marker)
    phase = _pool_phase(root, marker, verl_090)
    random.seed(signum + 100)
    code = 128 + signum
    with_workers = 0
    for round_number in range(ROUNDS):
        _pristine_again(root, verl_090)
        process = _start(root)
        time.sleep(_delay(phase))
        with_workers += len(_processes_with(marker)) > 1
        process.send_signal(signum)
        sent = time.monotonic()
        try:
            _, stderr = process.communicate(timeout=ENDS_WITHIN)
        except subprocess.TimeoutExpired:
            process.kill()
            _kill_all(_processes_with(marker))
            pytest.fail(f"round {round_number}: still running {ENDS_WITHIN}s after {signum.name}")
        left = _gone_within(marker, max(0.0, ENDS_WITHIN - (time.monotonic() - sent)))
        _kill_all(left)
        assert not left, f"round {round_number}: {len(left)} workers outlived the interrupted run"
        assert process.returncode in (code, 0), stderr  # 0: the run was over before the signal came
        assert "Traceback" not in stderr, stderr
        if process.returncode == code:
            assert stderr.startswith(f"trace-instrument: interrupted ({signum.name}); "), stderr
    assert with_workers >= ROUNDS // 2, f"only {with_workers} of {ROUNDS} interrupts landed while workers ran"


# a pool whose workers cannot have the kernel's parent-death signal: the pipe they watch ends them
WITHOUT_PRCTL = textwrap.dedent(
    """
    import sys, time
    from trace_instrument.engine import parallel

    parallel._PR_SET_PDEATHSIG = 0  # an option prctl refuses: as on a system without it

    def job(context, item):
        time.sleep(60)

    def ready():
        print("ready", flush=True)
        time.sleep(60)

    parallel.map_in_order(job, list(range(4)), [1.0] * 4, None, ready)
    """
)


def test_workers_end_with_their_parent_without_the_kernel_signal(tmp_path):
    marker = f"watch-{uuid.uuid4().hex[:12]}"
    script = tmp_path / f"{marker}.py"
    script.write_text(WITHOUT_PRCTL, encoding="utf-8")
    env = {**os.environ, WORKERS_ENV: "2"}
    process = subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    assert process.stdout.readline() == "ready\n"
    deadline = time.monotonic() + 10
    while len(_processes_with(marker)) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(_processes_with(marker)) == 3, "the parent and its two workers"
    process.send_signal(signal.SIGKILL)
    process.wait()
    left = _gone_within(marker, 2.0)
    _kill_all(left)
    assert not left, "the workers outlived their parent"


# Ctrl-C while the pool's own code runs (here: in submit, which holds the pool's lock): the
# moment that, 1 in 40 times, left a run hanging for good in the pool's shutdown
INSIDE_THE_POOL = textwrap.dedent(
    """
    import signal, time
    import concurrent.futures.process as pool_module
    from trace_instrument.engine import parallel

    start_thread = pool_module.ProcessPoolExecutor._start_executor_manager_thread

    def interrupted_inside(self):
        start_thread(self)
        signal.raise_signal(signal.SIGINT)

    pool_module.ProcessPoolExecutor._start_executor_manager_thread = interrupted_inside

    def job(context, item):
        time.sleep(60)

    try:
        parallel.map_in_order(job, list(range(4)), [1.0] * 4, None)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    """
)


def test_an_interrupt_inside_the_pool_ends_the_run_and_its_workers(tmp_path):
    marker = f"inside-{uuid.uuid4().hex[:12]}"
    script = tmp_path / f"{marker}.py"
    script.write_text(INSIDE_THE_POOL, encoding="utf-8")
    env = {**os.environ, WORKERS_ENV: "2"}
    process = subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE, text=True)
    try:
        stdout, _ = process.communicate(timeout=10)  # the import, the pool's start, then an end at once
    except subprocess.TimeoutExpired:
        _kill_all([process.pid, *_processes_with(marker)])
        pytest.fail("the run hung after an interrupt inside the pool")
    left = _gone_within(marker, ENDS_WITHIN)
    _kill_all(left)
    assert stdout == "interrupted\n"
    assert not left, "the workers outlived the interrupted run"


def test_the_entry_point_catches_the_stop_signals_early():
    from trace_instrument.__main__ import EARLY_SIGNALS
    from trace_instrument.engine.files import STOP_SIGNALS

    assert EARLY_SIGNALS == tuple(signal.Signals(s).name for s in STOP_SIGNALS)


def test_an_interrupt_while_the_command_line_loads_ends_the_run_in_a_line(tmp_path):
    """A signal at once: the command line has not loaded yet (its imports take a while)."""
    marker = f"early-{uuid.uuid4().hex[:12]}"
    root = tmp_path / marker
    (root / "verl").mkdir(parents=True)
    for signum in (signal.SIGINT, signal.SIGTERM):
        process = _start(root)
        time.sleep(EARLIEST / 3)
        process.send_signal(signum)
        _, stderr = process.communicate(timeout=ENDS_WITHIN * 3)
        assert process.returncode == 128 + signum, stderr
        assert stderr == f"trace-instrument: interrupted ({signum.name}); nothing was written\n"
