"""Fixtures for the trace reader: simulated runs written by the real runtime (see simulate.py)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import simulate


@pytest.fixture
def chromium() -> ModuleType:
    """Headless Chromium (tests/traces/chromium.py): requesting it puts a test in the `browser` tier."""
    import chromium as driver

    driver.chromium()  # fails with the install command when Chromium is missing
    return driver


@pytest.fixture
def pyspark() -> ModuleType:
    """pyspark, imported: requesting it puts a test in the `spark` tier (a JVM in local mode)."""
    try:
        import pyspark as module
    except ImportError:
        pytest.fail("pyspark is needed for this test: pip install -e '.[test,spark]'", pytrace=False)
    return module


def tiny_plan() -> simulate.RunPlan:
    """Two steps, one prompt x 2 rollouts each, hand-written times (ms) so expectations are hand-computed.

    Training rows of a step: reward t0, log prob +100, ref +200, advantage +210, update +500.
    Step 1: U1/0 turns 1012->1112 (tool search until 1212), 1220->1420 stop; done 1425, reward 1450.
            U1/1 turn 1015->1315 length; done 1320, reward 1330. Training rows 1500..2000, sync 2100.
    Step 2: U2/0 turn 2212->2512 stop; done 2515, reward 2520. U2/1 sent at 2215 and never answered.
            Training rows 2600..3100, sync 3200.
    """
    T, S, R = simulate.TrajPlan, simulate.StepPlan, simulate.TurnPlan
    u1, u2 = "11111111-aaaa-4aaa-aaaa-111111111111", "22222222-bbbb-4bbb-bbbb-222222222222"
    trajs = [
        T(
            u1,
            0,
            1,
            1,
            1010,
            [R(1012, 1112, 80, 100, "stop", "search", 1212), R(1220, 1420, 232, 50, "stop")],
            1425,
            1450,
            1.0,
            1,
        ),
        T(u1, 1, 1, 1, 1011, [R(1015, 1315, 80, 300, "length")], 1320, 1330, 0.0, 1),
        T(u2, 0, 2, 1, 2210, [R(2212, 2512, 90, 20, "stop")], 2515, 2520, 1.0, 2),
        T(u2, 1, 2, 1, 2211, [R(2215, None, 90, 0, "")], None, None, 0.0, None),
    ]

    def train(t0: int) -> dict[str, int]:
        return {
            "TRAIN_REWARD": t0,
            "TRAIN_LOGPROB": t0 + 100,
            "TRAIN_REF_LOGPROB": t0 + 200,
            "TRAIN_ADVANTAGE": t0 + 210,
            "TRAIN_UPDATE": t0 + 500,
        }

    steps = [S(1, 1000, 1003, 1460, train(1500), 2100), S(2, 2200, 2203, 2530, train(2600), 3200)]
    procs = [simulate.ProcPlan("node-a", "trainer"), simulate.ProcPlan("node-b", "worker")]
    return simulate.RunPlan("v0", "sync", 2, procs, steps, trajs, job_id="job-tiny", total_steps=2)


def _files(trace: Path) -> dict[str, bytes]:
    return {p.relative_to(trace).as_posix(): p.read_bytes() for p in sorted(trace.rglob("*")) if p.is_file()}


def _shared(trace: Path) -> Iterator[Path]:
    """A simulated run every test of a worker reads: made once, and still the same at the end (a
    test that changes a run, or lets the reader write its cache there, works on a copy of its own)."""
    made = _files(trace)
    yield trace
    assert _files(trace) == made, f"a test changed the shared run {trace}: copy it into tmp_path first"


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield from _shared(simulate.run_plan(tiny_plan(), tmp_path_factory.mktemp("tiny") / "trace"))


@pytest.fixture(scope="session")
def sim_config() -> simulate.SimConfig:
    return simulate.SimConfig(
        seed=7,
        version="v1",
        mode="colocate_async",
        hosts=3,
        workers_per_host=2,
        steps=5,
        prompts_per_step=10,
        rollout_n=4,
        stuck_prob=0.05,
        skew_ms=20,
    )


@pytest.fixture(scope="session")
def sim_run(
    tmp_path_factory: pytest.TempPathFactory, sim_config: simulate.SimConfig
) -> Iterator[tuple[Path, simulate.RunPlan]]:
    trace_dir = tmp_path_factory.mktemp("sim") / "trace"
    plan = simulate.simulate(sim_config, trace_dir)
    for trace in _shared(trace_dir):
        yield trace, plan
