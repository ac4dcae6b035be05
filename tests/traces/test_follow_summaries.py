"""``--follow`` keeps the tables the views read up to date refresh by refresh: after each refresh,
the samples, their transitions, the transition summaries and the sglang buckets hold what a fresh
load of the same files holds.

The run is written in four parts, every growing file cut mid-line at the same fraction: samples
gain rows after and before their old ones (the trainer's and the workers' files end at different
times), prompts gain trajectories, trajectories gain turns. Ids that differ between the two loads
by construction (content ids, trajectory ids) are compared through what they stand for.
"""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest

from trace_instrument.traces.discover import discover
from trace_instrument.traces.duckdb_backend import DuckDBBackend
from trace_instrument.traces.follow import Follower
from trace_instrument.traces.options import Options

QUERIES = {
    "entities": "SELECT entities_all.* EXCLUDE (first_file, last_file, worker_file), f1.path, f2.path, f3.path "
    "FROM entities_all JOIN files AS f1 ON f1.file_id = first_file JOIN files AS f2 ON f2.file_id = last_file "
    "LEFT JOIN files AS f3 ON f3.file_id = worker_file",
    "transitions": "SELECT t.skey, t.prev_code, t.code, t.dt, t.tool_dt, t.dup, c.content, p.path, f.path "
    "FROM transitions_all AS t LEFT JOIN contents AS c ON c.cid = t.cid "
    "JOIN files AS p ON p.file_id = t.prev_file JOIN files AS f ON f.file_id = t.file_id",
    "latency_counts": "SELECT * FROM latency_counts_all",
    "tool_counts": "SELECT c.content, t.tool_dt, t.k FROM tool_counts_all AS t JOIN contents AS c ON c.cid = t.cid",
    "file_pairs": "SELECT p.path, f.path, t.dt, t.dup, t.k FROM file_pairs_all AS t "
    "JOIN files AS p ON p.file_id = t.prev_file JOIN files AS f ON f.file_id = t.file_id",
    "slow_thresholds": "SELECT * FROM slow_thresholds_all",
    "slow_candidates": "SELECT * FROM slow_candidates_all",
    "sglang_values": "SELECT field, bucket, value FROM sglang_values_all",
    "sglang_buckets": "SELECT * FROM sglang_buckets_all",
}


def _tables(backend: DuckDBBackend) -> dict[str, Counter]:
    return {name: Counter(backend.run(sql)) for name, sql in QUERIES.items()}


def _growing(trace: Path) -> list[Path]:
    return sorted([*trace.glob("sample/*.csv"), *trace.glob("trajectory/*.jsonl")])


@pytest.mark.parametrize("cuts", [(0.35, 0.7, 0.9), (0.5, 0.52, 0.99)])
def test_each_refresh_holds_what_a_fresh_load_holds(sim_run, tmp_path: Path, cuts) -> None:
    trace = Path(
        shutil.copytree(sim_run[0], tmp_path / "trace", ignore=shutil.ignore_patterns(".trace-instrument-cache"))
    )
    full = {path: path.read_bytes() for path in _growing(trace)}
    for path, data in full.items():
        path.write_bytes(data[: int(len(data) * cuts[0])])
    with Follower([trace], Options(cache=False)) as follower:
        follower.refresh()
        for fraction in (*cuts[1:], 1.0):
            for path, data in full.items():
                path.write_bytes(data[: int(len(data) * fraction)])
            refresh = follower.refresh()
            assert not refresh.full, refresh.reason
            assert follower._backend is not None
            followed = _tables(follower._backend)
            fresh = DuckDBBackend(None, tmp_path / f"spill-{fraction}")
            try:
                fresh.load(discover([trace]))
                expected = _tables(fresh)
            finally:
                fresh.close()
            for name in QUERIES:
                assert followed[name] == expected[name], (fraction, name)
            assert sum(followed["transitions"].values()) > 100 and followed["sglang_buckets"]


GENERATED = "from=DataLoader|to=PPOTrainerV1|stage=DATA_PREPROCESS|global_step=1|detail=uid_generated"
REPEATED = "from=PPOTrainerV1|to=PPOTrainerV1|stage=DATA_PREPROCESS|global_step=1|detail=traj_uid_generated_by_repeat"
DISPATCHED = (
    "from=PPOTrainerV1|to=AgentLoopManagerTQ|stage=DATA_DISPATCH|global_step=1|detail=dispatched_to_agent_loop_manager"
)
KIND = ("DATA_PREPROCESS:uid_generated", "DATA_DISPATCH:dispatched_to_agent_loop_manager")


def _slowest(analysis) -> tuple[str, ...]:
    (latency,) = [x for x in analysis.latencies if (x.from_event, x.to_event) == KIND]
    return latency.slowest


def test_a_refresh_that_splits_the_slowest_transitions_finds_the_new_slowest(tiny_run: Path, tmp_path: Path) -> None:
    """Rows that sort between a sample's old rows split its transition in two: the three slowest of
    a kind replaced by faster ones lower the kind's threshold, and the candidates are built again."""
    from trace_instrument.traces.analyze import analyze

    trace = Path(
        shutil.copytree(tiny_run, tmp_path / "trace", ignore=shutil.ignore_patterns(".trace-instrument-cache"))
    )
    trainer = max(trace.glob("sample/*.csv"), key=lambda p: p.read_bytes().count(b"uid_generated"))
    job, *_, first = trainer.read_text().splitlines()[0].split(",")[:5]
    start = int(first)
    slow = [f"{name}0000-0000-4000-8000-000000000000/sample" for name in ("aaaa", "bbbb", "cccc")]

    def rows(content: str, offset: int) -> str:
        return "".join(f"{job},sample,{sid},RUNNING,{start + offset + i},{content}\r\n" for i, sid in enumerate(slow))

    kept = "dddd0000-0000-4000-8000-000000000000/sample"  # a faster one, never split
    with open(trainer, "a", encoding="utf-8") as f:
        f.write(rows(GENERATED, 0) + rows(DISPATCHED, 10**7))
        f.write(
            f"{job},sample,{kept},RUNNING,{start},{GENERATED}\r\n{job},sample,{kept},RUNNING,{start + 10**6},{DISPATCHED}\r\n"
        )
    with Follower([trace], Options(cache=False)) as follower:
        before = follower.refresh()
        assert sorted(_slowest(before.analysis)) == sorted(slow)
        assert follower._backend is not None
        (old,) = follower._backend.run("SELECT max(dt) FROM slow_thresholds_all")[0]
        with open(trainer, "a", encoding="utf-8") as f:
            f.write(rows(REPEATED, 5 * 10**6))  # between each one's two rows
        after = follower.refresh()
        assert not after.full
        (new,) = follower._backend.run("SELECT max(dt) FROM slow_thresholds_all")[0]
        assert new < old
        followed = _tables(follower._backend)
        fresh = analyze([trace], Options(cache=False))
    assert _slowest(after.analysis) == _slowest(fresh) == (kept,)
    backend = DuckDBBackend(None, tmp_path / "spill")
    try:
        backend.load(discover([trace]))
        expected = _tables(backend)
    finally:
        backend.close()
    assert followed == expected


def test_appended_ids_sharing_a_key_build_everything_again_with_the_ids_text(
    tiny_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two new sample ids whose keys collide (forced: a key that gives both 0) make the refresh build
    the samples again keyed by the ids' text: the tables change type, the views follow them, and
    the figures are a fresh analysis's."""
    from trace_instrument.traces.analyze import analyze
    from trace_instrument.traces.duckdb_backend import DuckDBDialect
    from trace_instrument.traces.render.metrics import to_json

    def keys(self, column: str) -> tuple[str, ...]:
        return (f"CASE WHEN {column} LIKE 'ffff%' THEN 0 ELSE hash({column}) END", column)

    monkeypatch.setattr(DuckDBDialect, "sample_keys", keys)
    trace = Path(
        shutil.copytree(tiny_run, tmp_path / "trace", ignore=shutil.ignore_patterns(".trace-instrument-cache"))
    )
    trainer = max(trace.glob("sample/*.csv"), key=lambda p: p.read_bytes().count(b"uid_generated"))
    job, *_, first = trainer.read_text().splitlines()[0].split(",")[:5]
    with Follower([trace], Options(cache=False)) as follower:
        follower.refresh()
        assert follower._backend is not None and follower._backend.sample_key != "sample_id"
        shared = ["ffff0001-0000-4000-8000-000000000000/sample", "ffff0002-0000-4000-8000-000000000000/sample"]
        with open(trainer, "a", encoding="utf-8") as f:
            f.writelines(f"{job},sample,{sid},RUNNING,{int(first) + i},{GENERATED}\r\n" for i, sid in enumerate(shared))
        refresh = follower.refresh()
        assert not refresh.full and follower._backend.sample_key == "sample_id"
        followed = to_json(refresh.analysis)
    assert followed == to_json(analyze([trace], Options(cache=False)))
