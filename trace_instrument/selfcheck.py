"""The runtime self-check: run the installed verl/utils/tracing/ for real and read what it wrote.

The package is copied under a stub `verl` package in a scratch folder and run
in a subprocess with VERL_TRACE_DIR set there, so verl/__init__.py (which
needs torch) is never imported and nothing outside the scratch folder is
touched. The parent process then validates the files against the formats.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from trace_instrument import formats
from trace_instrument.formats import RAW_MESSAGE_KEYS, TRAJECTORY_LINE_KEYS
from trace_instrument.formats import TURN_KEYS as TURN_KEY_NAMES
from trace_instrument.model import Catalog, Check, Finding

_SCRIPT = r"""
import sys
sys.path.insert(0, sys.argv[1])
import verl.utils.tracing as t

t.trace_flow(uid=["u1", "u2"], traj_uid=["0", "x"], from_module="SelfCheck", to_module="Disk",
             stage="TRAIN_UPDATE", detail="self_check", global_step=3)
t.trace_flow(uid="u3", traj_uid="N/A", from_module="SelfCheck", to_module="Disk", stage="DATA_PREPROCESS")
t.log_progress("self-check progress line")
t.log_step_window(3, "train", "started")
t.log_rollout_completed("u1", "0", None)
record = t.TurnRecord([1, 2, 3])
record.fill_sglang_response("done", [4, 5], "stop", {"e2e_latency": 0.5, "queue_time": 0.1})
record.stamp_end()
store = t.TrajectoryStore(sys.argv[2], 7)
store.write(t.Trajectory(request_id="0", prompt_uid="u1", sample_index=0, turns=[record.turn]))
store.close()
t.flush(5)
"""

RAW_KEYS = set(RAW_MESSAGE_KEYS)
TURN_KEYS = set(TURN_KEY_NAMES)
FLOW_LINE = re.compile(
    r"^\[FLOW_TRACE\] \d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2} \| uid=u1 \| traj_uid=0 \| from=SelfCheck \| to=Disk"
    r" \| stage=TRAIN_UPDATE \| global_step=3 \| detail=self_check$",
    re.MULTILINE,
)


def runtime_self_check(root: Path, catalog: Catalog, timeout: float = 60.0) -> list[Finding]:
    package = root / catalog.runtime.target_dir
    if not (package / "__init__.py").exists():
        return [Finding(Check.RUNTIME, catalog.runtime.target_dir, False, "runtime package not installed")]
    with tempfile.TemporaryDirectory(prefix="trace-instrument-selfcheck-") as scratch_name:
        scratch = Path(scratch_name)
        stage = scratch / "stage"
        (stage / "verl" / "utils").mkdir(parents=True)
        (stage / "verl" / "__init__.py").write_text("")
        (stage / "verl" / "utils" / "__init__.py").write_text("")
        try:
            shutil.copytree(package, stage / "verl" / "utils" / "tracing", ignore=shutil.ignore_patterns("__pycache__"))
        except OSError as exc:  # shutil.Error too: a dangling link or an unreadable file of the folder's
            return [Finding(Check.RUNTIME, "self-check", False, f"the package could not be copied to run it: {exc}")]
        traces, discovery = scratch / "traces", scratch / "discovery"
        discovery.mkdir()
        env = {k: v for k, v in os.environ.items() if k not in ("DLC_JOB_ID", "PYTHONPATH")}
        env.update(VERL_TRACE_DIR=str(traces), VERL_TRACE_DISCOVERY_DIR=str(discovery), PYTHONDONTWRITEBYTECODE="1")
        try:
            run = subprocess.run(  # noqa: PLW1510 - the exit code is a finding
                [sys.executable, "-c", _SCRIPT, str(stage), str(traces / "trajectory")],
                capture_output=True,
                text=True,
                timeout=timeout,
                env=env,
                cwd=scratch,
            )
        except subprocess.TimeoutExpired:
            return [Finding(Check.RUNTIME, "self-check", False, f"the self-check did not finish within {timeout:.0f}s")]
        if run.returncode != 0:
            tail = (run.stderr.strip().splitlines() or ["no output"])[-1]
            return [Finding(Check.RUNTIME, "self-check", False, f"the self-check failed: {tail}")]
        return [
            *_sample_findings(traces / "sample", run.stdout),
            *_progress_findings(traces / "progress", run.stdout),
            *_trajectory_findings(traces / "trajectory"),
            *_discovery_findings(discovery, traces),
        ]


def _finding(subject: str, problems: list[str], ok_message: str) -> Finding:
    return Finding(Check.RUNTIME, subject, not problems, "; ".join(problems) if problems else ok_message)


def _sample_findings(folder: Path, stdout: str) -> list[Finding]:
    files = sorted(folder.glob("*.csv")) if folder.is_dir() else []
    problems = []
    if len(files) != 1 or not re.fullmatch(r".+-pid\d+\.csv", files[0].name if files else ""):
        return [
            _finding("sample CSV", [f"expected one {{hostname}}-pid{{pid}}.csv, found {[f.name for f in files]}"], "")
        ]
    with files[0].open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    columns = len(formats.SAMPLE_COLUMNS)
    if [len(r) for r in rows] != [columns] * 3:
        problems.append(f"expected 3 rows of {columns} columns (no header), got {[len(r) for r in rows]}")
    else:
        if {r[0] for r in rows} != {"ENV_NOTFOUND_DLC_JOB_ID"} or {r[1] for r in rows} != {"sample"}:
            problems.append("job_id / cat columns wrong")
        if [r[2] for r in rows] != ["u1/0", "u2/sample", "u3/sample"]:
            problems.append(f"sample_id rule broken: {[r[2] for r in rows]}")
        if [r[3] for r in rows] != [_status("TRAIN_UPDATE"), _status("TRAIN_UPDATE"), _status("DATA_PREPROCESS")]:
            problems.append(f"sample_status rule broken: {[r[3] for r in rows]}")
        if not all(r[4].isdigit() and len(r[4]) >= 13 for r in rows):
            problems.append("timestamp is not in milliseconds")
        want = [
            _content("SelfCheck", "Disk", "TRAIN_UPDATE", "3", "self_check"),
            _content("SelfCheck", "Disk", "TRAIN_UPDATE", "3", "self_check"),
            _content("SelfCheck", "Disk", "DATA_PREPROCESS"),
        ]
        if [r[5] for r in rows] != want:
            problems.append(f"content column wrong: {[r[5] for r in rows]}")
    if not FLOW_LINE.search(stdout):
        problems.append("no [FLOW_TRACE] stdout line in the expected format")
    return [
        _finding(
            "sample CSV", problems, "3 rows: columns, sample_id rule, status, content and stdout echo as specified"
        )
    ]


def _status(stage: str) -> str:
    """The sample_status the format gives a row of ``stage``."""
    return formats.STATUS_COMPLETE if stage in formats.COMPLETE_STAGES else formats.STATUS_RUNNING


def _content(*values: str) -> str:
    """The content field of a row: each value under its key, in the format's order."""
    return "|".join(f"{key}={value}" for key, value in zip(formats.CONTENT_KEYS, values))


def _progress_findings(folder: Path, stdout: str) -> list[Finding]:
    files = sorted(folder.glob("*.log")) if folder.is_dir() else []
    problems = []
    if len(files) != 1 or not re.fullmatch(r"\d{8}-\d{2}\.log", files[0].name):
        problems.append(f"expected one progress/YYYYMMDD-HH.log, found {[f.name for f in files]}")
    else:
        lines = files[0].read_text(encoding="utf-8").splitlines()
        want = ["self-check progress line", "Step 3 train started", "Task u1/0 is completed, score=0.0 status=Finished"]
        if lines != want:
            problems.append(f"progress file holds {lines}")
    if "self-check progress line\n" not in stdout:
        problems.append("progress line not echoed on stdout")
    return [_finding("progress log", problems, "hourly file name and bare lines as specified")]


def _trajectory_findings(folder: Path) -> list[Finding]:
    files = sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
    problems = []
    if len(files) != 1 or not re.fullmatch(r"trajectory_7_\d{8}_\d{6}_\d{3}\.jsonl", files[0].name):
        return [
            _finding("trajectory JSONL", [f"expected trajectory_7_{{ts}}.jsonl, found {[f.name for f in files]}"], "")
        ]
    lines = files[0].read_text(encoding="utf-8").splitlines()
    try:
        record = json.loads(lines[0]) if len(lines) == 1 else None
        raw = json.loads(record["raw_message"]) if record else None
    except (ValueError, KeyError, TypeError):
        record = raw = None
    if record is None or raw is None:
        return [
            _finding(
                "trajectory JSONL", [f"expected one JSON line with a raw_message string, got {len(lines)} lines"], ""
            )
        ]
    if tuple(record) != TRAJECTORY_LINE_KEYS:
        problems.append(f"top-level keys {list(record)}")
    if (record.get("prompt_uid"), record.get("sample_index")) != ("u1", 0):
        problems.append("prompt_uid / sample_index values wrong")
    if set(raw) != RAW_KEYS:
        problems.append(
            f"raw_message keys differ: extra {sorted(set(raw) - RAW_KEYS)}, missing {sorted(RAW_KEYS - set(raw))}"
        )
    turns = raw.get("turns") or [{}]
    if set(turns[0]) != TURN_KEYS:
        problems.append(
            f"turn keys differ: extra {sorted(set(turns[0]) - TURN_KEYS)}, missing {sorted(TURN_KEYS - set(turns[0]))}"
        )
    elif turns[0]["sglang_time_ms"] != 500.0 or turns[0]["turn_total_time_ms"] is None:
        problems.append("sglang timing / turn total not derived")
    return [_finding("trajectory JSONL", problems, "file name, top-level keys and raw_message fields as specified")]


def _discovery_findings(folder: Path, traces: Path) -> list[Finding]:
    want = {
        "verl_trace_sample_path.txt": traces / "sample",
        "verl_progress_path.txt": traces / "progress",
        "verl_trace_trajectory_path.txt": traces / "trajectory",
    }
    problems = []
    for name, target in want.items():
        path = folder / name
        if not path.is_file() or path.read_text(encoding="utf-8").strip() != str(target):
            problems.append(f"{name} missing or wrong")
    return [_finding("discovery files", problems, "the three discovery files point at the output folders")]
