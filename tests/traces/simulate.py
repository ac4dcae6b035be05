"""A run simulator that writes trace folders through the real tracing runtime.

It lives next to the tests that are its main user; ``benchmarks/analyze.py`` puts
this folder on ``sys.path`` and imports it too. It plans the v0/v1 runs of every
mode the tests vary; running a plan is the shipped
:mod:`trace_instrument.traces.simrun` (``demo --traces`` runs its own plan with it).

A run is planned in the parent process (:func:`plan_run` from a seeded
:class:`SimConfig`, or a hand-written :class:`RunPlan` for small fixtures), then
each simulated process (trainer or agent-loop worker, each on a named host) is a
real OS process that imports ``templates/runtime`` installed as
``verl/utils/tracing/`` and makes the calls the inserted templates make:
``trace_flow`` with the v0/v1 stage strings, ``log_progress`` /
``log_step_window`` / ``log_gen_throughput_tokens`` / ``log_rollout_completed``,
and ``TrajectoryTracker`` + ``TurnRecord`` + ``TrajectoryStore`` for every
finished rollout. Time is virtual: the runtime's clock (``settings.clock``) is set
before every call, shifted by the host's clock skew; ``socket.gethostname`` is
the simulated host name. Nothing is written by hand except, on request, a
status file (the runtime's loss counters), torn tails (a run copied while
being written) and extra bad lines for the bad-input tests.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path

from trace_instrument.traces.simrun import RunSettings, SimProcess, run_processes
from trace_instrument.traces.simrun import random_uid as _uid

TOOLS = ("search", "python", "calculator")


@dataclass
class TurnPlan:
    """One generate call (times in virtual ms, before the host's skew)."""

    send_ms: int
    recv_ms: int | None
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str
    tool: str | None = None  # tool called after this turn
    tool_end_ms: int | None = None
    sglang: dict[str, float] | None = None  # meta_info timing fields, when collected


@dataclass
class TrajPlan:
    """One rollout: prompt ``uid``, over-sample ``index``, on worker process ``worker``."""

    uid: str
    index: int
    gen_step: int
    worker: int
    start_ms: int  # agent task started (v1: session started)
    turns: list[TurnPlan]
    completed_ms: int | None = None  # agent run completed; None = stuck
    reward_ms: int | None = None
    score: float = 0.0
    train_step: int | None = None  # None = never trained
    agent_stop: str | None = None  # why the agent loop ended (None: a loop that records none)
    response_length: int | None = None  # verl's: len(response_ids), cut at the budget
    # the weight versions it was generated with, as verl's servers report them (min_global_steps,
    # max_global_steps); None: not reported
    weight_versions: tuple[int, int] | None = None


@dataclass
class StepPlan:
    """Trainer-side times of one global step (virtual ms)."""

    step: int
    preprocess_ms: int
    dispatch_ms: int
    gen_end_ms: int
    train_ms: dict[str, int]  # stage -> time of its row
    sync_ms: int


@dataclass
class ProcPlan:
    host: str
    role: str  # "trainer" or "worker"
    skew_ms: int = 0


@dataclass
class RunPlan:
    """Everything one simulated run writes."""

    version: str  # "v0" or "v1"
    mode: str  # "sync", "colocate_async" or "separate_async"
    rollout_n: int
    procs: list[ProcPlan]
    steps: list[StepPlan]
    trajs: list[TrajPlan]
    job_id: str | None = None
    total_steps: int | None = None
    text_chars: int = 40
    status_lost: dict[int, dict[str, dict[str, int]]] = field(default_factory=dict)  # proc -> lost counts
    max_response_length: int | None = None  # rollout.response_length in the config; None: not recorded


@dataclass
class SimConfig:
    """Knobs of a generated run; every random choice comes from ``seed``."""

    seed: int = 0
    version: str = "v1"
    mode: str = "colocate_async"
    hosts: int = 2
    workers_per_host: int = 2
    steps: int = 4
    prompts_per_step: int = 8
    rollout_n: int = 4
    tool_prob: float = 0.6
    max_turns: int = 5
    stop_weights: tuple[tuple[str, float], ...] = (("stop", 0.7), ("length", 0.18), ("abort", 0.05), ("", 0.07))
    stuck_prob: float = 0.03
    staleness_weights: tuple[float, ...] = (0.6, 0.3, 0.1)  # async only: P(train step = gen step + d)
    skew_ms: int = 15  # hosts other than the trainer's get a skew in [-skew_ms, skew_ms]
    sglang_timing: bool = True
    job_id: str | None = "dlc-sim-job"
    text_chars: int = 40
    max_response_length: int | None = 2048  # None: trajectories record no response length
    agent_stop_prob: float = 0.85  # trajectories whose agent loop records why it ended
    spanning_prob: float = 0.1  # async only: rollouts generated partly with the previous step's weights
    weight_versions: bool = True  # the servers report them (min/max_global_steps)


def small_config(seed: int, prompts_per_step: int = 3) -> SimConfig:
    """A run that simulates in about a second: 2 hosts of one worker, 3 steps, 2 rollouts a prompt."""
    return SimConfig(seed=seed, hosts=2, workers_per_host=1, steps=3, prompts_per_step=prompts_per_step, rollout_n=2)


# -- planning ------------------------------------------------------------------------------------


def _plan_turns(rng: random.Random, cfg: SimConfig, start_ms: int) -> tuple[list[TurnPlan], int]:
    turns: list[TurnPlan] = []
    now = start_ms + rng.randint(1, 5)
    prompt = rng.randint(60, 400)
    n_turns = 1
    while n_turns < cfg.max_turns and rng.random() < cfg.tool_prob:
        n_turns += 1
    for k in range(n_turns):
        last = k == n_turns - 1
        completion = rng.randint(16, 1200)
        gen_ms = int(completion * rng.uniform(0.8, 2.5)) + rng.randint(20, 200)
        sglang = None
        if cfg.sglang_timing:
            queue = rng.uniform(1, 80)
            ttft = rng.uniform(5, 60)
            sglang = {
                "e2e": gen_ms * 0.9 / 1000,
                "queue": queue / 1000,
                "ttft": ttft / 1000,
                "prefill": ttft * 0.6 / 1000,
            }
        finish = rng.choices([w[0] for w in cfg.stop_weights], [w[1] for w in cfg.stop_weights])[0] if last else "stop"
        turn = TurnPlan(now, now + gen_ms, prompt, completion, finish, sglang=sglang)
        now = turn.recv_ms
        if not last:
            turn.tool = rng.choice(TOOLS)
            base = {"search": 400, "python": 1500, "calculator": 30}[turn.tool]
            turn.tool_end_ms = now + int(base * rng.uniform(0.5, 2.0)) + 1
            now = turn.tool_end_ms + rng.randint(1, 10)
        prompt += completion + 40 + 12
        turns.append(turn)
    return turns, now


def plan_run(cfg: SimConfig) -> RunPlan:
    """A multi-host run: a trainer on host 0, agent-loop workers on every host."""
    rng = random.Random(cfg.seed)
    hosts = [f"node-{h}" for h in range(cfg.hosts)]
    procs = [ProcPlan(hosts[0], "trainer", 0)]
    skews = {hosts[0]: 0, **{h: rng.randint(-cfg.skew_ms, cfg.skew_ms) for h in hosts[1:]}}
    for host in hosts:
        for _ in range(cfg.workers_per_host):
            procs.append(ProcPlan(host, "worker", skews[host]))
    workers = [i for i, p in enumerate(procs) if p.role == "worker"]
    is_async = cfg.mode != "sync"
    steps: list[StepPlan] = []
    trajs: list[TrajPlan] = []
    wave_start = 1_000
    train_free = 0
    by_train_step: dict[int, list[TrajPlan]] = {}
    for step in range(1, cfg.steps + 1):
        pre = wave_start
        dispatch = pre + 3
        wave: list[TrajPlan] = []
        for p in range(cfg.prompts_per_step):
            uid = _uid(rng)
            worker = workers[(step * cfg.prompts_per_step + p) % len(workers)]
            for i in range(cfg.rollout_n):
                start = dispatch + rng.randint(5, 40)
                turns, end = _plan_turns(rng, cfg, start)
                traj = TrajPlan(uid, i, step, worker, start, turns, score=rng.choice([0.0, 1.0]))
                if rng.random() < cfg.stuck_prob:
                    cut = rng.randint(0, len(turns) - 1)
                    traj.turns = turns[: cut + 1]
                    last = traj.turns[-1]
                    if last.tool and rng.random() < 0.5:
                        last.tool_end_ms = None  # hung in a tool call
                    else:
                        last.recv_ms, last.tool, last.tool_end_ms = None, None, None  # hung in generation
                else:
                    traj.completed_ms = end + rng.randint(1, 5)
                    traj.reward_ms = traj.completed_ms + rng.randint(5, 120)
                    d = rng.choices(range(len(cfg.staleness_weights)), cfg.staleness_weights)[0] if is_async else 0
                    if step + d <= cfg.steps:
                        traj.train_step = step + d
                        by_train_step.setdefault(step + d, []).append(traj)
                wave.append(traj)
        trajs.extend(wave)
        done = [t.reward_ms for t in wave if t.reward_ms is not None]
        wave_end = max(done) + 5 if done else dispatch + 10
        batch = by_train_step.get(step, [])
        ready = max([t.reward_ms for t in batch if t.reward_ms is not None], default=wave_end)
        # the trainer's generation window ends when its batch is complete (async: not the whole wave)
        gen_end = max(ready + 5 if is_async else wave_end, train_free)
        t0 = gen_end + rng.randint(20, 60)
        train = {}
        now = t0
        for stage, (lo, hi) in (
            ("TRAIN_SAMPLE", (5, 20)),
            ("TRAIN_REWARD", (200, 800)),
            ("TRAIN_LOGPROB", (1500, 4000)),
            ("TRAIN_REF_LOGPROB", (1200, 3500)),
            ("TRAIN_ADVANTAGE", (30, 120)),
            ("TRAIN_UPDATE", (4000, 12000)),
        ):
            now += rng.randint(lo, hi)
            train[stage] = now
        sync = now + rng.randint(800, 2000)
        train_free = sync + 10
        steps.append(StepPlan(step, pre, dispatch, gen_end, train, sync))
        wave_start = wave_end + rng.randint(10, 50) if is_async else sync + rng.randint(50, 300)
    _plan_agent_stops(cfg, trajs)
    return RunPlan(
        cfg.version, cfg.mode, cfg.rollout_n, procs, steps, trajs, cfg.job_id, cfg.steps, cfg.text_chars,
        max_response_length=cfg.max_response_length,
    )  # fmt: skip


OBSERVATION_TOKENS = 52  # per tool turn: what _plan_turns adds to the next prompt besides the completion


def _plan_agent_stops(cfg: SimConfig, trajs: list[TrajPlan]) -> None:
    """verl's response length and the agent loop's stop reason of each trajectory, drawn from a
    generator of their own (the rest of the plan stays what the seed gave before they existed)."""
    rng = random.Random(f"{cfg.seed}-agent-stop")
    for traj in trajs:
        spans = cfg.mode != "sync" and traj.gen_step > 1 and rng.random() < cfg.spanning_prob
        if cfg.weight_versions:
            traj.weight_versions = (traj.gen_step - 1 if spans else traj.gen_step, traj.gen_step)
        full = sum(t.completion_tokens for t in traj.turns) + OBSERVATION_TOKENS * (len(traj.turns) - 1)
        budget = cfg.max_response_length
        traj.response_length = full if budget is None else min(full, budget)
        if rng.random() >= cfg.agent_stop_prob:
            continue
        if budget is not None and full >= budget:
            traj.agent_stop = "response_length"
        elif len(traj.turns) == cfg.max_turns:
            traj.agent_stop = "max_assistant_turns"
        else:
            traj.agent_stop = "no_tool_call"


# -- actions: what each process calls, in virtual-time order -------------------------------------

V0_MODULES = {
    "trainer": "RayPPOTrainer",
    "train_from": {
        "TRAIN_REWARD": ("RayPPOTrainer", "RewardManager", "reward_extracted"),
        "TRAIN_LOGPROB": ("ActorRolloutRefWorker", "RayPPOTrainer", "old_log_prob_computed"),
        "TRAIN_REF_LOGPROB": ("RefPolicyWorker", "RayPPOTrainer", "ref_log_prob_computed"),
        "TRAIN_ADVANTAGE": ("RayPPOTrainer", "RayPPOTrainer", "advantage_computed"),
        "TRAIN_UPDATE": ("ActorRolloutRefWorker", "RayPPOTrainer", "actor_parameters_updated"),
    },
}
V1_TRAIN = {
    "TRAIN_SAMPLE": ("ReplayBuffer", "PPOTrainerV1", "sampled_from_replay_buffer"),
    "TRAIN_REWARD": ("PPOTrainerV1", "RewardLoopManager", "reward_extracted"),
    "TRAIN_LOGPROB": ("ActorRolloutWorker", "PPOTrainerV1", "old_log_prob_computed"),
    "TRAIN_REF_LOGPROB": ("RefPolicyWorker", "PPOTrainerV1", "ref_log_prob_computed"),
    "TRAIN_ADVANTAGE": ("PPOTrainerV1", "PPOTrainerV1", "advantage_computed"),
    "TRAIN_UPDATE": ("ActorRolloutWorker", "PPOTrainerV1", "actor_parameters_updated"),
}
PROGRESS_PAIRS = {
    "TRAIN_REWARD": "compute reward",
    "TRAIN_LOGPROB": "compute log prob",
    "TRAIN_REF_LOGPROB": "compute ref log prob",
    "TRAIN_ADVANTAGE": "compute adv",
    "TRAIN_UPDATE": "update actor",
}


def _flow(t, uid, traj, frm, to, stage, detail="", step=-1):
    return (t, "flow", (uid, traj, frm, to, stage, detail, step))


def _progress(t, line):
    return (t, "progress", (line,))


def trainer_actions(plan: RunPlan) -> list[tuple]:
    """The trainer's calls: data preparation, dispatch, progress lines, training and sync rows."""
    v1 = plan.version == "v1"
    pp = "disagg: " if plan.mode == "separate_async" else ""
    acts: list[tuple] = []
    total = plan.total_steps or len(plan.steps)
    acts.append(_progress(0, f"Total training steps: {total}"))
    for line in (
        "'train_batch_size': 8,",
        f"'rollout_n': {plan.rollout_n},",
        "'ppo_mini_batch_size': 4,",
        f"'num_minibatches': {2 * plan.rollout_n},",
        f"'total_training_steps': {total}",
    ):
        acts.append(_progress(0, line))
    by_step: dict[int, list[TrajPlan]] = {}
    trained: dict[int, list[TrajPlan]] = {}
    for traj in plan.trajs:
        by_step.setdefault(traj.gen_step, []).append(traj)
        if traj.train_step is not None:
            trained.setdefault(traj.train_step, []).append(traj)
    workers = sorted({t.worker for t in plan.trajs})
    for sp in plan.steps:
        s = sp.step
        wave = by_step.get(s, [])
        uids = list(dict.fromkeys(t.uid for t in wave))
        t = sp.preprocess_ms
        if pp:
            acts.append(_progress(t, "=" * 20 + f" Step {s} " + "=" * 20))
        else:
            acts.append(_progress(t, "=" * 20 + f" Epoch 0, consumed {s - 1} batches, Step {s} " + "=" * 20))
        trainer = "PPOTrainerV1" if v1 else "RayPPOTrainer"
        acts.append(_flow(t, uids, "N/A", "DataLoader", trainer, "DATA_PREPROCESS", "uid_generated", s))
        acts.append((t, "window", (s, "rollout", "started")))
        if pp:
            acts.append(_progress(t, f"Trainer: try to load global batch@{s}, chunk[0/0] from replay_queue"))
        else:
            acts.append(_progress(t, "start generation"))
        if v1:
            acts.append(
                _flow(
                    t + 1,
                    uids,
                    "N/A",
                    "PPOTrainerV1",
                    "AgentLoopManagerTQ",
                    "DATA_DISPATCH",
                    "dispatched_to_agent_loop_manager",
                    s,
                )
            )
        else:
            acts.append(
                _flow(
                    t + 1,
                    [x.uid for x in wave],
                    [str(x.index) for x in wave],
                    "RayPPOTrainer",
                    "RayPPOTrainer",
                    "DATA_PREPROCESS",
                    "traj_uid_generated_by_repeat",
                    s,
                )
            )
        for w_idx, w in enumerate(workers):
            chunk = [x for x in wave if x.worker == w]
            if not chunk:
                continue
            if v1:
                chunk_uids = list(dict.fromkeys(x.uid for x in chunk))
                acts.append(
                    _flow(
                        sp.dispatch_ms,
                        chunk_uids,
                        "N/A",
                        "AgentLoopManagerTQ",
                        f"AgentLoopWorkerTQ_{w_idx}",
                        "DATA_DISPATCH",
                        "dispatched_to_agent_loop_worker",
                        s,
                    )
                )
            else:
                acts.append(
                    _flow(
                        sp.dispatch_ms,
                        [x.uid for x in chunk],
                        [str(x.index) for x in chunk],
                        "AgentLoopManager",
                        f"AgentLoopWorker_{w_idx}",
                        "DATA_DISPATCH",
                        "dispatched_to_agent_loop_worker",
                        s,
                    )
                )
        g = sp.gen_end_ms
        if pp:
            acts.append(_progress(g, f"Trainer: successfully load global batch@{s}, chunk[0/0] from replay_queue"))
        else:
            acts.append(_progress(g, "end generation"))
        acts.append((g, "window", (s, "rollout", "finished")))
        batch = sorted(trained.get(s, []), key=lambda x: (x.uid, x.index))
        if not pp:
            tokens = sum(turn.completion_tokens for x in wave if x.completed_ms for turn in x.turns)
            acts.append((g, "throughput", (tokens, max(g - sp.preprocess_ms, 1) / 1000)))
        b_uids = [x.uid for x in batch]
        b_trajs = [str(x.index) for x in batch]
        stages = V1_TRAIN if v1 else V0_MODULES["train_from"]
        for stage, (frm, to, detail) in stages.items():
            ts = sp.train_ms[stage]
            pair = PROGRESS_PAIRS.get(stage)
            if stage == "TRAIN_UPDATE":
                acts.append((ts - 2, "window", (s, "train", "started")))
            if pair:
                acts.append(_progress(ts - 1, f"{pp}start {pair}"))
            if b_uids:
                acts.append(_flow(ts, b_uids, b_trajs, frm, to, stage, detail, s))
            if pair:
                acts.append(_progress(ts + 1, f"{pp}end {pair}"))
            if stage == "TRAIN_UPDATE":
                acts.append((ts + 2, "window", (s, "train", "finished")))
        acts.append(_progress(sp.sync_ms - 1, f"{pp}start sync params"))
        acts.append(
            _flow(
                sp.sync_ms,
                "*",
                "*",
                "CheckpointEngineManager",
                "RolloutReplica",
                "SYNC_PARAMS",
                f"weights_synced_global_step={s}",
                s,
            )
        )
        acts.append(_progress(sp.sync_ms + 1, f"{pp}end sync params"))
    return acts


def worker_actions(plan: RunPlan, worker: int) -> list[tuple]:
    """One agent-loop worker's calls for its rollouts (v0: per trajectory; v1: per prompt, then sessions)."""
    v1 = plan.version == "v1"
    mine = [t for t in plan.trajs if t.worker == worker]
    acts: list[tuple] = []
    agent = "AgentLoop(tool_agent)"
    if v1:
        first: dict[str, TrajPlan] = {}
        for traj in mine:
            if traj.uid not in first or traj.start_ms < first[traj.uid].start_ms:
                first[traj.uid] = traj
        for uid, traj in first.items():
            acts.append(
                _flow(
                    traj.start_ms - 1,
                    uid,
                    "N/A",
                    "AgentLoopWorkerTQ",
                    agent,
                    "AGENT_LOOP",
                    "agent_task_started",
                    traj.gen_step,
                )
            )
    for traj in mine:
        key = f"{traj.uid}/{traj.index}"
        ix = str(traj.index)
        if v1:
            acts.append(
                _flow(
                    traj.start_ms,
                    traj.uid,
                    ix,
                    "AgentLoopWorkerTQ",
                    "AgentLoopWorkerTQ",
                    "AGENT_LOOP",
                    f"session_started_session_id={ix}_rollout_n={plan.rollout_n}",
                    traj.gen_step,
                )
            )
        else:
            acts.append(
                _flow(
                    traj.start_ms,
                    traj.uid,
                    ix,
                    "AgentLoopWorker",
                    agent,
                    "AGENT_LOOP",
                    "agent_task_started",
                    traj.gen_step,
                )
            )
        acts.append((traj.start_ms, "register", (key, traj.uid, ix, traj.gen_step)))
        for k, turn in enumerate(traj.turns):
            acts.append(
                _flow(
                    turn.send_ms,
                    traj.uid,
                    ix,
                    "ToolAgentLoop",
                    "RolloutReplica",
                    "LLM_GENERATE",
                    "sending_generate_request",
                )
            )
            acts.append((turn.send_ms, "turn_start", (key, turn.prompt_tokens)))
            if turn.recv_ms is None:
                continue
            acts.append((turn.recv_ms, "turn_end", (key, turn.completion_tokens, turn.finish_reason, turn.sglang)))
            acts.append(
                _flow(
                    turn.recv_ms,
                    traj.uid,
                    ix,
                    "RolloutReplica",
                    "ToolAgentLoop",
                    "LLM_GENERATE",
                    "received_generate_response",
                )
            )
            if turn.tool and turn.tool_end_ms is not None:
                acts.append(
                    _flow(
                        turn.tool_end_ms,
                        traj.uid,
                        ix,
                        "Tool",
                        "ToolAgentLoop",
                        "AGENT_TOOL",
                        f"tool_executed_name={turn.tool}",
                    )
                )
                acts.append((turn.tool_end_ms, "observation", (key, turn.tool)))
        if traj.completed_ms is None:
            continue
        acts.append(
            _flow(
                traj.completed_ms,
                traj.uid,
                ix,
                agent,
                "AgentLoopWorker",
                "AGENT_LOOP",
                "agent_run_completed",
                traj.gen_step,
            )
        )
        acts.append(
            _flow(
                traj.reward_ms,
                traj.uid,
                ix,
                "RewardLoopWorker",
                "AgentLoopWorker",
                "ROLLOUT_REWARD",
                f"reward_score_computed_score={traj.score}",
            )
        )
        acts.append((traj.reward_ms, "completed", (traj.uid, ix, traj.score)))
        acts.append((traj.reward_ms + 1, "dump", (key, traj.agent_stop, traj.response_length, traj.weight_versions)))
    return acts


# -- running: one OS process per simulated process -------------------------------------------------


def run_plan(plan: RunPlan, trace_dir: Path, parallel: int = 2) -> Path:
    """Write ``plan`` into ``trace_dir`` with one subprocess per simulated process; returns ``trace_dir``."""
    trace_dir = Path(trace_dir)
    processes = [
        SimProcess(
            proc.host,
            proc.skew_ms,
            trainer_actions(plan) if proc.role == "trainer" else worker_actions(plan, index),
            plan.status_lost.get(index),
        )
        for index, proc in enumerate(plan.procs)
    ]
    metrics = {"generate_sequences": 1.0, "tool_calls": 0.0, "num_preempted": -1}
    run = RunSettings(plan.rollout_n, plan.max_response_length, plan.job_id, plan.text_chars, metrics)
    run_processes(processes, trace_dir, run, parallel)
    return trace_dir


def tear_tail(csv_file: Path, keep_fraction: float = 0.5) -> bytes:
    """Cut the last row of ``csv_file`` part-way (a copy taken while the run was writing); returns the torn bytes."""
    data = csv_file.read_bytes()
    start = data.rstrip(b"\r\n").rfind(b"\n") + 1
    cut = start + max(1, int((len(data) - start) * keep_fraction))
    csv_file.write_bytes(data[:cut])
    return data[start:cut]


def simulate(cfg: SimConfig, trace_dir: Path) -> RunPlan:
    """Plan and write a run; returns the plan (the ground truth the tests recompute from)."""
    plan = plan_run(cfg)
    run_plan(plan, trace_dir)
    return plan


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="Write a simulated trace folder through the real runtime.")
    parser.add_argument("trace_dir", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--version", default="v1")
    parser.add_argument("--mode", default="colocate_async")
    ns = parser.parse_args()
    cfg = SimConfig(seed=ns.seed, steps=ns.steps, prompts_per_step=ns.prompts, version=ns.version, mode=ns.mode)
    simulate(cfg, ns.trace_dir)
    print(json.dumps({"trace_dir": str(ns.trace_dir)}))
