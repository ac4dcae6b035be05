"""Writes a planned run through the real tracing runtime: one OS process per simulated process.

The one runner behind ``trace-instrument demo --traces`` (traces/demo.py plans a run that drifts)
and the tests' simulator (tests/traces/simulate.py plans v0/v1 runs of every mode, and imports
this module): each plans its run, then hands every process's calls here. The shipped runtime
(templates/runtime) is copied into a scratch folder as ``verl/utils/tracing`` and imported from
there, as an instrumented verl imports it. Time is virtual: the runtime's clock
(``settings.clock``) is set before every call, shifted by the host's clock skew;
``socket.gethostname`` is the simulated host name.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trace_instrument.data import data_dir

BASE_EPOCH_MS = 1_787_215_020_000  # 2026-08-20, as in the formats document's examples
Action = tuple[int, str, Any]  # (virtual ms, what, its arguments)


@dataclass(frozen=True)
class SimProcess:
    """One simulated OS process: its host, the host's clock skew and its calls."""

    host: str
    skew_ms: int
    actions: list[Action]
    status_lost: dict[str, dict[str, int]] | None = None  # losses the runtime reports in its status file


@dataclass(frozen=True)
class RunSettings:
    """What every process of one run shares: the config the runtime reads, the tokenizer's text."""

    rollout_n: int
    max_response_length: int | None  # rollout.response_length; None: not in the config
    job_id: str | None = None
    text_chars: int = 40
    agent_metrics: dict[str, float] = field(default_factory=lambda: {"generate_sequences": 1.0, "tool_calls": 0.0})


def random_uid(rng: random.Random) -> str:
    """A uuid4-shaped prompt uid drawn from ``rng``."""
    return f"{rng.getrandbits(32):08x}-{rng.getrandbits(16):04x}-4{rng.getrandbits(12):03x}-a{rng.getrandbits(12):03x}-{rng.getrandbits(48):012x}"


# One simulated process: the runtime imported from the scratch copy, the plan's calls in time order.
CHILD = r"""
import json, os, socket, sys, types
plan_file, host, skew_ms, base_ms = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
socket.gethostname = lambda: host
from verl.utils import tracing
from verl.utils.tracing import losses, settings
with open(plan_file, encoding="utf-8") as f:
    payload = json.load(f)
actions, text_chars, status_lost = payload["actions"], payload["text_chars"], payload["status_lost"]
now = [0.0]
settings.clock = lambda: now[0]

class Tok:
    def decode(self, ids, skip_special_tokens=False):
        return "t" * min(len(ids), text_chars)
    def encode(self, text, add_special_tokens=False):
        return list(range(max(1, len(text) // 4)))

tok = Tok()
rollout = {"n": payload["rollout_n"]}
if payload["max_response_length"] is not None:
    rollout["response_length"] = payload["max_response_length"]
config = types.SimpleNamespace(actor_rollout_ref=types.SimpleNamespace(rollout=rollout))
tracker, store, live = tracing.TrajectoryTracker(), None, {}
for ms, kind, args in sorted(actions, key=lambda a: a[0]):
    now[0] = (base_ms + ms + skew_ms + 0.25) / 1000.0  # +0.25: int(now * 1000) gives back ms
    if kind == "flow":
        tracing.trace_flow(*args)
    elif kind == "progress":
        tracing.log_progress(args[0])
    elif kind == "window":
        tracing.log_step_window(*args)
    elif kind == "throughput":
        tracing.log_gen_throughput_tokens(*args)
    elif kind == "completed":
        tracing.log_rollout_completed(*args)
    elif kind == "register":
        key, uid, ix, step = args
        if store is None:
            store = tracing.TrajectoryStore(os.path.join(tracing.get_trace_dir(), "trajectory"), os.getpid())
        item = types.SimpleNamespace(non_tensor_batch={"uid": uid, "traj_uid": ix}, meta_info={"global_step": step})
        traj_key, traj_uid = tracker.register_trajectory(item)
        live[key] = [item, traj_key, traj_uid, now[0], None, []]
    elif kind == "turn_start":
        key, prompt_tokens = args
        entry = live[key]
        entry[4] = tracing.TurnRecord(range(prompt_tokens))
        entry[5] = [{"role": "user", "content": "q"}]
    elif kind == "turn_end":
        key, completion, finish, sglang = args
        entry = live[key]
        rec = entry[4]
        meta = {}
        if sglang:
            sent = rec.turn.start_ts
            meta = {"e2e_latency": sglang["e2e"], "queue_time": sglang["queue"],
                    "request_received_ts": sent, "prefill_finished_ts": sent + sglang["ttft"],
                    "prefill_launch_latency": sglang["prefill"]}
        ids = list(range(completion))
        rec.fill_sglang_response(text=tok.decode(ids), response_ids=ids, finish_reason=finish, meta=meta)
        if rec.turn.completion_token_count is None:
            rec.turn.completion_token_count = len(ids)
        rec.stamp_end()
        tracker.append_turn_record(entry[1], rec)
    elif kind == "observation":
        key, tool = args
        entry = live[key]
        messages = entry[5]
        pre = len(messages)
        messages.append({"role": "tool", "content": f"{tool} result " + "o" * text_chars})
        entry[4].patch_observation(messages, pre, len(messages), tokenizer=tok)
    elif kind == "dump":
        key, agent_stop, response_length, versions = args
        item, traj_key, traj_uid, created, _, _ = live.pop(key)
        if agent_stop is not None:
            # as the C5 templates call it from the agent loop's termination checks
            tracing.trace_agent_stop(types.SimpleNamespace(_traj_tracker=tracker),
                                     types.SimpleNamespace(trace_traj_key=traj_key), agent_stop)
        extra = {"min_global_steps": versions[0], "max_global_steps": versions[1]} if versions else {}
        output = types.SimpleNamespace(response_ids=range(response_length), extra_fields=extra) if response_length is not None else None
        traj = tracker.build_trajectory(item, traj_key, traj_uid, created, tokenizer=tok,
                                        instance_id=os.getpid(), config=config,
                                        agent_metrics=payload["agent_metrics"], agent_output=output)
        store.write(traj)
        tracker.unregister_trajectory(traj_key)
if store is not None:
    store.close(60)
tracing.flush(60)
if status_lost is not None:
    # the losses the plan wants reported go into the runtime's own counts: it writes the status file
    for facility, reasons in status_lost.items():
        for reason, count in reasons.items():
            losses.count_lost(facility, reason, count, report=False)
"""


def install_runtime(root: Path) -> Path:
    """The shipped runtime copied to ``root/verl/utils/tracing`` (parents get empty ``__init__.py``),
    as in an instrumented verl tree; an existing copy is kept."""
    for parent in (root / "verl", root / "verl" / "utils"):
        parent.mkdir(parents=True, exist_ok=True)
        (parent / "__init__.py").touch()
    target = root / "verl" / "utils" / "tracing"
    if not target.exists():
        source = data_dir("templates") / "runtime"
        shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return root


def run_processes(processes: list[SimProcess], trace_dir: Path, run: RunSettings, parallel: int = 2) -> None:
    """Write the calls of ``processes`` into ``trace_dir`` (created), ``parallel`` OS processes at a
    time. Raises RuntimeError with a process's own error output when one fails."""
    trace_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="trace-instrument-sim-") as tmp:
        root = install_runtime(Path(tmp) / "root")
        env = {k: v for k, v in os.environ.items() if k not in ("VERL_TRACE_DIR", "DLC_JOB_ID")}
        env.update(PYTHONPATH=str(root), VERL_TRACE_DIR=str(trace_dir.resolve()), TZ="UTC")
        env["VERL_TRACE_DISCOVERY_DIR"] = tmp
        if run.job_id:
            env["DLC_JOB_ID"] = run.job_id
        running: list[subprocess.Popen[bytes]] = []
        for index, proc in enumerate(processes):
            plan_file = Path(tmp) / f"proc{index}.json"
            payload = {
                "actions": proc.actions,
                "status_lost": proc.status_lost,
                "rollout_n": run.rollout_n,
                "max_response_length": run.max_response_length,
                "text_chars": run.text_chars,
                "agent_metrics": run.agent_metrics,
            }
            plan_file.write_text(json.dumps(payload), encoding="utf-8")
            args = [sys.executable, "-c", CHILD, str(plan_file), proc.host, str(proc.skew_ms), str(BASE_EPOCH_MS)]
            running.append(subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
            while sum(p.poll() is None for p in running) >= parallel:
                next(p for p in running if p.poll() is None).wait()
        for p in running:
            _, err = p.communicate()
            if p.returncode != 0:
                raise RuntimeError(f"a simulated process failed ({p.returncode}): {err.decode(errors='replace')}")
