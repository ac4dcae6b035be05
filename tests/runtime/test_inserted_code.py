"""The code apply puts into verl 0.9.0, run as apply placed it, never raises on input the business
code accepts, with tracing off or on (issue #17, item 12).

verl itself cannot run here (no torch, no ray), but the code the codemod inserts can: each test
applies the catalog to a copy of the pristine 0.9.0 tree, reads a point's statements back out of the
instrumented file (or a whole instrumented verl method, for the dispatch and the C1 rewrite), and
executes them against stand-ins for verl's objects and the runtime package loaded on its own from
templates/runtime. The inputs are the ones the templates used to crash on: a batch without `uid`, a
reward result without a score, an agent loop that returns an empty list of outputs (v1's
postprocessing accepts one). With tracing off nothing may raise or be written; with tracing on nothing
may raise, and a sample the code cannot identify is written with the placeholder uid `unknown`.
"""

from __future__ import annotations
import __future__

import ast
import asyncio
import contextlib
import csv
import io
import logging
import os
from pathlib import Path
from types import CodeType, SimpleNamespace

import numpy as np
import pytest

from trace_instrument.locate import FileLocator
from trace_instrument.model import Catalog

AGENT_LOOP = "verl/experimental/agent_loop/agent_loop.py"
AGENT_LOOP_TQ = "verl/trainer/ppo/v1/agent_loop_tq.py"
STEP = 4

# stage, detail, from and to of the v0 trainer points: the seed's line formats
TRAINER_POINTS = {
    "flow.v0.train-reward": ("TRAIN_REWARD", "reward_extracted", "RayPPOTrainer", "RewardManager"),
    "flow.v0.train-logprob": ("TRAIN_LOGPROB", "old_log_prob_computed", "ActorRolloutRefWorker", "RayPPOTrainer"),
    "flow.v0.train-ref-logprob": ("TRAIN_REF_LOGPROB", "ref_log_prob_computed", "RefPolicyWorker", "RayPPOTrainer"),
    "flow.v0.train-advantage": ("TRAIN_ADVANTAGE", "advantage_computed", "RayPPOTrainer", "RayPPOTrainer"),
    "flow.v0.train-update": ("TRAIN_UPDATE", "actor_parameters_updated", "ActorRolloutRefWorker", "RayPPOTrainer"),
}


class DataProtoStub:
    """What the inserted code uses of verl's DataProto: its two dicts, len(), chunk() and concat()."""

    def __init__(self, non_tensor_batch: dict[str, np.ndarray], meta_info: dict | None = None, size: int = 0):
        self.batch = None
        self.non_tensor_batch = non_tensor_batch
        self.meta_info = meta_info if meta_info is not None else {}
        self._size = size

    def __len__(self) -> int:
        # DataProto.__len__ without tensors: the first non-tensor column's length
        return next((len(v) for v in self.non_tensor_batch.values()), self._size)

    def chunk(self, chunks: int) -> list[DataProtoStub]:
        step = len(self) // chunks
        return [
            DataProtoStub({k: v[i * step : (i + 1) * step] for k, v in self.non_tensor_batch.items()}, self.meta_info)
            for i in range(chunks)
        ]

    @staticmethod
    def concat(items: list[DataProtoStub]) -> DataProtoStub:
        keys = items[0].non_tensor_batch
        return DataProtoStub({k: np.concatenate([i.non_tensor_batch[k] for i in items]) for k in keys})


def prompts_without_uid(n: int) -> dict[str, np.ndarray]:
    return {"raw_prompt": np.array([f"prompt {i}" for i in range(n)], dtype=object)}


# -- the instrumented tree, and a point's code as apply placed it -----------------------------------


@pytest.fixture(scope="module")
def instrumented(applied_090: Path) -> Path:
    """verl 0.9.0 after one apply: the worker's shared tree (read only here)."""
    return applied_090


def placed(checkout: Path, catalog: Catalog, point_id: str) -> CodeType:
    """The statements a point's (single) insert edit put into its file, compiled as they stand there."""
    point = catalog.point(point_id)
    text = (checkout / point.file).read_text(encoding="utf-8")
    tree = ast.parse(text)
    locator = FileLocator(tree, [p for p in catalog.points if p.file == point.file], catalog.helpers, text)
    (block,) = locator.state(point).blocks
    return compile(ast.Module(body=block.top, type_ignores=[]), str(checkout / point.file), "exec")


def method(checkout: Path, file: str, cls: str, name: str, namespace: dict) -> object:
    """An instrumented verl method, defined in `namespace`: annotations left unevaluated (as verl's are),
    decorators left out (verl's `auto_await` would run the coroutine in a loop of its own)."""
    source = (checkout / file).read_text(encoding="utf-8")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            (function,) = [
                f for f in node.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name == name
            ]
            function.decorator_list = []
            code = compile(ast.Module(body=[function], type_ignores=[]), str(checkout / file), "exec",
                           flags=__future__.annotations.compiler_flag, dont_inherit=True)  # fmt: skip
            exec(code, namespace)  # noqa: S102 - verl's instrumented code is what is under test
            return namespace[name]
    raise LookupError(f"{cls}.{name} not in {file}")


# -- the runtime, off or on ---------------------------------------------------------------------------


@pytest.fixture(params=["off", "on"])
def tracing(request: pytest.FixtureRequest, load_runtime, trace_dir: Path):
    """The runtime package with tracing off (no $VERL_TRACE_DIR, the default) or on."""
    return load_runtime(trace_dir=trace_dir if request.param == "on" else None)


def tracing_names(runtime) -> dict[str, object]:
    return {name: getattr(runtime, name) for name in runtime.__all__}


def flow_rows(load_runtime, runtime, trace_dir: Path) -> list[tuple[str, str]]:
    """(sample_id, content) of every sample-flow row written."""
    text = load_runtime.read_csv(runtime, trace_dir).decode("utf-8")
    return [(row[2], row[5]) for row in csv.reader(io.StringIO(text))]


def content(from_module: str, to_module: str, stage: str, detail: str, global_step: int | None = None) -> str:
    step = f"|global_step={global_step}" if global_step is not None else ""
    return f"from={from_module}|to={to_module}|stage={stage}{step}|detail={detail}"


def assert_nothing_written(runtime, trace_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert runtime.get_trace_dir() is None
    assert runtime.flush(10)
    assert not trace_dir.exists()
    assert "[FLOW_TRACE]" not in capsys.readouterr().out


# -- v0 trainer points ------------------------------------------------------------------------------------


@pytest.mark.parametrize("uids", [None, ["a", "b", "c"]], ids=["without-uid", "with-uid"])
@pytest.mark.parametrize("point_id", sorted(TRAINER_POINTS))
def test_a_v0_trainer_point_traces_a_batch_without_uid(
    instrumented, catalog, tracing, load_runtime, trace_dir, capsys, point_id, uids
):
    batch = prompts_without_uid(3)
    if uids is not None:
        batch["uid"] = np.array(uids, dtype=object)
    namespace = {**tracing_names(tracing), "np": np, "self": SimpleNamespace(global_steps=STEP)}
    exec(placed(instrumented, catalog, point_id), {**namespace, "batch": DataProtoStub(batch)})  # noqa: S102
    if tracing.get_trace_dir() is None:
        assert_nothing_written(tracing, trace_dir, capsys)
        return
    stage, detail, source, target = TRAINER_POINTS[point_id]
    expected = content(source, target, stage, detail, STEP)
    assert flow_rows(load_runtime, tracing, trace_dir) == [(f"{u}/sample", expected) for u in uids or ["unknown"] * 3]


def test_the_traj_uid_repeat_numbers_and_traces_a_batch_without_uid(
    instrumented, catalog, tracing, load_runtime, trace_dir, capsys
):
    gen_batch_output = DataProtoStub(prompts_without_uid(4))
    namespace = {**tracing_names(tracing), "np": np, "self": SimpleNamespace(global_steps=STEP), "rollout_n": 2}
    exec(placed(instrumented, catalog, "flow.v0.traj-uid-repeat"), {**namespace, "gen_batch_output": gen_batch_output})  # noqa: S102
    assert list(gen_batch_output.non_tensor_batch["traj_uid"]) == ["0", "1", "0", "1"], "the injection is business data"
    if tracing.get_trace_dir() is None:
        assert_nothing_written(tracing, trace_dir, capsys)
        return
    expected = content("RayPPOTrainer", "RayPPOTrainer", "DATA_PREPROCESS", "traj_uid_generated_by_repeat", STEP)
    assert flow_rows(load_runtime, tracing, trace_dir) == [(f"unknown/{i % 2}", expected) for i in range(4)]


# -- agent loop: dispatch, reward, the C1 rewrite -----------------------------------------------------------


def test_the_v0_dispatch_block_traces_a_batch_without_uid(
    instrumented, catalog, tracing, load_runtime, trace_dir, capsys
):
    prompts = DataProtoStub(prompts_without_uid(4), {"global_steps": STEP})
    namespace = {**tracing_names(tracing), "np": np, "prompts": prompts, "chunkes": prompts.chunk(2)}
    exec(placed(instrumented, catalog, "flow.v0.dispatch-worker"), namespace)  # noqa: S102
    if tracing.get_trace_dir() is None:
        assert_nothing_written(tracing, trace_dir, capsys)
        return
    assert flow_rows(load_runtime, tracing, trace_dir) == [
        ("unknown/sample", content("AgentLoopManager", f"AgentLoopWorker_{i // 2}", "DATA_DISPATCH",
                                   "dispatched_to_agent_loop_worker", STEP))
        for i in range(4)
    ]  # fmt: skip


def test_agent_loop_manager_generate_sequences_dispatches_a_batch_without_uid(
    instrumented, tracing, load_runtime, trace_dir, capsys
):
    """AgentLoopManager.generate_sequences exactly as apply wrote it, end to end with stub workers."""

    async def generate(chunk):
        return DataProtoStub(chunk.non_tensor_batch, {"metrics": [{"generate_sequences": 1.0}] * len(chunk)})

    workers = [SimpleNamespace(generate_sequences=SimpleNamespace(remote=generate)) for _ in range(2)]
    manager = SimpleNamespace(agent_loop_workers=workers, _performance_metrics=lambda metrics, output: {"t": 1})
    namespace = {**tracing_names(tracing), "np": np, "asyncio": asyncio, "DataProto": DataProtoStub}
    generate_sequences = method(instrumented, AGENT_LOOP, "AgentLoopManager", "generate_sequences", namespace)
    prompts = DataProtoStub(prompts_without_uid(4), {"global_steps": STEP})
    output = asyncio.run(generate_sequences(manager, prompts))
    assert len(output) == 4 and output.meta_info == {"timing": {"t": 1}}
    if tracing.get_trace_dir() is None:
        assert_nothing_written(tracing, trace_dir, capsys)
        return
    rows = flow_rows(load_runtime, tracing, trace_dir)
    assert [sample_id for sample_id, _ in rows] == ["unknown/sample"] * 4
    assert [text.split("|")[1] for _, text in rows] == ["to=AgentLoopWorker_0"] * 2 + ["to=AgentLoopWorker_1"] * 2


def test_the_rollout_reward_point_takes_a_result_without_a_score(
    instrumented, catalog, tracing, load_runtime, trace_dir, capsys
):
    """No score, nothing to report: no ROLLOUT_REWARD row (a result with one is traced as before)."""
    kwargs = {"uid": "u1", "traj_uid": "0"}
    for result in ({"reward_extra_info": {}}, {"reward_score": 0.5, "reward_extra_info": {}}):
        namespace = {**tracing_names(tracing), "kwargs": kwargs, "result": result}
        exec(placed(instrumented, catalog, "flow.v0.rollout-reward"), namespace)  # noqa: S102
    if tracing.get_trace_dir() is None:
        assert_nothing_written(tracing, trace_dir, capsys)
        return
    expected = content("RewardLoopWorker", "AgentLoopWorker", "ROLLOUT_REWARD", "reward_score_computed_score=0.5")
    assert flow_rows(load_runtime, tracing, trace_dir) == [("u1/0", expected)]


@contextlib.contextmanager
def no_op(*args, **kwargs):
    yield


def test_the_run_agent_loop_rewrite_takes_an_empty_list_of_outputs(instrumented, catalog, tracing, trace_dir, capsys):
    """C1 as apply rewrote `_run_agent_loop`, with v1's own postprocessing, which accepts no outputs.

    The C0 store and tracker come from their placed code too; the agent loop's run() returns [].
    """
    names = tracing_names(tracing)
    logger = logging.getLogger("test_inserted_code")
    worker = SimpleNamespace(
        config=SimpleNamespace(data=None), tokenizer=None, llm_client=None, processor=None, dataset_cls=None, tools=[]
    )
    exec(placed(instrumented, catalog, "traj.c0.store"), {**names, "os": os, "logger": logger, "self": worker})  # noqa: S102
    agent_loop = SimpleNamespace()
    exec(placed(instrumented, catalog, "traj.c0.tracker"), {**names, "self": agent_loop})  # noqa: S102

    async def run(sampling_params, **kwargs):
        return []

    agent_loop.run = run
    postprocess = method(
        instrumented, AGENT_LOOP_TQ, "AgentLoopWorkerTQ", "_agent_loop_postprocess", {"logger": logger}
    )
    worker._agent_loop_postprocess = lambda output, validate, **kw: postprocess(worker, output, validate, **kw)
    namespace = {
        **names,
        "time": __import__("time"),
        "SimpleNamespace": SimpleNamespace,
        "logger": logger,
        "rollout_trace_attr": no_op,
        "_agent_loop_registry": {"empty_agent": {}},
        "hydra": SimpleNamespace(utils=SimpleNamespace(instantiate=lambda **kw: agent_loop)),
        "DictConfigWrap": lambda *a, **k: None,
        "ToolListWrap": lambda *a, **k: None,
    }
    run_agent_loop = method(instrumented, AGENT_LOOP, "AgentLoopWorker", "_run_agent_loop", namespace)
    trajectory = {"step": STEP, "sample_index": 0, "rollout_n": 1, "validate": False}
    kwargs = {"uid": "u1", "traj_uid": "0", "session_id": 0}
    result = asyncio.run(run_agent_loop(worker, {}, trajectory, agent_name="empty_agent", **kwargs))
    assert result is None, "v1's postprocess returns nothing for no outputs"
    if tracing.get_trace_dir() is None:
        assert worker._trajectory_store is None
        assert_nothing_written(tracing, trace_dir, capsys)
        return
    worker._trajectory_store.close(10)
    assert tracing.flush(10)
    (log,) = (trace_dir / "progress").glob("*.log")
    assert log.read_text(encoding="utf-8") == "Task u1/0 is completed, score=0.0 status=Finished\n"
    assert len(list((trace_dir / "trajectory").glob("*.jsonl"))) == 1, "the (empty) trajectory is recorded"


# -- v1 dispatch ------------------------------------------------------------------------------------------


class TensorDictStub(dict):
    """What the inserted code uses of a TensorDict: get(key, default) and len() (its batch size)."""

    def __init__(self, entries: dict, size: int):
        super().__init__(entries)
        self.size = size

    def __len__(self) -> int:
        return self.size


def test_the_v1_dispatch_manager_traces_a_batch_without_uid(
    instrumented, catalog, tracing, load_runtime, trace_dir, capsys
):
    namespace = {**tracing_names(tracing), "self": SimpleNamespace(global_steps=STEP), "batch": TensorDictStub({}, 3)}
    exec(placed(instrumented, catalog, "flow.v1.dispatch-manager"), namespace)  # noqa: S102
    if tracing.get_trace_dir() is None:
        assert_nothing_written(tracing, trace_dir, capsys)
        return
    expected = content("PPOTrainerV1", "AgentLoopManagerTQ", "DATA_DISPATCH", "dispatched_to_agent_loop_manager", STEP)
    assert flow_rows(load_runtime, tracing, trace_dir) == [("unknown/sample", expected)]


def test_the_v1_dispatch_worker_traces_every_uid_a_chunk_holds(
    instrumented, catalog, tracing, load_runtime, trace_dir, capsys
):
    """Values come wrapped (NonTensorData: `.data`); a chunk without uid is left out, as the seed does."""
    uids = [SimpleNamespace(data=f"u{i}") for i in range(2)]
    chunkes = [TensorDictStub({"uid": uids, "global_steps": SimpleNamespace(data=STEP)}, 2), TensorDictStub({}, 2)]
    namespace = {**tracing_names(tracing), "np": np, "prompts": TensorDictStub({}, 4), "chunkes": chunkes}
    exec(placed(instrumented, catalog, "flow.v1.dispatch-worker"), namespace)  # noqa: S102
    if tracing.get_trace_dir() is None:
        assert_nothing_written(tracing, trace_dir, capsys)
        return
    expected = content(
        "AgentLoopManagerTQ", "AgentLoopWorkerTQ_0", "DATA_DISPATCH", "dispatched_to_agent_loop_worker", STEP
    )
    assert flow_rows(load_runtime, tracing, trace_dir) == [("u0/sample", expected), ("u1/sample", expected)]


# -- env -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("switch", [None, "/data/traces"], ids=["off", "on"])
def test_the_runtime_env_point_forwards_the_switch_into_an_env_without_env_vars(
    instrumented, catalog, monkeypatch, switch
):
    """A runtime env a fork builds without `env_vars` (Ray takes one) gets the variable, never a KeyError."""
    if switch is None:
        monkeypatch.delenv("VERL_TRACE_DIR", raising=False)
    else:
        monkeypatch.setenv("VERL_TRACE_DIR", switch)
    runtime_env: dict[str, dict[str, str]] = {}
    exec(placed(instrumented, catalog, "env.runtime-env"), {"os": os, "runtime_env": runtime_env})  # noqa: S102
    assert runtime_env == ({} if switch is None else {"env_vars": {"VERL_TRACE_DIR": switch}})


# -- the tool agent loop's stop reason (C5) ---------------------------------------------------------------

TOOL_LOOP = "verl/experimental/agent_loop/tool_agent_loop.py"


class AgentState:
    """verl's AgentState members the tool loop compares with (identity, as an Enum's)."""

    PENDING = "pending"
    GENERATING = "generating"
    PROCESSING_TOOLS = "processing_tools"
    TERMINATED = "terminated"


class AgentDataStub(SimpleNamespace):
    """verl's AgentData: what run() passes in, plus the counters the state handlers keep."""

    def __init__(self, **kwargs):
        super().__init__(
            **kwargs, prompt_ids=[1, 2, 3], response_mask=[], response_logprobs=[], assistant_turns=0,
            user_turns=0, extra_fields={}, tool_calls=[], turn_scores=[], tool_rewards=[], routed_experts=None,
        )  # fmt: skip


def tool_loop(tracker, *, response_length=100, max_assistant_turns=None, max_user_turns=None, tool_calls=()):
    """A stand-in ToolAgentLoop: its server answers 4 tokens, its parser finds `tool_calls`."""

    async def generate(**kwargs):
        return SimpleNamespace(
            token_ids=[7, 7, 7, 7], num_preempted=0, extra_fields={}, log_probs=None, routed_experts=None,
            stop_reason="stop",
        )  # fmt: skip

    async def extract_tool_calls(response_ids, tools):
        return "answer", list(tool_calls)

    return SimpleNamespace(
        _traj_tracker=tracker, tool_parser=SimpleNamespace(stop_token_ids=[], extract_tool_calls=extract_tool_calls),
        server_manager=SimpleNamespace(generate=generate), tokenizer=None, enable_continuous_token=False,
        response_length=response_length, max_assistant_turns=max_assistant_turns, max_user_turns=max_user_turns,
        tools={},
    )  # fmt: skip


@pytest.mark.parametrize(
    ("limits", "expected"),
    [
        ({"response_length": 4}, "response_length"),
        ({"max_assistant_turns": 1}, "max_assistant_turns"),
        ({"max_user_turns": 1, "user_turns": 1}, "max_user_turns"),
        ({}, "no_tool_call"),
        ({"tool_calls": ["call"]}, None),  # the loop goes on to the tools
    ],
)
def test_the_generating_state_records_why_the_loop_stops(instrumented, tracing, limits, expected):
    """C5 in `_handle_generating_state` as apply placed it: each termination check records its reason."""
    names = tracing_names(tracing)
    tracker = tracing.TrajectoryTracker()
    limits = dict(limits)  # the parameter is shared by the off and on runs
    counters = {k: limits.pop(k) for k in ("assistant_turns", "user_turns") if k in limits}
    loop = tool_loop(tracker, **limits)
    namespace = {**names, "AgentState": AgentState, "simple_timer": no_op,
                 "SPEC_DECODE_EXTRA_KEYS": ()}  # fmt: skip
    handle = method(instrumented, TOOL_LOOP, "ToolAgentLoop", "_handle_generating_state", namespace)
    item = SimpleNamespace(non_tensor_batch={"uid": "u", "traj_uid": "0"}, meta_info={})
    key, traj_uid = tracker.register_trajectory(item)
    agent_data = AgentDataStub(trace_traj_key=key, metrics={}, request_id="r", image_data=None, video_data=None,
                               audio_data=None, mm_processor_kwargs=None)  # fmt: skip
    agent_data.user_turns = counters.get("user_turns", 0)
    state = asyncio.run(handle(loop, agent_data, {}))
    assert state == (AgentState.PROCESSING_TOOLS if expected is None else AgentState.TERMINATED)
    trajectory = tracker.build_trajectory(item, key, traj_uid, 0.0, None, 1, None)
    assert trajectory.agent_stop_reason == expected


@pytest.mark.parametrize("tools_end_it", [True, False], ids=["tools-end-the-loop", "tools-go-on"])
def test_the_loop_records_a_stop_in_the_tool_state(instrumented, tracing, tools_end_it):
    """C5 in `run()` as apply placed it: the tool state ending the loop is the response-length budget."""
    names = tracing_names(tracing)
    tracker = tracing.TrajectoryTracker()
    visits = []

    async def pending(agent_data, sampling_params):
        return AgentState.GENERATING

    async def generating(agent_data, sampling_params):
        visits.append("generating")
        return AgentState.PROCESSING_TOOLS if len(visits) == 1 else AgentState.TERMINATED

    async def tools(agent_data):
        return AgentState.TERMINATED if tools_end_it else AgentState.GENERATING

    async def multi_modal(messages):
        return {}

    loop = SimpleNamespace(
        _traj_tracker=tracker, process_multi_modal_info=multi_modal, _get_mm_processor_kwargs=lambda audios: None,
        _handle_pending_state=pending, _handle_generating_state=generating, _handle_processing_tools_state=tools,
        tools={}, tool_schemas=[], response_length=8,
    )  # fmt: skip
    namespace = {**names, "AgentState": AgentState, "AgentData": AgentDataStub, "uuid4": lambda: SimpleNamespace(hex="r"),
                 "AgentLoopOutput": lambda **kw: SimpleNamespace(**kw), "logger": logging.getLogger("t")}  # fmt: skip
    run = method(instrumented, TOOL_LOOP, "ToolAgentLoop", "run", namespace)
    item = SimpleNamespace(non_tensor_batch={"uid": "u", "traj_uid": "0"}, meta_info={})
    key, traj_uid = tracker.register_trajectory(item)
    asyncio.run(run(loop, {}, raw_prompt=["hi"], trace_traj_key=key, uid="u", traj_uid="0"))
    recorded = tracker.build_trajectory(item, key, traj_uid, 0.0, None, 1, None).agent_stop_reason
    assert recorded == ("tool_response_length" if tools_end_it else None)
