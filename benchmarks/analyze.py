"""Benchmark ``analyze`` against its targets, every figure measured side by side in this one run.

Run with ``python benchmarks/analyze.py`` (needs the ``bench`` extra for pandas). The data is a
simulated run written through the real runtime (``tests/traces/simulate.py``): about 10 million
CSV rows (64 host-pid files) plus 300,000 trajectories, and a separate 2-million-row run with the
same shape. Both are generated once into ``--data`` (default: the trace-instrument cache) and
reused. Every measurement is a fresh process started as a user starts it
(``python -m trace_instrument analyze FOLDER --format json``), timed from start to exit, peak
memory from the kernel's account of it; the tool is byte-compiled first, as ``pip install`` does.
Each round runs the kinds interleaved, and a ratio is taken between the two runs of its pair in
the same round (this machine's speed drifts by a third between runs minutes apart); the report
gives the median over the rounds.

1. The first ``analyze`` of the 10M run (its cache removed before: a user's first run, which
   also writes the cache) vs the DuckDB read floor: reading the same CSV files once into a typed
   events table (the CSV read plus one ``regexp_extract`` of ``content`` per row). Target: at
   most 2.5x. Its peak memory: under 2 GB.
2. On the 2-million-row run: a straightforward pandas script computing the stage latencies
   (read_csv, str.extract, sort, groupby shift, quantile) vs ``analyze`` of the same CSV files
   (every CSV view: the same input and the same latencies, and more; a folder this size is read
   in memory and not cached), and vs the first ``analyze`` of the whole run (trajectories and
   progress too). Targets: at least 5x faster, at most a third of its memory.
3. The second ``analyze`` of the unchanged 10M folder, which reuses the cache: seconds.
4. ``analyze --follow`` on the 2M run being written: one process is started on a copy holding
   99% of each file's lines; once its first refresh is done the last 1% is appended, and its
   next refresh (reading only what was appended) is timed against the first, from the process's
   own stderr lines. Targets: at most 10% of the first read and at most 1 s, reading exactly the
   bytes appended (lossless: the refresh reads on from where the first one's complete lines
   ended). ``--only follow`` runs this alone.
5. ``export --to tensorboard`` of a 100-step, 8-host run of about 1 million rows and 32,000
   trajectories vs ``analyze --format json`` of it, the two processes of each round one after the
   other. Target: at most 1.5x. ``--only export`` runs this alone.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "traces"))

import simulate
from common import Measured, byte_compile_the_tool, timed

from trace_instrument.traces.discover import CACHE_DIR_NAME

DEFAULT_DATA = Path(os.environ.get("TRACE_INSTRUMENT_CACHE", Path.home() / ".cache" / "trace-instrument")) / "bench"
# 9 hosts x 7 workers + the trainer = 64 CSV files; 8 rollouts per prompt, ~8 turns each (tools)
BIG = {"hosts": 9, "workers_per_host": 7, "steps": 100, "prompts_per_step": 375}
SMALL = {"hosts": 9, "workers_per_host": 7, "steps": 20, "prompts_per_step": 375}
# `export --to tensorboard`: issue 40's 100-step, 8-host run of about 1 M rows and 32,000 trajectories
EXPORT_RUN = {"hosts": 8, "workers_per_host": 7, "steps": 100, "prompts_per_step": 40}
EXPORT_TARGET = 1.5  # export --to tensorboard / analyze, whole processes
CONTENT_PATTERN = "^from=([^|]*)[|]to=([^|]*)[|]stage=([^|]*)(?:[|]global_step=([^|]*))?(?:[|]detail=(.*))?$"
TIME_TARGET, MEMORY_TARGET_GB, PANDAS_SPEED_TARGET, PANDAS_MEMORY_TARGET = 2.5, 2.0, 5.0, 3.0
FOLLOW_TARGET = 0.10  # a refresh after 1% more rows, as a share of the first read
FOLLOW_SECONDS = 1.0  # the same refresh, at most
FOLLOW_INTERVAL = 15  # seconds between the two refreshes: time enough to append the last 1%


def ensure_run(data: Path, name: str, shape: dict[str, int]) -> Path:
    """The simulated run ``name`` under ``data``, written once (a marker file says it is complete)."""
    target = data / name
    if (target / ".complete").exists():
        return target
    shutil.rmtree(target, ignore_errors=True)
    cfg = simulate.SimConfig(
        seed=11,
        version="v1",
        mode="colocate_async",
        rollout_n=8,
        tool_prob=0.9,
        max_turns=16,
        stuck_prob=0.01,
        text_chars=16,
        **shape,
    )
    print(f"writing the simulated run {target} (once; this takes a while) ...", flush=True)
    started = time.monotonic()
    simulate.run_plan(simulate.plan_run(cfg), target)
    (target / ".complete").write_text(json.dumps(shape))
    print(f"  written in {time.monotonic() - started:.0f} s", flush=True)
    return target


FLOOR = """
import duckdb, glob, sys, tempfile, os
files = sorted(glob.glob(sys.argv[1] + "/sample/*.csv"))
with tempfile.TemporaryDirectory() as tmp:
    con = duckdb.connect(os.path.join(tmp, "floor.duckdb"))
    con.execute("SET memory_limit = '1GB'")
    con.execute("SET preserve_insertion_order = false")
    con.execute(f"SET temp_directory = '{tmp}/spill'")
    con.execute('''CREATE TABLE events AS
        SELECT filename, job_id, sample_id, status, ts,
               regexp_extract(content, ?, ['frm', 'dst', 'stage', 'step', 'detail']) AS p
        FROM read_csv(?, columns = {'job_id': 'VARCHAR', 'cat': 'VARCHAR', 'sample_id': 'VARCHAR',
                      'status': 'VARCHAR', 'ts': 'BIGINT', 'content': 'VARCHAR'},
                      header = false, auto_detect = false, filename = true)''', [PATTERN, files])
    print(con.execute("SELECT count(*) FROM events").fetchone()[0], file=sys.stderr)
"""

PANDAS = """
import glob, sys
import pandas as pd
RANKS = {"DATA_PREPROCESS:uid_generated": 1, "DATA_PREPROCESS:traj_uid_generated_by_repeat": 2,
         "DATA_DISPATCH:dispatched_to_agent_loop_manager": 3, "DATA_DISPATCH:dispatched_to_agent_loop_worker": 4,
         "AGENT_LOOP:agent_task_started": 5, "AGENT_LOOP:session_started": 6,
         "LLM_GENERATE:sending_generate_request": 7, "LLM_GENERATE:received_generate_response": 7,
         "AGENT_TOOL:tool_executed": 7, "AGENT_LOOP:agent_run_completed": 10,
         "ROLLOUT_REWARD:reward_score_computed": 11, "TRAIN_SAMPLE:sampled_from_replay_buffer": 12,
         "TRAIN_REWARD:reward_extracted": 13, "TRAIN_LOGPROB:old_log_prob_computed": 14,
         "TRAIN_REF_LOGPROB:ref_log_prob_computed": 15, "TRAIN_ADVANTAGE:advantage_computed": 16,
         "TRAIN_UPDATE:actor_parameters_updated": 17}
names = ["job_id", "cat", "sample_id", "status", "ts", "content"]
df = pd.concat([pd.read_csv(f, header=None, names=names) for f in sorted(glob.glob(sys.argv[1] + "/sample/*.csv"))],
               ignore_index=True)
parts = df["content"].str.extract(PATTERN)
detail = parts[4].fillna("").str.replace(r"_(score|name|session_id)=.*$", "", regex=True)
df["event"] = parts[2] + ":" + detail
df["rank"] = df["event"].map(RANKS)
df = df.dropna(subset=["rank"]).sort_values(["sample_id", "rank", "ts"])
grouped = df.groupby("sample_id")
df["prev_event"] = grouped["event"].shift()
df["dt"] = df["ts"] - grouped["ts"].shift()
latencies = df.dropna(subset=["prev_event"]).groupby(["prev_event", "event"])["dt"].quantile([0.5, 0.9, 0.99])
print(len(latencies), file=sys.stderr)
"""


def python_code(code: str, *args: str) -> list[str]:
    """A ``python -c`` command running ``code`` (its PATTERN replaced by the content pattern)."""
    return [sys.executable, "-c", textwrap.dedent(code).replace("PATTERN", repr(CONTENT_PATTERN)), *args]


def medians(samples: dict[str, list[Measured]]) -> dict[str, tuple[float, float]]:
    """Per kind: (median seconds, highest peak MiB)."""
    return {k: (statistics.median(x.seconds for x in v), max(x.mib for x in v)) for k, v in samples.items()}


def analyze_command(folder: Path) -> list[str]:
    return [sys.executable, "-m", "trace_instrument", "analyze", str(folder), "--format", "json"]


def first_analyze(folder: Path) -> Measured:
    """A user's first ``analyze`` of ``folder``: no cache yet."""
    shutil.rmtree(folder / CACHE_DIR_NAME, ignore_errors=True)
    return timed(analyze_command(folder))


def _csv_only(data: Path, run: Path) -> Path:
    """A folder with only the run's sample-flow CSV files (links): the input of the pandas script."""
    target = data / f"{run.name}-csv" / "sample"
    target.mkdir(parents=True, exist_ok=True)
    for csv_file in (run / "sample").glob("*.csv"):
        link = target / csv_file.name
        if not link.exists():
            link.symlink_to(csv_file)
    return target.parent


def _lines(folder: Path, pattern: str) -> int:
    total = 0
    for path in folder.glob(pattern):
        with open(path, "rb") as f:
            while chunk := f.read(1 << 24):
                total += chunk.count(b"\n")
    return total


def _withheld(run: Path, target: Path, share: float = 0.01) -> dict[Path, bytes]:
    """``target``: a copy of ``run`` whose growing files hold all but their last ``share`` of lines;
    the withheld bytes of each, by path in ``target``."""
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(run, target, ignore=shutil.ignore_patterns(CACHE_DIR_NAME, ".complete"))
    withheld = {}
    for path in [*target.glob("sample/*.csv"), *target.glob("trajectory/*.jsonl")]:
        lines = path.read_bytes().splitlines(keepends=True)
        keep = len(lines) - max(1, int(len(lines) * share))
        path.write_bytes(b"".join(lines[:keep]))
        withheld[path] = b"".join(lines[keep:])
    return withheld


REFRESHED = re.compile(r"refreshed at \S+: read ([\d,]+) bytes, (.*), in ([\d.]+) s")


def follow_refresh(run: Path, work: Path) -> tuple[float, float, int, str, int]:
    """One ``analyze --follow`` process: (first refresh s, refresh after 1% more s, bytes it read,
    how, bytes appended)."""
    target = work / "follow-run"
    withheld = _withheld(run, target)
    command = [*analyze_command(target), "--follow", "--interval", str(FOLLOW_INTERVAL), "--refreshes", "2"]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    seen: list[re.Match[str]] = []
    for line in proc.stderr:
        match = REFRESHED.search(line)
        if not match:
            continue
        seen.append(match)
        if len(seen) == 1:
            for path, data in withheld.items():
                with open(path, "ab") as f:
                    f.write(data)
    proc.wait()
    shutil.rmtree(target, ignore_errors=True)
    if len(seen) != 2:
        raise RuntimeError(f"analyze --follow printed {len(seen)} refresh lines, exit {proc.returncode}")
    first, second = seen
    appended = sum(len(data) for data in withheld.values())
    return (
        float(first.group(3)),
        float(second.group(3)),
        int(second.group(1).replace(",", "")),
        second.group(2),
        appended,
    )


def run_follow(data: Path, repeats: int) -> int:
    small = ensure_run(data, "run2m", SMALL)
    byte_compile_the_tool()
    ratios, firsts, seconds = [], [], []
    lossless = True
    for i in range(repeats):
        first, second, read, how, appended = follow_refresh(small, data)
        firsts.append(first)
        seconds.append(second)
        ratios.append(second / first)
        lossless = lossless and read == appended
        print(
            f"  round {i + 1}/{repeats}: first {first:.1f} s, after 1% more {second:.2f} s "
            f"({read:,} bytes of {appended:,} appended, {how})"
        )
    ratio = statistics.median(ratios)
    ok = ratio <= FOLLOW_TARGET and statistics.median(seconds) <= FOLLOW_SECONDS and lossless
    print(f"\nmedians of {repeats} rounds:")
    print(
        f"{'analyze --follow 2M: refresh / first':<38} "
        f"{f'{statistics.median(seconds):.2f} s / {statistics.median(firsts):.1f} s':<36} {ratio:>8.2f}  "
        f"<= {FOLLOW_TARGET} and <= {FOLLOW_SECONDS:.0f} s, {'lossless' if lossless else 'LOST BYTES'} "
        f"{'ok' if ok else 'MISSED'}"
    )
    return 0 if ok else 1


def run_export(data: Path, repeats: int) -> int:
    """``export --to tensorboard`` of the 1M-row run vs ``analyze --format json`` of it, interleaved
    (a run this size is read in memory, never cached: each process reads it whole)."""
    run1m = ensure_run(data, "run1m", EXPORT_RUN)
    rows, trajectories = _lines(run1m, "sample/*.csv"), _lines(run1m, "trajectory/*.jsonl")
    print(f"run1m: {rows:,} CSV rows, {trajectories:,} trajectories, {EXPORT_RUN['steps']} steps")
    byte_compile_the_tool()
    target = data / "export-tensorboard"
    export = [sys.executable, "-m", "trace_instrument", "export", str(run1m), "--to", "tensorboard", str(target)]
    timed(analyze_command(run1m))  # warms the page cache
    samples: dict[str, list[Measured]] = {}
    ratios = []
    for i in range(repeats):
        shutil.rmtree(target, ignore_errors=True)
        analyzed, exported = timed(analyze_command(run1m)), timed(export)
        samples.setdefault("analyze", []).append(analyzed)
        samples.setdefault("export", []).append(exported)
        ratios.append(exported.seconds / analyzed.seconds)
        print(f"  round {i + 1}/{repeats}: analyze {analyzed.seconds:.1f} s, export {exported.seconds:.1f} s")
    shutil.rmtree(target, ignore_errors=True)
    m = medians(samples)
    ratio = statistics.median(ratios)
    ok = ratio <= EXPORT_TARGET
    (analyze_s, analyze_mb), (export_s, export_mb) = m["analyze"], m["export"]
    print(f"\nmedians of {repeats} rounds:")
    print(
        f"{'export --to tensorboard 1M / analyze':<38} "
        f"{f'{export_s:.1f} s / {analyze_s:.1f} s ({export_mb:,.0f} / {analyze_mb:,.0f} MiB)':<36} {ratio:>8.2f}  "
        f"<= {EXPORT_TARGET}x {'ok' if ok else 'MISSED'}"
    )
    return 0 if ok else 1


def run(data: Path, repeats: int) -> int:
    big = ensure_run(data, "run10m", BIG)
    small = ensure_run(data, "run2m", SMALL)
    rows_big = _lines(big, "sample/*.csv")
    rows_small = _lines(small, "sample/*.csv")
    size = sum(f.stat().st_size for f in (big / "sample").glob("*.csv")) / 1e9
    trajs = _lines(big, "trajectory/*.jsonl")
    print(
        f"{platform.node()}: {os.cpu_count()} cores; run10m: {rows_big:,} CSV rows ({size:.2f} GB, "
        f"{len(list((big / 'sample').glob('*.csv')))} files), {trajs:,} trajectories; run2m: {rows_small:,} rows"
    )
    csv_only = _csv_only(data, small)
    byte_compile_the_tool()
    samples: dict[str, list[Measured]] = {}
    ratios: dict[str, list[float]] = {}

    def take(kind: str, measured: Measured) -> float:
        samples.setdefault(kind, []).append(measured)
        return measured.seconds

    timed(analyze_command(csv_only))  # warms the page cache
    for i in range(repeats):
        floor = take("floor", timed(python_code(FLOOR, str(big))))
        ratios.setdefault("analyze", []).append(take("analyze", first_analyze(big)) / floor)
        take("cached", timed(analyze_command(big)))
        pandas = take("pandas", timed(python_code(PANDAS, str(small))))
        ratios.setdefault("pandas_csv", []).append(pandas / take("analyze2m_csv", timed(analyze_command(csv_only))))
        ratios.setdefault("pandas_whole", []).append(pandas / take("analyze2m", first_analyze(small)))
        ratios.setdefault("pandas_csv_cpu", []).append(samples["pandas"][-1].cpu / samples["analyze2m_csv"][-1].cpu)
        done = ", ".join(f"{k} {v[-1].seconds:.1f} s" for k, v in samples.items())
        print(f"  round {i + 1}/{repeats}: {done}", flush=True)
    m = medians(samples)
    r = {k: statistics.median(v) for k, v in ratios.items()}
    (floor_s, floor_mb), (big_s, big_mb) = m["floor"], m["analyze"]
    (pandas_s, pandas_mb), (csv_s, csv_mb), (whole_s, whole_mb) = m["pandas"], m["analyze2m_csv"], m["analyze2m"]
    cached_s, cached_mb = m["cached"]
    cpu_pandas, cpu_csv = (statistics.median(x.cpu for x in samples[k]) for k in ("pandas", "analyze2m_csv"))
    rows = [
        (
            "analyze 10M (first) / DuckDB read floor",
            f"{big_s:.1f} s / {floor_s:.1f} s",
            r["analyze"],
            f"<= {TIME_TARGET}x",
            r["analyze"] <= TIME_TARGET,
        ),
        (
            "analyze 10M peak RSS (GiB)",
            f"{big_mb:,.0f} MiB (floor {floor_mb:,.0f} MiB)",
            big_mb / 1024,
            f"< {MEMORY_TARGET_GB}",
            big_mb / 1024 < MEMORY_TARGET_GB,
        ),
        (
            "pandas / analyze, 2M CSV (time)",
            f"{pandas_s:.1f} s / {csv_s:.1f} s",
            r["pandas_csv"],
            f">= {PANDAS_SPEED_TARGET}x",
            r["pandas_csv"] >= PANDAS_SPEED_TARGET,
        ),
        (
            "pandas / analyze, 2M CSV (peak RSS)",
            f"{pandas_mb:,.0f} MiB / {csv_mb:,.0f} MiB",
            pandas_mb / csv_mb,
            f">= {PANDAS_MEMORY_TARGET}x",
            pandas_mb / csv_mb >= PANDAS_MEMORY_TARGET,
        ),
        (
            "pandas / analyze, 2M CSV (CPU time)",
            f"{cpu_pandas:.1f} s / {cpu_csv:.1f} s",
            r["pandas_csv_cpu"],
            "-",
            True,
        ),
        ("pandas / whole analyze 2M (time)", f"{pandas_s:.1f} s / {whole_s:.1f} s", r["pandas_whole"], "-", True),
        (
            "pandas / whole analyze 2M (RSS)",
            f"{pandas_mb:,.0f} MiB / {whole_mb:,.0f} MiB",
            pandas_mb / whole_mb,
            "-",
            True,
        ),
        (
            "analyze 10M second run, cache (s)",
            f"{cached_s:.1f} s ({cached_mb:,.0f} MiB)",
            cached_s,
            "seconds",
            cached_s < 10,
        ),
    ]
    print(f"\nmedians of {repeats} rounds (a ratio: the median of the rounds' paired ratios):")
    print(f"{'measurement':<38} {'value':<36} {'ratio':>8}  target")
    for name, value, ratio, target, ok in rows:
        print(f"{name:<38} {value:<36} {ratio:>8.2f}  {target} {'ok' if ok else 'MISSED'}")
    follow_ok = run_follow(data, repeats) == 0
    export_ok = run_export(data, repeats) == 0
    return 0 if all(ok for *_, ok in rows) and follow_ok and export_ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="where the simulated runs are kept")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", choices=["follow", "export"], help="run one measurement alone")
    args = parser.parse_args()
    if args.only == "follow":
        return run_follow(args.data, args.repeats)
    if args.only == "export":
        return run_export(args.data, args.repeats)
    try:
        import pandas  # noqa: F401
    except ImportError:
        print("pandas is needed for the comparison: pip install -e '.[bench]'", file=sys.stderr)
        return 2
    return run(args.data, args.repeats)


if __name__ == "__main__":
    sys.exit(main())
