"""Never-trained samples per generation step: each entry of ``steps`` has ``in_flight/count``, the
samples generated at that step (a trajectory's completed rollout step, else its started one, else
its first row's step) that were never trained; the trackers get it at that step.

The figures are recomputed with pandas from the raw sample CSVs, not from the engine's tables.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
from typer.testing import CliRunner

from trace_instrument.cli import app
from trace_instrument.formats import EVENTS
from trace_instrument.traces.analyze import Options, analyze
from trace_instrument.traces.render.metrics import to_json
from trace_instrument.traces.render.trackers import figures

runner = CliRunner()
CONTENT = r"^from=([^|]*)[|]to=([^|]*)[|]stage=([^|]*)(?:[|]global_step=([^|]*))?(?:[|]detail=(.*))?$"
COLUMNS = ["job_id", "cat", "sample_id", "status", "ts", "content"]


def _is(rows: pd.DataFrame, name: str) -> pd.Series:
    """Rows of the format's event ``name``: its stage, and its detail as written (``x*``: starting with x)."""
    stage, _, written = EVENTS[name]
    same = rows["stage"] == stage
    if written == "*":
        return same
    if written.endswith("*"):
        return same & rows["detail"].str.startswith(written[:-1])
    return same & (rows["detail"] == written)


def _never_trained_by_step(trace: Path) -> dict[int, int]:
    """pandas: the never-trained trajectories, and prompts that got none, by generation step."""
    frames = [pd.read_csv(f, header=None, names=COLUMNS, dtype=str) for f in sorted(trace.glob("sample/*.csv"))]
    rows = pd.concat(frames, ignore_index=True)
    parts = rows["content"].str.extract(CONTENT)
    rows["stage"], rows["detail"] = parts[2], parts[4].fillna("")
    rows["step"] = pd.to_numeric(parts[3], errors="coerce")
    known = pd.Series(False, index=rows.index)
    for name in EVENTS:
        if name != "SYNC_PARAMS":
            known |= _is(rows, name)
    rows = rows[known & rows["sample_id"].notna()].copy()
    rows["uid"] = rows["sample_id"].str.rsplit("/", n=1).str[0]
    rows = rows[~rows["uid"].isin(["unknown", "None", "nan", "N/A", ""])]
    rows["completed"] = rows["step"].where(_is(rows, "AGENT_RUN_COMPLETED"))
    rows["started"] = rows["step"].where(_is(rows, "AGENT_TASK_STARTED") | _is(rows, "SESSION_STARTED"))
    rows["trained"] = _is(rows, "TRAIN_UPDATE")
    samples = rows.groupby("sample_id").agg(
        uid=("uid", "first"),
        completed=("completed", "max"),
        started=("started", "max"),
        first=("step", "min"),
        trained=("trained", "any"),
    )
    samples["gen_step"] = samples["completed"].fillna(samples["started"]).fillna(samples["first"])
    is_traj = ~samples.index.str.endswith("/sample")
    with_traj = set(samples.loc[is_traj, "uid"])
    never = samples[~samples["trained"] & (is_traj | ~samples["uid"].isin(with_traj))]
    counts = never["gen_step"].dropna().astype(int).value_counts()
    return {int(step): int(n) for step, n in counts.items()}


def test_never_trained_samples_per_generation_step_match_pandas(sim_run) -> None:
    trace = sim_run[0]
    expected = _never_trained_by_step(trace)
    analysis = analyze([trace], Options(cache=False))
    doc = json.loads(to_json(analysis))
    mine = {entry["step"]: entry["in_flight/count"] for entry in doc["steps"]}
    assert mine == {step: expected.get(step, 0) for step in mine}
    assert sum(1 for n in mine.values() if n) >= 2, "the simulated run leaves samples of several steps untrained"
    assert sum(mine.values()) <= doc["metrics"]["in_flight/count"]  # a sample without a step counts run-wide only
    # the trackers get each step's figure at that step (the JSON's, named with the prefix)
    logged = figures(analysis).steps
    assert {step: logged[step]["trace/in_flight/count"] for step in mine} == mine


def test_steps_option_keeps_each_steps_count(sim_run) -> None:
    """--steps shows fewer steps; a shown step's never-trained samples are the same."""
    trace = sim_run[0]
    expected = _never_trained_by_step(trace)
    result = runner.invoke(app, ["analyze", str(trace), "--no-cache", "--steps", "2-3", "--format", "json"])
    assert result.exit_code == 0, result.output
    steps = json.loads(result.stdout)["steps"]
    assert {e["step"]: e["in_flight/count"] for e in steps} == {2: expected.get(2, 0), 3: expected.get(3, 0)}


def test_a_prompt_that_never_got_a_trajectory_counts_at_its_step(sim_run, tmp_path: Path) -> None:
    trace = Path(shutil.copytree(sim_run[0], tmp_path / "trace", ignore=shutil.ignore_patterns(".trace-*")))
    before = _never_trained_by_step(trace)
    sample = min(trace.glob("sample/*.csv"))
    first = sample.read_text().splitlines()[0].split(",")
    prompt = "00000000-0000-0000-0000-00000000abcd/sample"
    dispatched = (
        "from=Trainer|to=AgentLoopManager|stage=DATA_DISPATCH|global_step=2|detail=dispatched_to_agent_loop_manager"
    )
    with open(sample, "a") as out:  # generated as the file's first row, dispatched at step 2, never started
        out.write(f"{first[0]},sample,{prompt},RUNNING,{first[4]},{first[5]}\n")
        out.write(f"{first[0]},sample,{prompt},RUNNING,{int(first[4]) + 1},{dispatched}\n")
    expected = _never_trained_by_step(trace)
    first_step = int(first[5].split("global_step=")[1].split("|")[0])
    assert first_step != 2  # no rollout step: the step of its first row, not its last
    assert expected == {**before, first_step: before.get(first_step, 0) + 1}
    steps = json.loads(to_json(analyze([trace], Options(cache=False))))["steps"]
    assert {e["step"]: e["in_flight/count"] for e in steps} == {e["step"]: expected.get(e["step"], 0) for e in steps}
