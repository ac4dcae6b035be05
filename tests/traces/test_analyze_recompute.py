"""A seeded multi-host async run: the tool's numbers against a plain-Python recomputation and the plan."""

from __future__ import annotations

import dataclasses
import itertools
import json
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import recompute
import simulate
from typer.testing import CliRunner

from trace_instrument.cli import app
from trace_instrument.traces.analyze import Options, analyze
from trace_instrument.traces.model import Analysis, ClipBasis, StepBasis
from trace_instrument.traces.render.metrics import step_metrics


@pytest.fixture(scope="module")
def run(sim_run: tuple[Path, simulate.RunPlan]) -> tuple[Path, simulate.RunPlan, Analysis]:
    trace_dir, plan = sim_run
    return trace_dir, plan, analyze([trace_dir], Options(cache=False))


def test_latencies_match_recomputation(run) -> None:
    trace_dir, _, result = run
    expected = recompute.transitions(recompute.read_rows(trace_dir))
    got = {(x.from_event.replace(":", ":"), x.to_event): x for x in result.latencies}
    names = {(lat.from_event, lat.to_event) for lat in result.latencies}
    assert len(names) == len(expected)
    for (a, b), values in expected.items():
        lat = next(x for x in got.values() if x.from_event.startswith(a) and x.to_event.startswith(b))
        assert lat.count == len(values), (a, b)
        assert lat.p50 == pytest.approx(recompute.percentile(values, 50)), (a, b)
        assert lat.p90 == pytest.approx(recompute.percentile(values, 90)), (a, b)
        assert lat.p99 == pytest.approx(recompute.percentile(values, 99)), (a, b)
        assert lat.max == max(values)
        assert lat.negative == sum(1 for v in values if v < 0)


def test_funnel_and_never_trained_match_the_plan(run) -> None:
    _, plan, result = run
    funnel = {row.milestone: row.trajectories for row in result.funnel}
    assert funnel["generated"] == len(plan.trajs)
    assert funnel["agent loop completed"] == sum(1 for t in plan.trajs if t.completed_ms is not None)
    assert funnel["trained"] == sum(1 for t in plan.trajs if t.train_step is not None)
    never = sum(g.count for g in result.in_flight)
    assert never == sum(1 for t in plan.trajs if t.train_step is None)
    stuck = sum(g.count for g in result.in_flight if g.state == "in rollout")
    assert stuck == sum(1 for t in plan.trajs if t.completed_ms is None) > 0


def test_staleness_matches_the_plan(run) -> None:
    _, plan, result = run
    expected = Counter((t.train_step, t.train_step - t.gen_step) for t in plan.trajs if t.train_step is not None)
    assert {(s.train_step, s.staleness): s.count for s in result.staleness} == dict(expected)
    assert any(s.staleness > 0 for s in result.staleness)


def test_rollouts_match_recomputation(run) -> None:
    trace_dir, _, result = run
    trajs = recompute.trajectories(trace_dir)
    r = result.rollouts
    assert r is not None and r.trajectories == len(trajs)
    stops = Counter(recompute.stop_reason(t) for t in trajs)
    assert {s.reason: s.count for s in r.stop_reasons} == dict(stops)
    # the sim's loops record reasons for most trajectories, none for the rest (finish reason or unknown)
    assert {"unknown", "stop", "no_tool_call", "response_length", "max_assistant_turns"} <= set(stops)
    # an aborted last turn is the reason, whatever the loop recorded after it
    assert any(t["turns"][-1]["finish_reason"] == "abort" and t.get("agent_stop_reason") for t in trajs)
    assert stops["abort"] == sum(t["turns"][-1]["finish_reason"] == "abort" for t in trajs)
    turns = [len(t["turns"]) for t in trajs]
    for q in (50, 90, 95, 99):
        assert r.turns.quantiles[f"p{q}"] == pytest.approx(np.percentile(turns, q))
    lengths = [sum(turn["completion_token_count"] for turn in t["turns"]) for t in trajs]
    for q in (50, 90, 95, 99):
        assert r.completion_tokens.quantiles[f"p{q}"] == pytest.approx(np.percentile(lengths, q))
    assert sum(r.completion_tokens_histogram.counts) == len(trajs)
    verl_lengths, clip_ratio = recompute.response_lengths(trajs)
    assert r.response_length.trajectories == len(verl_lengths) == len(trajs)
    assert (r.response_length.min, r.response_length.max) == (min(verl_lengths), max(verl_lengths))
    assert r.response_length.mean == pytest.approx(np.mean(verl_lengths))
    assert clip_ratio is not None and 0 < clip_ratio < 1
    # a v1 run: verl compares each step with its own longest response, which pools into no run-wide figure
    assert r.response_length.clip_ratio is None and r.response_length.clip_basis is None
    queue = [turn["sglang_queue_time_ms"] for t in trajs for turn in t["turns"]]
    assert r.sglang.collected
    assert r.sglang.fields["queue"].quantiles["p50"] == pytest.approx(np.percentile(queue, 50))


def test_step_windows_match_recomputation(run) -> None:
    trace_dir, plan, result = run
    rows = recompute.read_rows(trace_dir)
    for window in result.steps:
        agent = [r["ts"] for r in rows if r["step"] == window.step and r["stage"] == "AGENT_LOOP"]
        train = [r["ts"] for r in rows if r["step"] == window.step and r["stage"].startswith("TRAIN_")]
        assert (window.rollout_start_ms, window.rollout_end_ms) == (min(agent), max(agent))
        assert (window.train_start_ms, window.train_end_ms) == (min(train), max(train))
        assert window.progress == "complete"
    # an async trainer: some training overlaps rollouts
    assert any(w.overlap_ms > 0 for w in result.steps)
    assert len(result.steps) == len(plan.steps)


def test_clock_skew_is_estimated_per_host(run) -> None:
    _, plan, result = run
    skews = {p.host: p.skew_ms for p in plan.procs}
    bounds = {s.host: (s.low_ms, s.high_ms) for s in result.header.clock_skew}
    assert set(bounds) == set(skews) - {"node-0"}
    for host, (low, high) in bounds.items():
        assert low <= skews[host] <= high
    assert any(high - low < 100 for low, high in bounds.values())


def test_samples_sharing_a_hash_fall_back_to_the_id_text(run, monkeypatch) -> None:
    """Two sample ids with one 64-bit hash are improbable, so the fallback is forced: a key of three values."""
    from trace_instrument.traces.duckdb_backend import DuckDBBackend, DuckDBDialect

    trace_dir, _, result = run
    monkeypatch.setattr(DuckDBDialect, "sample_keys", lambda self, column: (f"hash({column}) % 3", column))
    dropped: list[str] = []
    drop = DuckDBBackend.drop_table
    monkeypatch.setattr(DuckDBBackend, "drop_table", lambda self, name: (dropped.append(name), drop(self, name)))
    fallback = analyze([trace_dir], Options(cache=False))
    assert [name for name in dropped if name.startswith("entities")] == ["entities_all"]  # the hash key's, once
    # everything read through the sample key; the rollouts come from the trajectory files (their float
    # means may differ in the last bit between two runs: DuckDB sums in parallel)
    assert dataclasses.replace(fallback, rollouts=None) == dataclasses.replace(result, rollouts=None)


def test_per_step_rollouts_match_recomputation(run) -> None:
    """verl logs a batch's rollout metrics at the step that trains it: each trajectory counts in the
    step of its sample's TRAIN_UPDATE row (read from the CSV), recomputed here with numpy."""
    trace_dir, _, result = run
    rows = recompute.read_rows(trace_dir)
    trained = {r["sample_id"]: r["step"] for r in rows if r["detail"] == "actor_parameters_updated"}
    by_step: dict[int, list[dict]] = {}
    for t in recompute.trajectories(trace_dir):
        step = trained.get(f"{t['prompt_uid']}/{t['request_id']}")
        if step is not None:
            by_step.setdefault(step, []).append(t)
    assert result.step_rollouts_by is StepBasis.TRAIN_STEP
    assert [r.step for r in result.step_rollouts] == sorted(by_step) and len(by_step) > 2
    for row in result.step_rollouts:
        trajs = by_step[row.step]
        stops = Counter(recompute.stop_reason(t) for t in trajs)
        assert {s.reason: s.count for s in row.stop_reasons} == dict(stops)
        assert sum(s.frac for s in row.stop_reasons) == pytest.approx(1.0)
        turns = [len(t["turns"]) for t in trajs]
        assert (row.trajectories, row.turns.min, row.turns.max) == (len(trajs), min(turns), max(turns))
        for q in (50, 90, 95, 99):
            assert row.turns.quantiles[f"p{q}"] == pytest.approx(np.percentile(turns, q))
        tokens = [sum(turn["completion_token_count"] for turn in t["turns"]) for t in trajs]
        assert row.completion_tokens.mean == pytest.approx(np.mean(tokens))
        lengths, clip_ratio = recompute.response_lengths(trajs, batch_max=True)  # a v1 run
        assert (row.response_length.trajectories, row.response_length.min, row.response_length.max) == (
            len(lengths),
            min(lengths),
            max(lengths),
        )
        assert row.response_length.mean == pytest.approx(np.mean(lengths))
        assert row.response_length.clip_ratio == pytest.approx(clip_ratio)
        assert row.response_length.clip_basis is ClipBasis.BATCH_MAX
    # a step filter shows fewer steps, never other numbers for a shown step
    some = analyze([trace_dir], Options(cache=False, steps=(3, 4)))
    shown = [r for r in result.step_rollouts if r.step in (3, 4)]
    assert [(r.step, r.trajectories, r.stop_reasons, r.turns.quantiles) for r in some.step_rollouts] == [
        (r.step, r.trajectories, r.stop_reasons, r.turns.quantiles) for r in shown
    ]


TRAINING_STAGES = (
    "TRAIN_SAMPLE",
    "TRAIN_REWARD",
    "TRAIN_LOGPROB",
    "TRAIN_REF_LOGPROB",
    "TRAIN_ADVANTAGE",
    "TRAIN_UPDATE",
)
STAGE_NAMES = dict(
    zip(TRAINING_STAGES, ("sample", "reward", "old_log_prob", "ref", "adv", "update_actor"), strict=True)
)


def test_training_per_step_matches_recomputation(run) -> None:
    """Reward scores, staleness (with rollouts spanning weight versions) and the row-to-row stage
    times of each step, recomputed from the CSV rows with plain Python."""
    trace_dir, _, result = run
    rows = recompute.read_rows(trace_dir)
    trained = recompute.trained_steps(rows)
    # reward: the last ROLLOUT_REWARD row's score, counted in the step that trained the sample
    scores = recompute.step_scores(rows)
    by_step = {w.step: w for w in result.steps}
    assert set(scores) <= set(by_step) and len(scores) > 2
    for step, values in scores.items():
        score = by_step[step].score
        assert (score.count, score.min, score.max) == (len(values), min(values), max(values))
        assert score.mean == pytest.approx(np.mean(values))
    # staleness per train step: train step minus the trajectory's completed step
    completed = {r["sample_id"]: r["step"] for r in rows if r["detail"] == "agent_run_completed"}
    lags: dict[int, list[int]] = {}
    for sample_id, step in trained.items():
        if sample_id in completed:
            lags.setdefault(step, []).append(step - completed[sample_id])
    entries = {e["step"]: e for e in step_metrics(result)}
    for step, values in lags.items():
        entry = entries[step]
        assert (entry["staleness/min"], entry["staleness/max"]) == (min(values), max(values))
        assert entry["staleness/mean"] == pytest.approx(np.mean(values))
        assert {k: entry[f"staleness/{k}/count"] for k in set(values)} == dict(Counter(values))
    # rollouts generated with more than one weight version, from the trajectory lines, by train step
    versions: dict[int, list[bool]] = {}
    for t in recompute.trajectories(trace_dir):
        step = trained.get(f"{t['prompt_uid']}/{t['request_id']}")
        if step is not None and t.get("min_global_steps") is not None:
            versions.setdefault(step, []).append(t["max_global_steps"] > t["min_global_steps"])
    assert sum(map(sum, versions.values())) > 0
    for step, spans in versions.items():
        assert entries[step]["staleness/spanning_versions/count"] == sum(spans)
        assert entries[step]["staleness/spanning_versions/frac"] == pytest.approx(sum(spans) / len(spans))
    # stage times: each stage's last row after the previous stage's last row; the sync's first row
    for window in result.steps:
        marks = []
        for stage in TRAINING_STAGES:
            times = [r["ts"] for r in rows if r["stage"] == stage and r["step"] == window.step]
            if times:
                marks.append((STAGE_NAMES[stage], max(times)))
        syncs = [r["ts"] for r in rows if r["stage"] == "SYNC_PARAMS" and r["step"] == window.step]
        if syncs:
            marks.append(("update_weights", min(syncs)))
        expected = [(b[0], b[1] - a[1]) for a, b in itertools.pairwise(marks) if b[1] >= a[1]]
        assert [(t.stage, t.ms) for t in window.stages] == expected
        assert {k: v for k, v in entries[window.step].items() if k.startswith("stage_s/")} == {
            f"stage_s/{name}": ms / 1000 for name, ms in expected
        }
    assert any(len(w.stages) >= 5 for w in result.steps)


@pytest.fixture(scope="module")
def v0_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Analysis]:
    """The legacy trainer (v0, sync): it pads every batch to rollout.response_length."""
    config = simulate.SimConfig(seed=5, version="v0", mode="sync", hosts=2, steps=4, prompts_per_step=6)
    trace_dir = tmp_path_factory.mktemp("v0") / "trace"
    simulate.simulate(config, trace_dir)
    return trace_dir, analyze([trace_dir], Options(cache=False))


def test_the_legacy_trainer_clips_at_the_budget(v0_run: tuple[Path, Analysis]) -> None:
    trace_dir, result = v0_run
    trajs = recompute.trajectories(trace_dir)
    _, clip_ratio = recompute.response_lengths(trajs)
    r = result.rollouts
    assert r is not None and clip_ratio is not None and 0 < clip_ratio < 1
    assert r.response_length.clip_ratio == pytest.approx(clip_ratio)
    assert r.response_length.clip_basis is ClipBasis.BUDGET
    trained = recompute.trained_steps(recompute.read_rows(trace_dir))
    for row in result.step_rollouts:
        batch = [t for t in trajs if trained.get(f"{t['prompt_uid']}/{t['request_id']}") == row.step]
        assert row.response_length.clip_ratio == pytest.approx(recompute.response_lengths(batch)[1])
        assert row.response_length.clip_basis is ClipBasis.BUDGET
    # a sync run never spans weight versions
    assert all(row.versioned and row.spanning == 0 for row in result.step_rollouts)


def test_scores_need_no_trajectory_lines_and_skip_what_is_no_number(run, tmp_path: Path) -> None:
    """critic/score comes from the CSV rows alone; a score of nan is no score, and the JSON stays JSON."""
    trace_dir, _, _ = run
    copy = tmp_path / "trace"
    shutil.copytree(trace_dir, copy, ignore=shutil.ignore_patterns("trajectory", ".trace-instrument-cache"))
    sample = min((copy / "sample").glob("*.csv"))
    rows = recompute.read_rows(copy)
    victim = next(r for r in rows if r["stage"] == "ROLLOUT_REWARD" and r["sample_id"] in recompute.trained_steps(rows))
    text = sample.read_text(encoding="utf-8")
    with open(sample, "a", encoding="utf-8") as f:  # a later row of the same sample: its last score is nan
        job = text.splitlines()[0].split(",")[0]
        f.write(f"{job},FLOW,{victim['sample_id']},RUNNING,{victim['ts'] + 1},"
                f"from=RewardLoopWorker|to=AgentLoopWorker|stage=ROLLOUT_REWARD|detail=reward_score_computed_score=nan\n")  # fmt: skip
    result = CliRunner().invoke(app, ["analyze", str(copy), "--no-cache", "--format", "json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout, parse_constant=lambda name: pytest.fail(f"{name} in the JSON"))
    expected = recompute.step_scores(recompute.read_rows(copy))
    assert len(expected) > 2
    for entry in document["steps"]:
        values = expected.get(entry["step"])
        if values:
            assert entry["critic/score/mean"] == pytest.approx(np.mean(values))
            assert entry["critic/score/max"] == max(values)


@pytest.mark.parametrize("scores", [(97.5, -3.0), (-3.0, 97.5)])
def test_two_scores_in_a_samples_last_millisecond_give_the_larger(run, tmp_path: Path, scores) -> None:
    """Whatever order they were written in and the engine meets them in: the larger of two reward
    rows written in the same last millisecond is the sample's score."""
    trace_dir, _, _ = run
    copy = tmp_path / "trace"
    shutil.copytree(trace_dir, copy, ignore=shutil.ignore_patterns(".trace-instrument-cache"))
    sample = min((copy / "sample").glob("*.csv"))
    rows = recompute.read_rows(copy)
    trained = recompute.trained_steps(rows)
    victim = next(r for r in rows if r["stage"] == "ROLLOUT_REWARD" and r["sample_id"] in trained)
    job = sample.read_text(encoding="utf-8").splitlines()[0].split(",")[0]
    prefix = f"{job},FLOW,{victim['sample_id']},RUNNING,{victim['ts'] + 1},"
    content = "from=RewardLoopWorker|to=AgentLoopWorker|stage=ROLLOUT_REWARD|detail=reward_score_computed_score="
    with open(sample, "a", encoding="utf-8") as f:  # far outside the run's scores: the step's max and min say which won
        f.writelines(f"{prefix}{content}{score}\n" for score in scores)
    expected = recompute.step_scores(recompute.read_rows(copy))
    assert 97.5 in expected[trained[victim["sample_id"]]] and -3.0 not in expected[trained[victim["sample_id"]]]
    result = analyze([copy], Options(cache=False))
    for window in result.steps:
        values = expected.get(window.step)
        if values:
            assert (window.score.count, window.score.min, window.score.max) == (len(values), min(values), max(values))
