"""The tiny hand-written run (conftest.tiny_plan): every expected number is computed by hand there."""

from __future__ import annotations

from pathlib import Path

import pytest
from recompute import read_rows

from trace_instrument.traces.analyze import Options, analyze
from trace_instrument.traces.model import Analysis, ResponseLength

BASE = 1_787_215_020_000  # trace_instrument.traces.simrun.BASE_EPOCH_MS


@pytest.fixture(scope="module")
def result(tiny_run: Path) -> Analysis:
    return analyze([tiny_run], Options(cache=False))


def _latency(a: Analysis, src: str, dst: str):
    matches = [x for x in a.latencies if x.from_event.endswith(src) and x.to_event.endswith(dst)]
    assert len(matches) == 1, [(x.from_event, x.to_event) for x in a.latencies]
    return matches[0]


def test_header(result: Analysis) -> None:
    h = result.header
    assert h.job_ids == ("job-tiny",)
    assert h.hosts == ("node-a", "node-b")
    assert h.processes == 2
    assert h.steps == (1, 2)
    # trainer: step 1 uid 1 + repeat 2 + dispatch 2 + 5 stages x 2 + sync 1 = 16; step 2: 1 + 2 + 2 + 5 + 1 = 11
    # worker: U1/0 8 rows, U1/1 5, U2/0 5, U2/1 2
    assert h.rows_read == 16 + 11 + 8 + 5 + 5 + 2
    assert h.rows_rejected == 0
    assert h.trajectories_read == 3
    assert h.first_ms == BASE + 1000 and h.last_ms == BASE + 3200
    # every process leaves its status file at exit (issue 9): here each reports no loss
    assert h.lost == {"sample_flow": {}, "progress": {}, "trajectory": {}}
    assert h.total_training_steps == 2


def test_step_windows(result: Analysis) -> None:
    s1, s2 = result.steps
    assert (s1.rollout_start_ms - BASE, s1.rollout_end_ms - BASE) == (1010, 1425)
    assert (s1.train_start_ms - BASE, s1.train_end_ms - BASE, s1.sync_ms - BASE) == (1500, 2000, 2100)
    assert (s1.rollouts_completed, s1.samples_trained) == (2, 2)
    assert (s2.rollout_start_ms - BASE, s2.rollout_end_ms - BASE) == (2210, 2515)
    assert (s2.train_start_ms - BASE, s2.train_end_ms - BASE) == (2600, 3100)
    assert s1.overlap_ms == 0 and s2.overlap_ms == 0  # a synchronous trainer
    assert s2.trainer_idle_ms == 2600 - 2100  # previous sync -> first training row
    assert s2.rollout_gap_ms == 2210 - 1425
    assert s1.progress == s2.progress == "complete" and s1.progress_order_ok and s2.progress_order_ok
    assert s1.gen_throughput == 978.26  # 450 tokens / 0.460 s, as the trainer logged it
    assert s2.gen_throughput == 60.61  # 20 / 0.330


def test_latencies(result: Analysis) -> None:
    bridge = _latency(result, "uid_generated", "traj_uid_generated_by_repeat")
    assert (bridge.count, bridge.p50, bridge.max) == (4, 1.0, 1)
    started = _latency(result, "dispatched_to_agent_loop_worker", "agent_task_started")
    assert started.count == 4 and started.max == 8
    assert started.p50 == 7.5  # [7, 7, 8, 8]
    assert started.p90 == 8.0
    gen = _latency(result, "sending_generate_request", "received_generate_response")
    assert (gen.count, gen.p50, gen.p90, gen.max) == (4, 250.0, 300.0, 300)  # [100, 200, 300, 300]
    assert _latency(result, "received_generate_response", "tool_executed").max == 100
    assert _latency(result, "tool_executed", "sending_generate_request").max == 8
    reward = _latency(result, "agent_run_completed", "reward_score_computed")
    assert reward.count == 3
    assert reward.p50 == 10.0  # [5, 10, 25]
    assert reward.p90 == pytest.approx(22.0)  # 10 + 0.8 * 15
    assert reward.p99 == pytest.approx(24.7)
    assert reward.slowest[0] == "11111111-aaaa-4aaa-aaaa-111111111111/0"
    update = _latency(result, "advantage_computed", "actor_parameters_updated")
    assert (update.count, update.p50, update.max) == (3, 290.0, 290)  # 500 - 210 in both steps
    assert all(x.negative == 0 for x in result.latencies)


def test_funnel_and_in_flight(result: Analysis) -> None:
    funnel = {row.milestone: (row.prompts, row.trajectories) for row in result.funnel}
    assert funnel == {
        "generated": (2, 4),
        "dispatched": (2, 4),
        "agent loop started": (2, 4),
        "agent loop completed": (2, 3),
        "reward": (2, 3),
        "trained": (2, 3),
    }
    (group,) = result.in_flight
    assert (group.last_event, group.state, group.count, group.oldest_age_ms) == (
        "LLM_GENERATE:sending_generate_request",
        "in rollout",
        1,
        3200 - 2215,
    )
    (stuck,) = result.in_flight_oldest
    assert stuck.sample_id == "22222222-bbbb-4bbb-bbbb-222222222222/1"
    assert stuck.host is not None and stuck.host.startswith("node-b-pid")


def test_rollouts(result: Analysis) -> None:
    r = result.rollouts
    assert r is not None
    stops = {s.reason: (s.count, s.frac) for s in r.stop_reasons}
    assert stops == {"stop": (2, pytest.approx(2 / 3)), "length": (1, pytest.approx(1 / 3))}
    assert r.turns.quantiles == {
        "p50": 1.0,
        "p90": pytest.approx(1.8),
        "p95": pytest.approx(1.9),
        "p99": pytest.approx(1.98),
    }  # turns [1, 1, 2]
    assert r.turns.mean == pytest.approx(4 / 3)
    assert r.turns_histogram.counts == (2, 1)
    assert r.completion_tokens.quantiles["p50"] == 150.0  # [20, 150, 300]
    assert (r.completion_tokens.min, r.completion_tokens.max) == (20.0, 300.0)
    assert r.response_length == ResponseLength(0, None, None, None, None)  # not recorded by these trajectories
    (tool,) = r.tools
    assert (tool.tool, tool.count, tool.max) == ("search", 1, 100)
    assert not r.sglang.collected and r.sglang.fields == {}
    assert r.completed_lines == 3


def test_staleness_and_throughput(result: Analysis) -> None:
    assert [(s.train_step, s.staleness, s.count) for s in result.staleness] == [(1, 0, 2), (2, 0, 1)]
    t1, t2 = result.step_throughput
    assert (t1.trajectories, t1.tokens) == (2, 450)
    assert t1.seconds == pytest.approx(0.441)  # created 1010 (U1/0) .. dumped 1451 (U1/0)
    assert t1.tokens_per_s == pytest.approx(450 / 0.441)
    assert (t2.tokens, t2.seconds) == (20, pytest.approx(0.311))
    (worker,) = result.worker_throughput
    assert worker.worker.startswith("node-b-pid") and worker.tokens == 470


def test_the_page_finds_its_tables_by_key_and_each_section_has_its_own_id(result: Analysis) -> None:
    """The page's sections are named by the tables' keys, never by their display titles: every id
    is unique, and each table the page embeds is the one of its key (its columns head that section's table)."""
    import re

    from trace_instrument.traces.render.html import page
    from trace_instrument.traces.render.tables import sections

    html = page(result)
    ids = re.findall(r'<section id="([^"]+)"', html)
    assert len(ids) == len(set(ids)) == html.count("<section ")
    tables = {s.key: s for s in sections(result)}
    assert len(tables) == len(sections(result)), "one key per table"
    embedded = {  # section id: the table it shows
        "step-windows": "step-windows",
        "stage-latencies": "stage-latencies",
        "never-trained": "oldest-never-trained",
        "turns": "rollouts",
        "throughput-per-step": "throughput-per-step",
    }
    for section, key in embedded.items():
        body = html.split(f'<section id="{section}"', 1)[1].split("</section>", 1)[0]
        header = "".join(f"<th>{column}</th>" for column in tables[key].columns)
        assert header in body, (section, key)


def test_slowest_rollouts_rank_by_the_agent_loop_not_by_queueing(result: Analysis, tiny_run: Path) -> None:
    """Hand-written times (conftest.tiny_plan): U1/0 ran 1010 -> 1425, U1/1 1011 -> 1320, U2/0 2210 -> 2515;
    training rows start at 1500 (step 1) and 2600 (step 2). U2/1 never completed: not a finished rollout."""
    u1, u2 = "11111111-aaaa-4aaa-aaaa-111111111111", "22222222-bbbb-4bbb-bbbb-222222222222"
    spans = {}
    for row in read_rows(tiny_run):
        lo, hi = spans.get(row["sample_id"], (row["ts"], row["ts"]))
        spans[row["sample_id"]] = (min(lo, row["ts"]), max(hi, row["ts"]))
    expected = [(f"{u1}/0", 415, 75), (f"{u1}/1", 309, 180), (f"{u2}/0", 305, 85)]
    assert [(t.sample_id, t.rollout_ms, t.waiting_ms) for t in result.slowest] == expected
    assert [t.total_ms for t in result.slowest] == [spans[sid][1] - spans[sid][0] for sid, _, _ in expected]
