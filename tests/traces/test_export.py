"""`export --perfetto` (structure of the trace-event JSON) and `export --parquet` (tables and schema)."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path

import duckdb
import recompute
import simulate
from typer.testing import CliRunner

from trace_instrument.cli import app

runner = CliRunner()


def _export(*args: str) -> None:
    result = runner.invoke(app, ["export", *args, "--no-cache"])
    assert result.exit_code == 0, result.output


def _validate(events: list[dict]) -> dict[str, int]:
    """Every begin has its end (same id and name, last-in first-out per track), integer microseconds."""
    open_by_track: dict[tuple[int, int], list[tuple[str, int]]] = defaultdict(list)
    named = {e["pid"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    counts: dict[str, int] = defaultdict(int)
    for e in events:
        counts[e["ph"]] += 1
        assert e["pid"] in named, e
        if e["ph"] == "M":
            continue
        assert isinstance(e["ts"], int) and e["ts"] > 1_700_000_000_000_000, e  # microseconds since the epoch
        if e["ph"] == "b":
            stack = open_by_track[(e["pid"], e["id"])]
            if stack:  # nested: inside the enclosing slice
                assert e["ts"] >= stack[-1][1]
            stack.append((e["name"], e["ts"]))
        elif e["ph"] == "e":
            name, start = open_by_track[(e["pid"], e["id"])].pop()
            assert name == e["name"] and e["ts"] >= start, e
        elif e["ph"] == "X":
            assert isinstance(e["dur"], int) and e["dur"] >= 0
    assert all(not stack for stack in open_by_track.values())
    return counts


def test_perfetto_structure(sim_run: tuple[Path, simulate.RunPlan], tmp_path: Path) -> None:
    trace_dir, plan = sim_run
    target = tmp_path / "timeline.json.gz"
    _export(str(trace_dir), "--perfetto", str(target))
    events = json.loads(gzip.decompress(target.read_bytes()))["traceEvents"]
    counts = _validate(events)
    rows = recompute.by_sample(recompute.read_rows(trace_dir))
    trajectories = [sid for sid in rows if not sid.endswith("/sample")]
    # one outer slice per trajectory, one inner slice per transition between its rows
    assert counts["b"] == len(trajectories) + sum(len(rows[sid]) - 1 for sid in trajectories)
    assert counts["X"] == 2 * len(plan.steps)  # a rollout and a train window per step
    assert counts["i"] == len(plan.steps)  # one weight sync per step
    assert counts["C"] > 0
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert names == {p.name.removesuffix(".csv") for p in (trace_dir / "sample").glob("*.csv")}


def test_perfetto_max_trajectories_keeps_the_slowest(sim_run: tuple[Path, simulate.RunPlan], tmp_path: Path) -> None:
    trace_dir, _ = sim_run
    target = tmp_path / "small.json"
    _export(str(trace_dir), "--perfetto", str(target), "--max-trajectories", "20")
    events = json.loads(target.read_text())["traceEvents"]
    _validate(events)
    outer = [e for e in events if e["ph"] == "b" and e["name"] == e.get("args", {}).get("sample_id")]
    assert len(outer) == 20
    rows = recompute.by_sample(recompute.read_rows(trace_dir))
    spans = {sid: g[-1]["ts"] - g[0]["ts"] for sid, g in rows.items() if not sid.endswith("/sample")}
    slowest = max(spans, key=lambda sid: (spans[sid], sid))
    assert slowest in {e["name"] for e in outer}


def test_parquet_tables(tiny_run: Path, tmp_path: Path) -> None:
    target = tmp_path / "pq"
    _export(str(tiny_run), "--parquet", str(target))
    con = duckdb.connect()
    count = {
        t: con.execute(f"SELECT count(*) FROM '{target / t}.parquet'").fetchone()[0]
        for t in ("events", "trajectories", "turns", "steps")
    }
    assert count == {"events": 47, "trajectories": 3, "turns": 4, "steps": 2}  # test_analyze_tiny: 47 rows
    tokens = con.execute(
        f"SELECT sample_id, completion_tokens FROM '{target}/trajectories.parquet' ORDER BY 1"
    ).fetchall()
    assert [t for _, t in tokens] == [150, 300, 20]
    manifest = json.loads((target / "manifest.json").read_text())
    assert manifest["schema"] == 1 and manifest["tables"]["events"] == 47
