"""Benchmark the tracing runtime (templates/runtime) against its performance targets.

Run with ``python benchmarks/runtime.py [--runtime DIR]``. The runtime (by default
``templates/runtime``; ``--runtime`` measures another copy, e.g. an older commit's)
is copied into a temporary directory as ``verl/utils/tracing`` and imported from
there, exactly as the tests do. Every figure is the median over several repeats,
measured side by side in this one run against a baseline that is the seed
patch's own algorithm as the specification describes it:

1. disabled trace_flow() vs an empty function taking the same arguments
   (target: at most 2.5x);
2. rows/s of one enabled trace_flow() call on a 16,384-sample batch, stdout on
   /dev/null, until the rows are on disk. Baseline: one print() and one
   ``put_nowait`` per sample into a ``queue.Queue(maxsize=10000)`` (a row is
   dropped when it is full), a writer thread taking up to 64 rows at a time
   and writing them with csv.writer, flushing after each batch (target: at
   least 5x);
3. trajectories/s of TrajectoryStore.write() for 1,000 small trajectories that
   carry their token ids, as real rollouts do, including close(). Baseline:
   ``asdict`` (which copies the token ids one by one) + two ``json.dumps`` in
   the caller, then one task per line on a one-thread executor (unbounded
   queue) that checks the file size and writes and flushes the line;
4. bursts of large trajectories: 4 threads write 50 trajectories each (200)
   whose JSONL lines are about 1 MB, then 12 each (48) of about 5 MB, into one
   store; trajectories on disk per second, including close(), and how many
   were lost (counted from the files). These trajectories are text only: no
   token ids, so the baseline's ``asdict`` costs little and the comparison is
   about queueing and writing. Target: nothing lost and at least the
   baseline's rate (1.0x). For information, the 1 MB burst again with the
   trajectory queue bounded to 32 MiB, which the writers must wait for.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import dataclasses
import importlib
import json
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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

RUNTIME_SRC = Path(__file__).resolve().parents[1] / "templates" / "runtime"
BATCH_SIZE = 16_384
GROUP_SIZE = 8  # rollout.n: samples per prompt
DISABLED_TARGET = 2.5
THROUGHPUT_TARGET = 5.0
BURST_TARGET = 1.0
BURST_THREADS = 4
BURSTS = {1: 50, 5: 12}  # line size in MB: trajectories per thread
SMALL_QUEUE_MB = 32
MB = 1024 * 1024


def load_runtime(root: Path, source: Path):
    """Install ``source`` as verl.utils.tracing under ``root`` and import it (tracing off)."""
    package_dir = root / "verl" / "utils" / "tracing"
    for parent in (root / "verl", root / "verl" / "utils"):
        parent.mkdir(parents=True, exist_ok=True)
        (parent / "__init__.py").touch()
    shutil.copytree(source, package_dir, ignore=shutil.ignore_patterns("__pycache__"))
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


def lines_on_disk(folder: Path) -> int:
    return sum(path.read_bytes().count(b"\n") for path in folder.glob("*.jsonl"))


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


class SeedLikeSampleFlow:
    """The seed's sample flow: print() and put_nowait() per sample, a bounded queue, 64-row batches."""

    QUEUE_SIZE = 10_000
    WRITER_BATCH = 64

    def __init__(self, path):
        self._queue = queue.Queue(maxsize=self.QUEUE_SIZE)
        self._counts_lock = threading.Lock()
        self.accepted = self.written = self.dropped = 0
        self._file = open(path, "a", newline="", encoding="utf-8")  # noqa: SIM115 - lives as long as the benchmark
        threading.Thread(target=self._write_rows, daemon=True).start()

    def _write_rows(self):
        writer = csv.writer(self._file)
        while True:
            try:
                rows = [self._queue.get(timeout=5.0)]
            except queue.Empty:
                continue
            while not self._queue.empty() and len(rows) < self.WRITER_BATCH:
                rows.append(self._queue.get_nowait())
            for row in rows:
                writer.writerow(row)
            self._file.flush()
            with self._counts_lock:
                self.written += len(rows)

    def trace(self, uids, traj_uids, from_module, to_module, stage, detail, global_step):
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime())
        now_ms = int(time.time() * 1000)
        detail_part = f" | detail={detail}" if detail else ""
        step_part = f" | global_step={global_step}" if global_step != -1 else ""
        job_id = os.environ.get("DLC_JOB_ID", "ENV_NOTFOUND_DLC_JOB_ID")
        status = "COMPLETE" if stage in {"TRAIN_UPDATE", "FILTER_TRAJECTORIES"} else "RUNNING"
        parts = [f"from={from_module}", f"to={to_module}", f"stage={stage}"]
        if global_step != -1:
            parts.append(f"global_step={global_step}")
        if detail:
            parts.append(f"detail={detail}")
        content = "|".join(parts)
        for uid, traj_uid in zip(uids, traj_uids):
            print(
                f"[FLOW_TRACE] {stamp} | uid={uid} | traj_uid={traj_uid} | "
                f"from={from_module} | to={to_module} | stage={stage}{step_part}{detail_part}"
            )
            sample_id = f"{uid}/{traj_uid}" if str(traj_uid).isdigit() else f"{uid}/sample"
            try:
                self._queue.put_nowait([job_id, "sample", sample_id, status, now_ms, content])
                self.accepted += 1
            except queue.Full:
                self.dropped += 1

    def wait_written(self, timeout=120.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._counts_lock:
                if self.written >= self.accepted:
                    return
            time.sleep(0.0005)


TRACE_ARGS = ("AgentLoopWorker", "AgentLoop", "AGENT_LOOP", "agent_task_started", 3)


def bench_throughput(runtime, uids, traj_uids, work_dir: Path, repeats=7):
    """Median rows/s (ours, baseline) and the baseline's dropped rows per batch; stdout on /dev/null."""
    runtime.set_trace_dir(str(work_dir / "ours"))
    baseline = SeedLikeSampleFlow(work_dir / "baseline.csv")
    ours_seconds, baseline_seconds, baseline_drops = [], [], []
    with stdout_to_devnull():
        runtime.trace_flow(uids[:8], traj_uids[:8], *TRACE_ARGS)  # warm-up: writer thread, files
        runtime.flush(60)
        for _ in range(repeats):
            dropped_before = baseline.dropped
            start = time.perf_counter()
            baseline.trace(uids, traj_uids, *TRACE_ARGS)
            baseline.wait_written()
            baseline_seconds.append(time.perf_counter() - start)
            baseline_drops.append(baseline.dropped - dropped_before)

            start = time.perf_counter()
            runtime.trace_flow(uids, traj_uids, *TRACE_ARGS)
            runtime.flush(60)
            ours_seconds.append(time.perf_counter() - start)
    runtime.set_trace_dir(None)
    ours_rate = BATCH_SIZE / statistics.median(ours_seconds)
    return ours_rate, BATCH_SIZE / statistics.median(baseline_seconds), statistics.median(baseline_drops)


# -- 3./4. trajectory store ------------------------------------------------------------------


class SeedLikeTrajectoryStore:
    """The seed's store: serialise in the caller, write and flush each line on a one-thread executor."""

    _DROPPED_TOP = ("initial_prompt_token_ids", "replica_id")
    _DROPPED_TURN = ("completion_token_ids", "observation_token_ids", "prompt_text", "sglang_rid")

    def __init__(self, dump_dir, instance_id, max_file_size_mb=100):
        self.dump_dir = dump_dir
        self.instance_id = instance_id
        self.max_file_size_bytes = max_file_size_mb * MB
        self._executor = ThreadPoolExecutor(max_workers=1)
        os.makedirs(dump_dir, exist_ok=True)
        self._file = None
        self._path = None
        self._open_new_file()

    def _open_new_file(self):
        if self._file is not None:
            self._file.close()
        stamp = f"{time.strftime('%Y%m%d_%H%M%S')}_{int(time.time() * 1000) % 1000:03d}"
        self._path = os.path.join(self.dump_dir, f"trajectory_{self.instance_id}_{stamp}.jsonl")
        self._file = open(self._path, "a")  # noqa: SIM115 - closed by close() or the next rotation

    def _write_line(self, line):
        if os.path.getsize(self._path) >= self.max_file_size_bytes:
            self._open_new_file()
        self._file.write(line + "\n")
        self._file.flush()

    def write(self, trajectory):
        payload = dataclasses.asdict(trajectory)
        for key in self._DROPPED_TOP:
            payload.pop(key, None)
        for turn in payload.get("turns", []):
            for key in self._DROPPED_TURN:
                turn.pop(key, None)
            if turn.get("turn_total_time_ms") is None:
                turn["turn_total_time_ms"] = (turn.get("completion_time_ms") or 0.0) + (
                    turn.get("observation_time_ms") or 0.0
                )
        index = {key: payload.pop(key, None) for key in ("prompt_uid", "sample_index")}
        line = json.dumps({**index, "raw_message": json.dumps(payload, ensure_ascii=False)}, ensure_ascii=False)
        self._executor.submit(self._write_line, line)

    def close(self, timeout=None):
        self._executor.shutdown(wait=True)
        self._file.close()
        return True


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


def bench_store(runtime, work_dir: Path, count=1000, repeats=3):
    """Median trajectories/s (ours, baseline) for write() x count + close(), and our bytes per line."""
    trajectories = [make_trajectory(runtime, i) for i in range(count)]
    stores = {"ours": runtime.TrajectoryStore, "baseline": SeedLikeTrajectoryStore}
    rates = {name: [] for name in stores}
    for repeat in range(repeats):
        for name, store_class in stores.items():
            start = time.perf_counter()
            store = store_class(str(work_dir / f"{name}-small{repeat}"), repeat)
            for trajectory in trajectories:
                store.write(trajectory)
            store.close(60)
            rates[name].append(count / (time.perf_counter() - start))
    line_bytes = sum(path.stat().st_size for path in (work_dir / "ours-small0").iterdir()) // count
    return statistics.median(rates["ours"]), statistics.median(rates["baseline"]), line_bytes


# A model answer: mostly ASCII prose with quotes, newlines and a little non-ASCII, ~1 KB.
_PARAGRAPH = (
    'Let me compute the total step by step. The "base" cost is 12 * 7 = 84, and the discount '
    "is 15% of 84, which is 12.6, so the price is 84 - 12.6 = 71.4.\nChecking: 71.4 / 84 = 0.85, "
    "as expected (85%). Next, the tax of 8% gives 71.4 * 1.08 = 77.112 → rounded to 77.11.\n"
    "```python\ndef total(price, discount=0.15, tax=0.08):\n    return round(price * (1 - discount)"
    " * (1 + tax), 2)\n```\nSo the answer is \\boxed{77.11}. Naïve check: 77.11 ≈ 77.1 ✓\n"
) * 2


def make_large_trajectory(runtime, line_bytes):
    """A 10-turn tool-using trajectory, text only, whose JSONL line is about ``line_bytes`` long."""
    n_turns = 10
    # The line escapes the text twice (raw_message is a JSON string inside JSON): ~1.15x the text.
    chars_per_turn = int(line_bytes / 1.15 / n_turns)
    completion = (_PARAGRAPH * (chars_per_turn * 3 // 4 // len(_PARAGRAPH) + 1))[: chars_per_turn * 3 // 4]
    observation = ("tool says: " + _PARAGRAPH) * (chars_per_turn // 4 // (len(_PARAGRAPH) + 11) + 1)
    observation = observation[: chars_per_turn // 4]
    turns = [
        runtime.Turn(
            turn_index=index,
            prompt_token_count=1000 + index * chars_per_turn // 4,
            completion_text=completion,
            completion_token_count=len(completion) // 4,
            finish_reason="tool_call",
            observation_text=observation,
            start_ts=1.0 + index,
            end_ts=1.5 + index,
            completion_time_ms=500.0,
            observation_time_ms=20.0,
        )
        for index in range(n_turns)
    ]
    return runtime.Trajectory(
        request_id="0",
        prompt_uid=str(uuid.uuid4()),
        sample_index=0,
        n_samples=8,
        global_step=3,
        created_at_ts=1.0,
        completed_at_ts=12.0,
        total_time_ms=11000.0,
        turns=turns,
        initial_prompt_text=_PARAGRAPH,
        agent_metrics={"generate_sequences": 9.5, "tool_calls": 1.1, "num_preempted": -1},
    )


def run_burst(store, trajectories, per_thread):
    """Each thread writes its trajectory ``per_thread`` times (a new request_id each), all at once."""
    start_line = threading.Barrier(len(trajectories) + 1)

    def produce(trajectory):
        start_line.wait()
        for index in range(per_thread):
            trajectory.request_id = str(index)
            store.write(trajectory)

    threads = [threading.Thread(target=produce, args=(t,)) for t in trajectories]
    for thread in threads:
        thread.start()
    start_line.wait()
    start = time.perf_counter()
    for thread in threads:
        thread.join()
    store.close(300)
    return time.perf_counter() - start


def bench_bursts(runtime, work_dir: Path, line_mb, per_thread, repeats=3, with_baseline=True, **store_options):
    """Median trajectories on disk per second and the most lost in one burst, (ours, baseline)."""
    trajectories = [make_large_trajectory(runtime, line_mb * MB) for _ in range(BURST_THREADS)]
    stores = {"ours": lambda folder, instance: runtime.TrajectoryStore(folder, instance, **store_options)}
    if with_baseline:
        stores["baseline"] = SeedLikeTrajectoryStore
    rates = {name: [] for name in stores}
    lost = dict.fromkeys(stores, 0)
    line_bytes = 0
    for repeat in range(repeats):
        for name, make_store in stores.items():
            folder = work_dir / f"{name}-burst{line_mb}-{repeat}"
            seconds = run_burst(make_store(str(folder), repeat), trajectories, per_thread)
            written = lines_on_disk(folder)
            rates[name].append(written / seconds)
            lost[name] = max(lost[name], BURST_THREADS * per_thread - written)
            if written:
                line_bytes = sum(path.stat().st_size for path in folder.glob("*.jsonl")) // written
            shutil.rmtree(folder)
    medians = {name: statistics.median(values) for name, values in rates.items()}
    return medians["ours"], medians.get("baseline"), lost["ours"], lost.get("baseline"), line_bytes


# -- report ---------------------------------------------------------------------------------


def verdict(ok):
    return "PASS" if ok else "FAIL"


def report_row(label, ours, baseline, ratio, target, result):
    print(f"{label:<56}{ours:>14}{baseline:>14}{ratio:>9}  {target:<9}{result}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtime", type=Path, default=RUNTIME_SRC, help="runtime package folder to measure")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="trace-runtime-bench-") as tmp:
        work_dir = Path(tmp)
        runtime = load_runtime(work_dir / "pkg", args.runtime.resolve())
        uids, traj_uids, batch_kind = make_batch()

        disabled = bench_disabled(runtime, uids, traj_uids)
        ours_rate, baseline_rate, baseline_drops = bench_throughput(runtime, uids, traj_uids, work_dir)
        store = bench_store(runtime, work_dir)
        bursts = {size: bench_bursts(runtime, work_dir, size, count) for size, count in BURSTS.items()}
        try:
            small_queue = bench_bursts(
                runtime, work_dir, 1, BURSTS[1], with_baseline=False, max_queue_bytes=SMALL_QUEUE_MB * MB
            )
        except TypeError:  # a runtime without max_queue_bytes
            small_queue = None

    print(
        f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPU(s); "
        f"runtime: {args.runtime}; batch: {BATCH_SIZE} samples as {batch_kind}; medians of repeated runs"
    )
    report_row("measurement", "runtime", "baseline", "ratio", "target", "result")
    print("-" * 110)
    results = []
    for form, (ours_ns, empty_ns) in disabled.items():
        ratio = ours_ns / empty_ns
        results.append(ratio <= DISABLED_TARGET)
        report_row(
            f"1. disabled trace_flow, {form} (ns/call; empty function)",
            f"{ours_ns:.1f}",
            f"{empty_ns:.1f}",
            f"{ratio:.2f}x",
            "<= 2.5x",
            verdict(results[-1]),
        )
    ratio = ours_rate / baseline_rate
    results.append(ratio >= THROUGHPUT_TARGET)
    report_row(
        "2. enabled trace_flow, 16384-sample batch (rows/s)",
        f"{ours_rate:,.0f}",
        f"{baseline_rate:,.0f}",
        f"{ratio:.1f}x",
        ">= 5x",
        f"{verdict(results[-1])} (baseline dropped {baseline_drops:,.0f} rows/batch)",
    )
    store_rate, store_baseline, line_bytes = store
    report_row(
        "3. TrajectoryStore, 1000 small trajectories (traj/s)",
        f"{store_rate:,.0f}",
        f"{store_baseline:,.0f}",
        f"{store_rate / store_baseline:.2f}x",
        "-",
        f"info ({line_bytes:,} bytes/line)",
    )
    for line_mb, (ours, baseline, ours_lost, baseline_lost, burst_line) in bursts.items():
        ratio = ours / baseline
        results.append(ratio >= BURST_TARGET and ours_lost == 0)
        report_row(
            f"4. burst, 4 threads x {BURSTS[line_mb]} trajectories of {line_mb} MB (traj/s)",
            f"{ours:,.1f}",
            f"{baseline:,.1f}",
            f"{ratio:.2f}x",
            ">= 1.0x",
            f"{verdict(results[-1])} (lost: {ours_lost} vs {baseline_lost}; {burst_line / MB:.2f} MB/line)",
        )
    if small_queue is not None:
        ours, _, ours_lost, _, _ = small_queue
        baseline, baseline_lost = bursts[1][1], bursts[1][3]
        report_row(
            f"   the 1 MB burst, trajectory queue of {SMALL_QUEUE_MB} MiB (traj/s)",
            f"{ours:,.1f}",
            f"{baseline:,.1f}",
            f"{ours / baseline:.2f}x",
            "-",
            f"info (lost: {ours_lost} vs {baseline_lost})",
        )
    print(f"overall: {verdict(all(results))}")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
