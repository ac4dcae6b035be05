"""Manual check (not collected by pytest): a trace folder written by instrumented verl's own code paths.

Without torch or ray, verl's trainer and workers cannot run; what can run is the code the codemod
puts into verl. This script executes, with stub objects standing in for verl's classes and the
real runtime (templates/runtime installed as verl/utils/tracing):

- the instrumented ``AgentLoopWorker._run_agent_loop`` and ``SingleTurnAgentLoop.run`` exactly as
  ``trace-instrument apply`` writes them into verl 0.9.0 from PyPI (extracted with ast and exec'd);
- the inserted templates of the trainer side (uid generation, the traj_uid repeat, dispatch,
  reward, log prob, ref, advantage, update, sync, init lines, banner) and of the agent-loop
  worker (task started, tracker, store, rollout reward), as the codemod inserts them;
- the progress window lines of the anchors (``log_step_window`` / ``log_progress`` calls).

Then it runs ``analyze``, ``export --perfetto`` and ``export --parquet`` on the folder and prints
what they found. Usage: ``python tests/traces/manual_real_paths.py OUT_DIR``.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import importlib
import logging
import os
import shutil
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from trace_instrument.traces.simrun import install_runtime

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
TEMPLATES = REPO / "templates" / "points"


def instrumented_agent_loop(out: Path) -> Path:
    """verl 0.9.0's agent-loop folder after `trace-instrument apply`, in a copy under ``out``."""
    from trace_instrument.wheels import verl_tree

    tree = out / "verl-0.9.0"
    if not tree.exists():
        shutil.copytree(verl_tree("0.9.0") / "verl", tree / "verl")
        subprocess.run([sys.executable, "-m", "trace_instrument", "apply", str(tree)], check=True, capture_output=True)
    return tree / "verl" / "experimental" / "agent_loop"


def source_of(path: Path, cls: str, name: str) -> str:
    source = path.read_text(encoding="utf-8")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == name:
                    segment = ast.get_source_segment(source, item)
                    assert segment is not None
                    return textwrap.dedent(" " * item.col_offset + segment)
    raise LookupError(f"{cls}.{name} not in {path}")


def template(name: str, namespace: dict) -> None:
    code = compile((TEMPLATES / name).read_text(encoding="utf-8"), name, "exec")
    exec(code, namespace)  # noqa: S102 - running the inserted code is the point


class DataProtoStub:
    def __init__(self, non_tensor_batch: dict, meta_info: dict | None = None) -> None:
        self.non_tensor_batch = non_tensor_batch
        self.meta_info = meta_info or {}
        self.batch = None

    def __len__(self) -> int:
        return len(next(iter(self.non_tensor_batch.values())))


@contextlib.contextmanager
def no_op(*args, **kwargs):
    yield


def main(out: Path) -> None:
    root = install_runtime(out / "pkgroot")
    trace_dir = out / "trace"
    os.environ["VERL_TRACE_DIR"] = str(trace_dir)
    os.environ["VERL_TRACE_DISCOVERY_DIR"] = str(out)
    os.environ["DLC_JOB_ID"] = "real-paths-check"
    sys.path.insert(0, str(root))
    tracing = importlib.import_module("verl.utils.tracing")
    names = {n: getattr(tracing, n) for n in tracing.__all__}
    logger = logging.getLogger("check")
    base = {**names, "np": np, "os": os, "time": time, "SimpleNamespace": SimpleNamespace, "logger": logger}

    config = SimpleNamespace(
        data=SimpleNamespace(train_batch_size=2),
        actor_rollout_ref=SimpleNamespace(
            rollout={"n": 2, "over_sampling": None}, actor=SimpleNamespace(ppo_epochs=1, ppo_mini_batch_size=2)
        ),
    )
    config.actor_rollout_ref.rollout = SimpleNamespace(n=2, get=lambda k, d=None: {"n": 2}.get(k, d))
    trainer = SimpleNamespace(global_steps=1, total_training_steps=2, config=config)
    template("progress/init_lines.py", {**base, "self": trainer})

    # the worker: C0 tracker and store, as inserted into AgentLoopBase / AgentLoopWorker __init__
    agent_loop = SimpleNamespace()
    template("trajectory/tracker.py", {**base, "self": agent_loop})
    worker = SimpleNamespace(config=config, tokenizer=None, llm_client=None, processor=None, dataset_cls=None, tools=[])
    template("trajectory/store.py", {**base, "self": worker})

    class Tokenizer:
        def decode(self, ids, skip_special_tokens=False):
            return "tok" * len(ids)

    worker.tokenizer = Tokenizer()
    agent_loop_dir = instrumented_agent_loop(out)
    run_agent_loop_src = source_of(agent_loop_dir / "agent_loop.py", "AgentLoopWorker", "_run_agent_loop")
    single_turn_src = source_of(agent_loop_dir / "single_turn_agent_loop.py", "SingleTurnAgentLoop", "run")

    async def generate(**kwargs):
        await asyncio.sleep(0.01 * (1 + len(kwargs["prompt_ids"]) % 3))
        return SimpleNamespace(
            token_ids=list(range(7)),
            stop_reason="stop",
            extra_fields={},
            num_preempted=None,
            log_probs=None,
            routed_experts=None,
        )

    async def empty_mm(messages):
        return {}

    async def chat_template(messages, **kwargs):
        return list(range(12))

    loop_self = SimpleNamespace(
        process_multi_modal_info=empty_mm,
        _get_mm_processor_kwargs=lambda audios: None,
        enable_continuous_token=False,
        apply_chat_template=chat_template,
        rollout_config=SimpleNamespace(),
        server_manager=SimpleNamespace(generate=generate),
        tokenizer=worker.tokenizer,
        _traj_tracker=agent_loop._traj_tracker,
        response_length=64,
    )
    single_ns = {
        **base,
        "simple_timer": no_op,
        "uuid4": uuid.uuid4,
        "AgentLoopOutput": lambda **kw: SimpleNamespace(reward_score=None, **kw),
    }
    exec(single_turn_src, single_ns)  # noqa: S102 - verl's instrumented code, from the golden output
    agent_loop.run = lambda sampling_params, **kw: single_ns["run"](loop_self, sampling_params, **kw)

    async def postprocess(output, validate, **kwargs):
        result = {"reward_score": 1.0}
        output.reward_score = 1.0
        template("sample_flow/v0_rollout_reward.py", {**base, "kwargs": kwargs, "result": result})
        return output

    worker._agent_loop_postprocess = postprocess
    run_ns = {
        **base,
        "rollout_trace_attr": no_op,
        "_agent_loop_registry": {"single_turn_agent": {}},
        "hydra": SimpleNamespace(utils=SimpleNamespace(instantiate=lambda **kw: agent_loop)),
        "DictConfigWrap": lambda *a, **k: None,
        "ToolListWrap": lambda *a, **k: None,
    }
    exec(run_agent_loop_src, run_ns)  # noqa: S102 - verl's instrumented code, from the golden output

    for step in (1, 2):
        trainer.global_steps = step
        template("progress/v0_step_banner.py", {**base, "self": trainer, "epoch": 0, "batches_consumed": step - 1})
        tracing.log_step_window(step, "rollout", "started")
        tracing.log_progress("start generation")
        batch = DataProtoStub({"uid": np.array([str(uuid.uuid4()) for _ in range(2)], dtype=object)})
        template("sample_flow/v0_uid_generated.py", {**base, "self": trainer, "batch": batch})
        gen = DataProtoStub({"uid": np.repeat(batch.non_tensor_batch["uid"], 2)})
        template(
            "sample_flow/v0_traj_uid_repeat.py", {**base, "self": trainer, "gen_batch_output": gen, "rollout_n": 2}
        )
        prompts = DataProtoStub(gen.non_tensor_batch, {"global_steps": step, "validate": False})
        template("sample_flow/v0_dispatch_worker.py", {**base, "prompts": prompts, "chunkes": [prompts]})

        async def rollouts(step=step, gen=gen, prompts=prompts):
            tasks = []
            for i in range(len(gen)):
                kwargs = {k: v[i] for k, v in gen.non_tensor_batch.items()}
                kwargs["raw_prompt"] = [{"role": "user", "content": "hi"}]
                template(
                    "sample_flow/v0_task_started.py", {**base, "validate": False, "kwargs": kwargs, "batch": prompts}
                )
                trajectory = {"step": step, "sample_index": i, "rollout_n": 2, "validate": False}
                tasks.append(
                    run_ns["_run_agent_loop"](worker, {}, trajectory, agent_name="single_turn_agent", **kwargs)
                )
            await asyncio.gather(*tasks)

        asyncio.run(rollouts())
        tracing.log_progress("end generation")
        tracing.log_step_window(step, "rollout", "finished")
        tracing.log_gen_throughput_tokens(28, 0.05)
        ns = {**base, "self": trainer, "batch": gen}
        for name, pair in (
            ("v0_train_reward.py", "compute reward"),
            ("v0_train_logprob.py", "compute log prob"),
            ("v0_train_ref_logprob.py", "compute ref log prob"),
            ("v0_train_advantage.py", "compute adv"),
        ):
            tracing.log_progress(f"start {pair}")
            time.sleep(0.01)
            template(f"sample_flow/{name}", ns)
            tracing.log_progress(f"end {pair}")
        tracing.log_step_window(step, "train", "started")
        tracing.log_progress("start update actor")
        time.sleep(0.02)
        template("sample_flow/v0_train_update.py", ns)
        tracing.log_progress("end update actor")
        tracing.log_step_window(step, "train", "finished")
        tracing.log_progress("start sync params")
        template("sample_flow/sync_params.py", ns)
        tracing.log_progress("end sync params")
    worker._trajectory_store.close(10)
    tracing.flush(10)

    from trace_instrument.traces.analyze import Options, analyze
    from trace_instrument.traces.parquet import export_parquet
    from trace_instrument.traces.perfetto import export_perfetto

    result = analyze([trace_dir], Options(cache=False))
    print(
        "header:",
        result.header.rows_read,
        "rows,",
        result.header.trajectories_read,
        "trajectories, steps",
        result.header.steps,
        "skipped",
        result.header.skipped,
    )
    print("steps:", [(s.step, s.rollout_ms, s.train_ms, s.progress, s.progress_order_ok) for s in result.steps])
    print("funnel:", [(f.milestone, f.prompts, f.trajectories) for f in result.funnel])
    print("latencies:", [(x.from_event.split(":")[-1], x.to_event.split(":")[-1], x.count) for x in result.latencies])
    print("stop reasons:", result.rollouts.stop_reasons if result.rollouts else None)
    print("perfetto:", export_perfetto([trace_dir], out / "timeline.json"))
    print("parquet:", export_parquet([trace_dir], out / "parquet"))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
