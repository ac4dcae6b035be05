"""``trace-instrument demo --traces DIR``: a simulated multi-host run written by the real runtime.

For a newcomer without a GPU: the tracing runtime this package installs into verl trees
(templates/runtime) is copied into a scratch folder as ``verl/utils/tracing`` and imported from
there, as an instrumented verl imports it; one OS process per simulated process (a trainer, and
agent-loop workers on every host, each its own host name and clock skew) makes the calls the
inserted templates make: ``trace_flow`` with verl's v1 stages, progress and step-window lines, and
a ``TrajectoryTracker`` + ``TrajectoryStore`` trajectory per rollout. Time is virtual (the runtime's
``settings.clock``), so the run of several minutes is written in seconds. Nothing is written by
hand. From the middle of the run on, responses grow longer (more clipped, more ``length`` stops,
more turns): the page's trend charts show it.

The processes are run by :mod:`trace_instrument.traces.simrun`, which the tests' simulator
(tests/traces/simulate.py) runs its plans with too. The plan and the calls stay this module's
own: the tests' planner draws v0/v1 runs of every mode with the knobs the tests vary (stuck tool
calls, spanning weight versions, status-file losses, runs without sglang timing), and shipping
it for the demo's one v1 run that drifts would ship those test variants with it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trace_instrument.traces.simrun import Action, RunSettings, SimProcess, random_uid, run_processes

MAX_RESPONSE = 2048  # rollout.response_length in the simulated config
TOOLS = {"search": 400, "python": 1500, "calculator": 30}  # a tool call's typical time, ms
TRAIN_STAGES = (  # stage, (from, to, detail), time range of its row after the previous one (ms)
    ("TRAIN_SAMPLE", ("ReplayBuffer", "PPOTrainerV1", "sampled_from_replay_buffer"), (5, 20)),
    ("TRAIN_REWARD", ("PPOTrainerV1", "RewardLoopManager", "reward_extracted"), (200, 800)),
    ("TRAIN_LOGPROB", ("ActorRolloutWorker", "PPOTrainerV1", "old_log_prob_computed"), (1500, 4000)),
    ("TRAIN_REF_LOGPROB", ("RefPolicyWorker", "PPOTrainerV1", "ref_log_prob_computed"), (1200, 3500)),
    ("TRAIN_ADVANTAGE", ("PPOTrainerV1", "PPOTrainerV1", "advantage_computed"), (30, 120)),
    ("TRAIN_UPDATE", ("ActorRolloutWorker", "PPOTrainerV1", "actor_parameters_updated"), (4000, 12000)),
)


@dataclass(frozen=True)
class DemoConfig:
    """The simulated run's shape; every random choice comes from ``seed``."""

    seed: int = 0
    hosts: int = 3
    workers_per_host: int = 2
    steps: int = 16
    prompts_per_step: int = 8
    rollout_n: int = 4
    job_id: str = "demo-job"


@dataclass
class _Traj:
    uid: str
    index: int
    step: int
    worker: int
    start: int
    turns: list[dict[str, Any]] = field(default_factory=list)
    done: int | None = None  # agent run completed; None: stuck
    reward: int = 0
    score: float = 0.0
    trained: int | None = None
    stop: str = "no_tool_call"
    length: int = 0


def _rollout(rng: random.Random, traj: _Traj, drift: float) -> int:
    """The turns of one rollout (``drift`` from 0 to 1: how far the run has gone unstable); its end."""
    now, prompt, turns = traj.start + rng.randint(1, 5), rng.randint(60, 400), 1
    while turns < 5 and rng.random() < 0.45 + 0.3 * drift:
        turns += 1
    for k in range(turns):
        completion = int(rng.randint(16, 700) * (1 + 2.5 * drift * rng.random()))
        gen = int(completion * rng.uniform(0.8, 2.5)) + rng.randint(20, 200)
        queue, ttft = rng.uniform(1, 80), rng.uniform(5, 60)
        turn: dict[str, Any] = {
            "send": now,
            "recv": now + gen,
            "prompt": prompt,
            "completion": completion,
            "finish": "stop",
            "sglang": {"e2e": gen * 0.9 / 1000, "queue": queue / 1000, "ttft": ttft / 1000, "prefill": ttft * 0.6e-3},
        }
        now += gen
        if k < turns - 1:
            turn["tool"] = rng.choice(sorted(TOOLS))
            now += int(TOOLS[turn["tool"]] * rng.uniform(0.5, 2.0)) + 1
            turn["tool_end"] = now
            now += rng.randint(1, 10)
        prompt += completion + 52
        traj.turns.append(turn)
    full = sum(t["completion"] for t in traj.turns) + 52 * (turns - 1)
    traj.length = min(full, MAX_RESPONSE)
    traj.stop = "response_length" if full >= MAX_RESPONSE else "max_assistant_turns" if turns == 5 else "no_tool_call"
    traj.turns[-1]["finish"] = "length" if full >= MAX_RESPONSE else rng.choice(["stop"] * 9 + ["abort"])
    return now


def plan(cfg: DemoConfig) -> tuple[list[tuple[str, int, bool]], list[list[Action]]]:
    """The processes (host, clock skew, is the trainer) and each one's calls, in virtual time."""
    rng = random.Random(cfg.seed)
    hosts = [f"node-{h}" for h in range(cfg.hosts)]
    skews = {hosts[0]: 0, **{h: rng.randint(-15, 15) for h in hosts[1:]}}
    procs = [(hosts[0], 0, True)] + [(h, skews[h], False) for h in hosts for _ in range(cfg.workers_per_host)]
    trajs: list[_Traj] = []
    windows: list[tuple[int, int, dict[str, int], int]] = []  # start, generation end, stage rows, sync
    wave_start, train_free = 1_000, 0
    for step in range(1, cfg.steps + 1):
        drift = max(0.0, (step - cfg.steps / 2) / (cfg.steps / 2))
        wave = []
        for p in range(cfg.prompts_per_step):
            uid = random_uid(rng)
            worker = 1 + (step * cfg.prompts_per_step + p) % (len(procs) - 1)
            for i in range(cfg.rollout_n):
                traj = _Traj(uid, i, step, worker, wave_start + 3 + rng.randint(5, 40), score=rng.choice([0.0, 1.0]))
                end = _rollout(rng, traj, drift)
                if rng.random() < 0.03:  # stuck: its last call never answered
                    traj.turns[-1].update(recv=None, tool=None)
                else:
                    traj.done = end + rng.randint(1, 5)
                    traj.reward = traj.done + rng.randint(5, 120)
                    lag = rng.choices((0, 1, 2), (0.6, 0.3, 0.1))[0]
                    traj.trained = step + lag if step + lag <= cfg.steps else None
                wave.append(traj)
        trajs += wave
        batch = [t.reward for t in trajs if t.trained == step]
        gen_end = max(max(batch, default=wave_start + 10) + 5, train_free)
        now, rows = gen_end + rng.randint(20, 60), {}
        for stage, _, (lo, hi) in TRAIN_STAGES:
            now += rng.randint(lo, hi)
            rows[stage] = now
        sync = now + rng.randint(800, 2000)
        train_free = sync + 10
        windows.append((wave_start, gen_end, rows, sync))
        wave_start = max(t.reward for t in wave if t.done) + rng.randint(10, 50)
    actions = [_trainer(cfg, trajs, windows)] + [_worker(cfg, trajs, w) for w in range(1, len(procs))]
    return procs, actions


def _flow(t: int, uid: Any, traj: Any, frm: str, to: str, stage: str, detail: str = "", step: int = -1) -> Action:
    return (t, "flow", [uid, traj, frm, to, stage, detail, step])


def _trainer(cfg: DemoConfig, trajs: list[_Traj], windows: list[tuple[int, int, dict[str, int], int]]) -> list[Action]:
    acts: list[Action] = [(0, "progress", [f"Total training steps: {cfg.steps}"])]
    acts += [
        (0, "progress", [f"'rollout_n': {cfg.rollout_n},"]),
        (0, "progress", [f"'total_training_steps': {cfg.steps}"]),
    ]
    for step, (start, gen_end, rows, sync) in enumerate(windows, 1):
        wave = [t for t in trajs if t.step == step]
        uids = list(dict.fromkeys(t.uid for t in wave))
        acts.append((start, "progress", ["=" * 20 + f" Epoch 0, consumed {step - 1} batches, Step {step} " + "=" * 20]))
        acts.append(_flow(start, uids, "N/A", "DataLoader", "PPOTrainerV1", "DATA_PREPROCESS", "uid_generated", step))
        acts += [(start, "window", [step, "rollout", "started"]), (start, "progress", ["start generation"])]
        acts.append(
            _flow(
                start + 1,
                uids,
                "N/A",
                "PPOTrainerV1",
                "AgentLoopManagerTQ",
                "DATA_DISPATCH",
                "dispatched_to_agent_loop_manager",
                step,
            )
        )
        for worker in sorted({t.worker for t in wave}):
            mine = list(dict.fromkeys(t.uid for t in wave if t.worker == worker))
            acts.append(
                _flow(
                    start + 3,
                    mine,
                    "N/A",
                    "AgentLoopManagerTQ",
                    f"AgentLoopWorkerTQ_{worker - 1}",
                    "DATA_DISPATCH",
                    "dispatched_to_agent_loop_worker",
                    step,
                )
            )
        tokens = sum(turn["completion"] for t in wave if t.done for turn in t.turns)
        acts += [(gen_end, "progress", ["end generation"]), (gen_end, "window", [step, "rollout", "finished"])]
        acts.append((gen_end, "throughput", [tokens, max(gen_end - start, 1) / 1000]))
        batch = sorted((t for t in trajs if t.trained == step), key=lambda t: (t.uid, t.index))
        for stage, (frm, to, detail), _ in TRAIN_STAGES:
            if stage == "TRAIN_UPDATE":
                acts.append((rows[stage] - 2, "window", [step, "train", "started"]))
            if batch:
                acts.append(
                    _flow(
                        rows[stage], [t.uid for t in batch], [str(t.index) for t in batch], frm, to, stage, detail, step
                    )
                )
            if stage == "TRAIN_UPDATE":
                acts.append((rows[stage] + 2, "window", [step, "train", "finished"]))
        acts.append(
            _flow(
                sync,
                "*",
                "*",
                "CheckpointEngineManager",
                "RolloutReplica",
                "SYNC_PARAMS",
                f"weights_synced_global_step={step}",
                step,
            )
        )
    return acts


def _worker(cfg: DemoConfig, trajs: list[_Traj], worker: int) -> list[Action]:
    acts: list[Action] = []
    agent, me = "AgentLoop(tool_agent)", "AgentLoopWorkerTQ"
    mine = [t for t in trajs if t.worker == worker]
    for uid in dict.fromkeys(t.uid for t in mine):
        first = min((t for t in mine if t.uid == uid), key=lambda t: t.start)
        acts.append(_flow(first.start - 1, uid, "N/A", me, agent, "AGENT_LOOP", "agent_task_started", first.step))
    for t in mine:
        key, ix = f"{t.uid}/{t.index}", str(t.index)
        detail = f"session_started_session_id={ix}_rollout_n={cfg.rollout_n}"
        acts += [
            _flow(t.start, t.uid, ix, me, me, "AGENT_LOOP", detail, t.step),
            (t.start, "register", [key, t.uid, ix, t.step]),
        ]
        for turn in t.turns:
            acts.append(
                _flow(
                    turn["send"],
                    t.uid,
                    ix,
                    "ToolAgentLoop",
                    "RolloutReplica",
                    "LLM_GENERATE",
                    "sending_generate_request",
                )
            )
            acts.append((turn["send"], "turn_start", [key, turn["prompt"]]))
            if turn["recv"] is None:
                continue
            acts.append((turn["recv"], "turn_end", [key, turn["completion"], turn["finish"], turn["sglang"]]))
            acts.append(
                _flow(
                    turn["recv"],
                    t.uid,
                    ix,
                    "RolloutReplica",
                    "ToolAgentLoop",
                    "LLM_GENERATE",
                    "received_generate_response",
                )
            )
            if turn.get("tool"):
                acts.append(
                    _flow(
                        turn["tool_end"],
                        t.uid,
                        ix,
                        "Tool",
                        "ToolAgentLoop",
                        "AGENT_TOOL",
                        f"tool_executed_name={turn['tool']}",
                    )
                )
                acts.append((turn["tool_end"], "observation", [key, turn["tool"]]))
        if t.done is None:
            continue
        acts.append(_flow(t.done, t.uid, ix, agent, "AgentLoopWorker", "AGENT_LOOP", "agent_run_completed", t.step))
        acts.append(
            _flow(
                t.reward,
                t.uid,
                ix,
                "RewardLoopWorker",
                "AgentLoopWorker",
                "ROLLOUT_REWARD",
                f"reward_score_computed_score={t.score}",
            )
        )
        acts.append((t.reward, "completed", [t.uid, ix, t.score]))
        acts.append((t.reward + 1, "dump", [key, t.stop, t.length, [max(t.step - 1, 0), t.step]]))
    return acts


def write_demo_run(trace_dir: Path, cfg: DemoConfig = DemoConfig(), parallel: int = 2) -> int:
    """Simulate ``cfg`` into ``trace_dir`` (created) through the real runtime; returns the processes
    run. Raises RuntimeError with a process's own error output when one fails."""
    procs, actions = plan(cfg)
    processes = [SimProcess(host, skew, acts) for (host, skew, _), acts in zip(procs, actions)]
    run_processes(processes, trace_dir, RunSettings(cfg.rollout_n, MAX_RESPONSE, cfg.job_id), parallel)
    return len(procs)
