"""A plain-Python reading of a trace folder (csv, json, numpy), independent of the tool's SQL.

The tests compare the tool's numbers with these. Definitions follow docs/analyze.md:
a sample's rows are ordered by pipeline rank, then time (generate/tool rows share a rank);
a prompt's last sample-level row leads to each of its trajectories' first row.
"""

from __future__ import annotations

import csv
import itertools
import json
import math
import re
from collections import defaultdict
from pathlib import Path

import numpy as np

CONTENT = re.compile(r"^from=([^|]*)\|to=([^|]*)\|stage=([^|]*)(?:\|global_step=([^|]*))?(?:\|detail=(.*))?$")
RANKS = {
    ("DATA_PREPROCESS", "uid_generated"): 1,
    ("DATA_PREPROCESS", "traj_uid_generated_by_repeat"): 2,
    ("DATA_DISPATCH", "dispatched_to_agent_loop_manager"): 3,
    ("DATA_DISPATCH", "dispatched_to_agent_loop_worker"): 4,
    ("AGENT_LOOP", "agent_task_started"): 5,
    ("AGENT_LOOP", "session_started"): 6,
    ("LLM_GENERATE", "sending_generate_request"): 7,
    ("LLM_GENERATE", "received_generate_response"): 7.1,
    ("AGENT_TOOL", "tool_executed"): 7.2,
    ("AGENT_LOOP", "agent_run_completed"): 10,
    ("ROLLOUT_REWARD", "reward_score_computed"): 11,
    ("TRAIN_SAMPLE", None): 12,
    ("TRAIN_REWARD", None): 13,
    ("TRAIN_LOGPROB", None): 14,
    ("TRAIN_REF_LOGPROB", None): 15,
    ("TRAIN_ADVANTAGE", None): 16,
    ("TRAIN_UPDATE", None): 17,
}


def event_of(stage: str, detail: str) -> str | None:
    """``STAGE:detail`` with the variable part of the detail dropped; None for stages outside the pipeline."""
    base = re.sub(r"_(score|name|session_id)=.*$", "", detail or "")
    if (stage, base) in RANKS:
        return f"{stage}:{base}"
    if (stage, None) in RANKS:
        return stage
    return None


def rank(event: str) -> float:
    stage, _, detail = event.partition(":")
    value = RANKS.get((stage, detail or None), RANKS.get((stage, None)))
    assert value is not None
    return 7 if int(value) == 7 else value


def read_rows(trace_dir: Path) -> list[dict]:
    rows = []
    for path in sorted((trace_dir / "sample").glob("*.csv")):
        with open(path, newline="", encoding="utf-8") as f:
            for fields in csv.reader(f):
                match = CONTENT.match(fields[5])
                stage, step, detail = match.group(3), match.group(4), match.group(5) or ""
                rows.append(
                    {
                        "file": path.name,
                        "sample_id": fields[2],
                        "ts": int(fields[4]),
                        "stage": stage,
                        "detail": detail,
                        "step": int(step) if step else None,
                        "event": event_of(stage, detail),
                    }
                )
    return rows


def by_sample(rows: list[dict]) -> dict[str, list[dict]]:
    groups: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        if row["event"] is not None:
            groups[row["sample_id"]].append(row)
    for group in groups.values():
        group.sort(key=lambda r: (rank(r["event"]), r["ts"]))
    return groups


def transitions(rows: list[dict]) -> dict[tuple[str, str], list[int]]:
    groups = by_sample(rows)
    out: dict[tuple[str, str], list[int]] = defaultdict(list)
    for sample_id, group in groups.items():
        for a, b in itertools.pairwise(group):
            out[(a["event"], b["event"])].append(b["ts"] - a["ts"])
        uid, _, traj = sample_id.rpartition("/")
        if traj != "sample" and f"{uid}/sample" in groups:
            last = groups[f"{uid}/sample"][-1]
            out[(last["event"], group[0]["event"])].append(group[0]["ts"] - last["ts"])
    return out


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=float), q))


def trajectories(trace_dir: Path) -> list[dict]:
    out = []
    for path in sorted((trace_dir / "trajectory").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            top = json.loads(line)
            payload = json.loads(top["raw_message"]) if "raw_message" in top else top
            payload["prompt_uid"] = top.get("prompt_uid")
            out.append(payload)
    return out


def stop_reason(trajectory: dict) -> str:
    """An aborted last turn's finish reason, else the agent loop's reason, else the last turn's
    finish reason, else unknown (the bucket of docs/analyze.md)."""
    last = trajectory["turns"][-1]["finish_reason"] if trajectory["turns"] else ""
    if last in ("aborted", "abort"):
        return last
    return trajectory.get("agent_stop_reason") or last or "unknown"


def response_lengths(trajs: list[dict], batch_max: bool = False) -> tuple[list[int], float | None]:
    """verl's response_length of the trajectories that recorded one, and the share at the length
    verl's trainer pads to: the budget (legacy trainer), or the longest of ``trajs`` (``batch_max``:
    the v1 trainer, ``trajs`` being one step's batch)."""
    lengths = [t["response_length"] for t in trajs if t.get("response_length") is not None]
    if batch_max:
        return lengths, (lengths.count(max(lengths)) / len(lengths) if lengths else None)
    budgeted = [t for t in trajs if t.get("response_length") is not None and t.get("max_response_length") is not None]
    clipped = sum(t["response_length"] == t["max_response_length"] for t in budgeted)
    return lengths, (clipped / len(budgeted) if budgeted else None)


def trained_steps(rows: list[dict]) -> dict[str, int]:
    """Sample id -> the step of its TRAIN_UPDATE row."""
    return {r["sample_id"]: r["step"] for r in rows if r["stage"] == "TRAIN_UPDATE"}


def step_scores(rows: list[dict]) -> dict[int, list[float]]:
    """Per train step, the reward score of each trained sample: its last ROLLOUT_REWARD row's (of
    rows in the same last millisecond, the largest score, nan above every number)."""
    last: dict[str, tuple[int, list[float]]] = {}
    for r in (r for r in rows if r["stage"] == "ROLLOUT_REWARD"):
        score = float(r["detail"].split("=", 1)[1])
        ts, scores = last.get(r["sample_id"], (r["ts"], []))
        if r["ts"] > ts:
            ts, scores = r["ts"], []
        if r["ts"] == ts:
            last[r["sample_id"]] = (ts, [*scores, score])
    scored = {sid: max(scores, key=lambda v: (math.isnan(v), v)) for sid, (_, scores) in last.items()}
    trained = trained_steps(rows)
    out: dict[int, list[float]] = {}
    for sample_id, score in scored.items():
        if sample_id in trained and math.isfinite(score):
            out.setdefault(trained[sample_id], []).append(score)
    return out
