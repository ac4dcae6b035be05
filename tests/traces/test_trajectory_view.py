"""`analyze --trajectory ID`: one trajectory turn by turn, checked against its raw JSONL line and CSV rows."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import recompute
import simulate
from typer.testing import CliRunner

from trace_instrument.cli import app

runner = CliRunner()


def _raw_lines(trace_dir: Path) -> dict[str, tuple[Path, int, dict]]:
    """Sample id -> (file, line number, payload), read with json alone."""
    out = {}
    for path in sorted((trace_dir / "trajectory").glob("*.jsonl")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            top = json.loads(line)
            payload = json.loads(top["raw_message"])
            out[f"{top['prompt_uid']}/{payload['request_id']}"] = (path, number, payload)
    return out


def _open(trace_dir: Path, *ids: str) -> list[dict]:
    args = ["analyze", str(trace_dir), "--no-cache", "--format", "json"]
    for sample_id in ids:
        args += ["--trajectory", sample_id]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["trajectories"]


def test_a_trajectory_opens_turn_by_turn(sim_run: tuple[Path, simulate.RunPlan]) -> None:
    trace_dir, _ = sim_run
    raw = _raw_lines(trace_dir)
    # the one with the most turns, and one with a single turn
    many = max(raw, key=lambda s: (len(raw[s][2]["turns"]), s))
    one = min(raw, key=lambda s: (len(raw[s][2]["turns"]), s))
    rows = recompute.read_rows(trace_dir)
    for sample_id, detail in zip((many, one), _open(trace_dir, many, one), strict=True):
        path, number, payload = raw[sample_id]
        assert detail["sample_id"] == sample_id and detail["file"] == f"{path}:{number}"
        turns = payload["turns"]
        assert [t["completion_tokens"] for t in detail["turns"]] == [t["completion_token_count"] for t in turns]
        assert [t["completion_text"] for t in detail["turns"]] == [t["completion_text"] for t in turns]
        assert [t["observation_text"] for t in detail["turns"]] == [t["observation_text"] for t in turns]
        assert [t["finish_reason"] for t in detail["turns"]] == [t["finish_reason"] for t in turns]
        assert detail["stop_reason"] == recompute.stop_reason(payload)
        assert detail["response_length"] == payload["response_length"]
        uid = sample_id.rpartition("/")[0]
        own = sorted(r["ts"] for r in rows if r["sample_id"] == sample_id and r["event"])
        prompt = sorted(r["ts"] for r in rows if r["sample_id"] == f"{uid}/sample" and r["event"])
        got = detail["rows"]
        assert [r["ts"] for r in got if r["sample_id"] == f"{uid}/sample"] == prompt  # the prompt's rows first
        assert sorted(r["ts"] for r in got if r["sample_id"] == sample_id) == own
        assert got[: len(prompt)] == [r for r in got if r["sample_id"] == f"{uid}/sample"]
    assert len(raw[many][2]["turns"]) > 1 and len(raw[one][2]["turns"]) == 1


def test_the_text_view_names_the_stop_reason_and_the_tools(sim_run: tuple[Path, simulate.RunPlan]) -> None:
    trace_dir, _ = sim_run
    raw = _raw_lines(trace_dir)
    sample_id = next(s for s in sorted(raw) if len(raw[s][2]["turns"]) > 1)
    result = runner.invoke(app, ["analyze", str(trace_dir), "--no-cache", "--trajectory", sample_id])
    assert result.exit_code == 0, result.output
    assert f"trajectory {sample_id}" in result.stdout
    assert f"stop reason {recompute.stop_reason(raw[sample_id][2])}" in result.stdout
    first_tool = raw[sample_id][2]["turns"][0]["observation_text"].split()[0]
    assert first_tool in result.stdout


@pytest.mark.parametrize("kind", ["prompt", "unknown"])
def test_an_id_that_is_no_trajectory_is_refused_with_the_way_out(sim_run, kind: str) -> None:
    trace_dir, _ = sim_run
    raw = _raw_lines(trace_dir)
    uid = min(raw).rpartition("/")[0]
    asked = f"{uid}/sample" if kind == "prompt" else "no-such-uid/0"
    result = runner.invoke(app, ["analyze", str(trace_dir), "--no-cache", "--trajectory", asked])
    assert result.exit_code == 2
    if kind == "prompt":
        # the trajectories its JSONL lines or its CSV rows know (a stuck one has rows only)
        rows = recompute.read_rows(trace_dir)
        known = set(raw) | {r["sample_id"] for r in rows if not r["sample_id"].endswith("/sample")}
        siblings = sorted(s for s in known if s.startswith(uid + "/"))
        assert "its prompt's are: " + ", ".join(siblings) in " ".join(result.output.split())
    else:
        assert "no trajectory no-such-uid/0 in this run" in result.output


def test_the_page_opens_the_slowest_rollouts(sim_run, tmp_path: Path) -> None:
    trace_dir, _ = sim_run
    page = tmp_path / "report.html"
    result = runner.invoke(app, ["analyze", str(trace_dir), "--no-cache", "--format", "json", "--html", str(page)])
    assert result.exit_code == 0, result.output
    slowest = [t["sample_id"] for t in json.loads(result.stdout)["details"]["slowest"]][:5]
    text = page.read_text(encoding="utf-8")
    for index, sample_id in enumerate(slowest):
        assert f'<a href="#trajectory-{index}">{sample_id}</a>' in text
        assert f'<details id="trajectory-{index}" class="trajectory"><summary>{sample_id}</summary>' in text


def test_a_uid_that_json_escapes_opens_too(sim_run, tmp_path: Path) -> None:
    """A uid with a quote, a backslash, a tab and a non-ASCII letter: the JSONL line spells it escaped."""
    import csv

    trace = shutil.copytree(sim_run[0], tmp_path / "trace", ignore=shutil.ignore_patterns(".trace-instrument-cache"))
    raw = _raw_lines(trace)
    old = min(raw).rpartition("/")[0]
    new = 'q"uo\\te\tü-' + old
    for path in (trace / "sample").glob("*.csv"):
        with open(path, newline="", encoding="utf-8") as f:
            rows = [[(new + c[len(old) :] if c.startswith(old + "/") else c) if i == 2 else c for i, c in enumerate(r)]
                    for r in csv.reader(f)]  # fmt: skip
        with open(path, "w", newline="", encoding="utf-8") as f:
            csv.writer(f, lineterminator="\r\n").writerows(rows)
    for path in (trace / "trajectory").glob("*.jsonl"):
        lines = []
        for line in path.read_text(encoding="utf-8").splitlines():
            top = json.loads(line)
            if top["prompt_uid"] == old:
                payload = json.loads(top["raw_message"])
                payload["prompt_uid"] = top["prompt_uid"] = new
                top["raw_message"] = json.dumps(payload)  # ensure_ascii: ü escaped as well
            lines.append(json.dumps(top))
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    sample_id = new + "/" + min(raw).rpartition("/")[2]
    (detail,) = _open(trace, sample_id)
    path, number, payload = raw[min(raw)]
    assert detail["file"] == f"{path}:{number}"  # _raw_lines read the copy
    assert [t["completion_text"] for t in detail["turns"]] == [t["completion_text"] for t in payload["turns"]]
