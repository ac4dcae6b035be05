"""Benchmark the tracing runtime (templates/runtime) against its performance targets.

Run with ``python benchmarks/runtime.py``. The runtime is copied into a temporary
directory as ``verl/utils/tracing`` and imported from there, exactly as the tests
do. Every figure is the median over several repeats, measured side by side in
this one run:

1. disabled trace_flow() vs an empty function taking the same arguments
   (target: at most 2.5x);
2. rows/s of one enabled trace_flow() call on a 16,384-sample batch, stdout on
   /dev/null, until the rows are on disk, vs a baseline doing what the original
   implementation did: one print() and one queue.put(row list) per sample, a
   writer thread draining the queue with csv.writer (target: at least 5x);
3. trajectories/s of TrajectoryStore.write() for a batch, including close().
"""

from __future__ import annotations

import contextlib
import csv
import importlib
import os
import platform
import queue
import shutil
import statistics
import sys
import tempfile
import threading
import time
import timeit
import uuid
from pathlib import Path

RUNTIME_SRC = Path(__file__).resolve().parents[1] / "templates" / "runtime"
BATCH_SIZE = 16_384
GROUP_SIZE = 8  # rollout.n: samples per prompt
DISABLED_TARGET = 2.5
THROUGHPUT_TARGET = 5.0


def load_runtime(root: Path):
    """Install templates/runtime as verl.utils.tracing under ``root`` and import it (tracing off)."""
    package_dir = root / "verl" / "utils" / "tracing"
    for parent in (root / "verl", root / "verl" / "utils"):
        parent.mkdir(parents=True, exist_ok=True)
        (parent / "__init__.py").touch()
    shutil.copytree(RUNTIME_SRC, package_dir, ignore=shutil.ignore_patterns("__pycache__"))
    discovery_dir = root / "discovery"
    discovery_dir.mkdir()
    os.environ.pop("VERL_TRACE_DIR", None)
    os.environ["VERL_TRACE_DISCOVERY_DIR"] = str(discovery_dir)  # keep /tmp's real files untouched
    sys.path.insert(0, str(root))
    return importlib.import_module("verl.utils.tracing")


def make_batch():
    """16,384 samples: 2,048 prompts x 8 over-samples, as numpy object arrays when available."""
    uids = [str(uuid.uuid4()) for _ in range(BATCH_SIZE // GROUP_SIZE) for _ in range(GROUP_SIZE)]
    traj_uids = [str(i % GROUP_SIZE) for i in range(BATCH_SIZE)]
    try:
        import numpy as np
    except ImportError:
        return uids, traj_uids, "lists"
    return np.array(uids, dtype=object), np.array(traj_uids, dtype=object), "numpy object arrays"


@contextlib.contextmanager
def stdout_to_devnull():
    """Point fd 1 (and so sys.stdout) at /dev/null."""
    sys.stdout.flush()
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


# -- 1. disabled cost ---------------------------------------------------------------


def empty(uid, traj_uid, from_module, to_module, stage, detail="", global_step=-1):
    pass


CALL_FORMS = {
    "positional": "f(uid, traj_uid, 'AgentLoopWorker', 'AgentLoop', 'AGENT_LOOP', 'agent_task_started', 3)",
    "keywords": (
        "f(uid=uid, traj_uid=traj_uid, from_module='AgentLoopWorker', to_module='AgentLoop', "
        "stage='AGENT_LOOP', detail='agent_task_started', global_step=3)"
    ),
}


def ns_per_call(function, statement, uid, traj_uid, number):
    timer = timeit.Timer(statement, globals={"f": function, "uid": uid, "traj_uid": traj_uid})
    return timer.timeit(number) / number * 1e9


def bench_disabled(runtime, uid, traj_uid, repeats=9, number=300_000):
    """Median ns/call for each call form, interleaving the two functions to share the noise."""
    results = {}
    for form, statement in CALL_FORMS.items():
        ours, baseline = [], []
        for _ in range(repeats):
            baseline.append(ns_per_call(empty, statement, uid, traj_uid, number))
            ours.append(ns_per_call(runtime.trace_flow, statement, uid, traj_uid, number))
        results[form] = (statistics.median(ours), statistics.median(baseline))
    return results


# -- 2. enabled throughput --------------------------------------------------------------


class PerSampleBaseline:
    """What the original implementation did: print() and queue.put() per sample."""

    _BATCH_MARKER = object()

    def __init__(self, path):
        self._queue = queue.Queue()  # unbounded, so that every row is written, as in ours
        self._batch_written = threading.Event()
        self._file = open(path, "a", newline="", encoding="utf-8")  # noqa: SIM115 - closed by close()
        threading.Thread(target=self._write_rows, daemon=True).start()

    def _write_rows(self):
        writer = csv.writer(self._file)
        while True:
            rows = [self._queue.get(timeout=5.0)]
            while not self._queue.empty() and len(rows) < 64:
                rows.append(self._queue.get_nowait())
            for row in rows:
                if row is self._BATCH_MARKER:
                    self._file.flush()
                    self._batch_written.set()
                else:
                    writer.writerow(row)
            self._file.flush()

    def trace(self, uids, traj_uids, from_module, to_module, stage, detail, global_step):
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime())
        now_ms = int(time.time() * 1000)
        status = "COMPLETE" if stage in {"TRAIN_UPDATE", "FILTER_TRAJECTORIES"} else "RUNNING"
        job_id = os.environ.get("DLC_JOB_ID", "ENV_NOTFOUND_DLC_JOB_ID")
        content = f"from={from_module}|to={to_module}|stage={stage}|global_step={global_step}|detail={detail}"
        for uid, traj_uid in zip(uids, traj_uids):
            print(
                f"[FLOW_TRACE] {stamp} | uid={uid} | traj_uid={traj_uid} | from={from_module} | "
                f"to={to_module} | stage={stage} | global_step={global_step} | detail={detail}"
            )
            sample_id = f"{uid}/{traj_uid}" if str(traj_uid).isdigit() else f"{uid}/sample"
            self._queue.put([job_id, "sample", sample_id, status, now_ms, content])

    def wait_written(self):
        self._batch_written.clear()
        self._queue.put(self._BATCH_MARKER)
        self._batch_written.wait(120)


TRACE_ARGS = ("AgentLoopWorker", "AgentLoop", "AGENT_LOOP", "agent_task_started", 3)


def bench_throughput(runtime, uids, traj_uids, work_dir: Path, repeats=7):
    """Median rows/s (ours, baseline), stdout on /dev/null, rows on disk at the end."""
    runtime.set_trace_dir(str(work_dir / "ours"))
    baseline = PerSampleBaseline(work_dir / "baseline.csv")
    ours_seconds, baseline_seconds = [], []
    with stdout_to_devnull():
        runtime.trace_flow(uids[:8], traj_uids[:8], *TRACE_ARGS)  # warm-up: writer thread, files
        runtime.flush(60)
        for _ in range(repeats):
            start = time.perf_counter()
            baseline.trace(uids, traj_uids, *TRACE_ARGS)
            baseline.wait_written()
            baseline_seconds.append(time.perf_counter() - start)

            start = time.perf_counter()
            runtime.trace_flow(uids, traj_uids, *TRACE_ARGS)
            runtime.flush(60)
            ours_seconds.append(time.perf_counter() - start)
    runtime.set_trace_dir(None)
    return BATCH_SIZE / statistics.median(ours_seconds), BATCH_SIZE / statistics.median(baseline_seconds)


# -- 3. trajectory store -------------------------------------------------------------------


def make_trajectory(runtime, index):
    turns = []
    for turn_index in range(3):
        turn = runtime.Turn(
            turn_index=turn_index,
            prompt_token_count=512 + 300 * turn_index,
            completion_text="tokens " * 150,
            completion_token_ids=list(range(300)),
            completion_token_count=300,
            finish_reason="stop",
            observation_text="tool output " * 20,
            observation_token_ids=list(range(60)),
            start_ts=1.0,
            end_ts=2.0,
            completion_time_ms=1000.0,
            observation_time_ms=50.0,
            sglang_time_ms=900.0,
            sglang_decode_time_ms=800.0,
        )
        turns.append(turn)
    return runtime.Trajectory(
        request_id=str(index % 8),
        prompt_uid=str(uuid.uuid4()),
        sample_index=index % 8,
        n_samples=8,
        global_step=3,
        created_at_ts=1.0,
        completed_at_ts=4.0,
        total_time_ms=3000.0,
        turns=turns,
        initial_prompt_text="system prompt " * 40,
        initial_prompt_token_ids=list(range(512)),
        agent_metrics={"generate_sequences": 2.5, "tool_calls": 0.1, "num_preempted": -1},
    )


def bench_store(runtime, work_dir: Path, count=2000, repeats=5):
    """Median trajectories/s for write() x count + close(), and the bytes per line."""
    trajectories = [make_trajectory(runtime, i) for i in range(count)]
    rates = []
    for repeat in range(repeats):
        start = time.perf_counter()
        store = runtime.TrajectoryStore(str(work_dir / f"trajectory{repeat}"), repeat)
        for trajectory in trajectories:
            store.write(trajectory)
        store.close(60)
        rates.append(count / (time.perf_counter() - start))
    line_bytes = sum(path.stat().st_size for path in (work_dir / "trajectory0").iterdir()) // count
    return statistics.median(rates), line_bytes


# -- report ---------------------------------------------------------------------------------


def verdict(ok):
    return "PASS" if ok else "FAIL"


def main():
    with tempfile.TemporaryDirectory(prefix="trace-runtime-bench-") as tmp:
        work_dir = Path(tmp)
        runtime = load_runtime(work_dir / "pkg")
        uids, traj_uids, batch_kind = make_batch()

        disabled = bench_disabled(runtime, uids, traj_uids)
        ours_rate, baseline_rate = bench_throughput(runtime, uids, traj_uids, work_dir)
        store_rate, line_bytes = bench_store(runtime, work_dir)

    print(
        f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPU(s); "
        f"batch: {BATCH_SIZE} samples as {batch_kind}; medians of repeated runs"
    )
    header = f"{'measurement':<52}{'runtime':>16}{'baseline':>16}{'ratio':>9}  {'target':<9}result"
    print(header)
    print("-" * len(header))
    results = []
    for form, (ours_ns, empty_ns) in disabled.items():
        ratio = ours_ns / empty_ns
        results.append(ratio <= DISABLED_TARGET)
        print(
            f"{'1. disabled trace_flow, ' + form + ' (ns/call)':<52}{ours_ns:>16.1f}{empty_ns:>16.1f}"
            f"{ratio:>8.2f}x  {'<= 2.5x':<9}{verdict(results[-1])}"
        )
    ratio = ours_rate / baseline_rate
    results.append(ratio >= THROUGHPUT_TARGET)
    print(
        f"{'2. enabled trace_flow, 16384-sample batch (rows/s)':<52}{ours_rate:>16,.0f}{baseline_rate:>16,.0f}"
        f"{ratio:>8.1f}x  {'>= 5x':<9}{verdict(results[-1])}"
    )
    print(
        f"{'3. TrajectoryStore.write + close (traj/s)':<52}{store_rate:>16,.0f}{'-':>16}{'-':>9}  "
        f"{'-':<9}info ({line_bytes:,} bytes/line)"
    )
    print(f"overall: {verdict(all(results))}")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
