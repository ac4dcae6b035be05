"""`analyze --follow`: each refresh reads only the complete lines appended since the last one, and
ends with the figures a fresh analysis of the same files gives."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trace_instrument.cli import app
from trace_instrument.traces.analyze import Options, analyze
from trace_instrument.traces.follow import Follower
from trace_instrument.traces.render.metrics import to_json

runner = CliRunner()


def _growing(trace: Path) -> list[Path]:
    return sorted([*trace.glob("sample/*.csv"), *trace.glob("trajectory/*.jsonl")])


def _complete(data: bytes) -> int:
    """Bytes up to the last newline: what a reader may take of a file being written."""
    return data.rfind(b"\n") + 1


def _copy(trace: Path, target: Path) -> Path:
    """A copy of a trace folder, without the cache an earlier analysis left in it."""
    return Path(shutil.copytree(trace, target, ignore=shutil.ignore_patterns(".trace-instrument-cache")))


def _cut(full: Path, target: Path, fraction: float) -> dict[Path, bytes]:
    """``target``: ``full`` with every growing file cut at ``fraction`` of its bytes (mid-line); the
    full contents of each, by path in ``target``."""
    _copy(full, target)
    contents = {}
    for path in _growing(target):
        data = path.read_bytes()
        contents[path] = data
        path.write_bytes(data[: int(len(data) * fraction)])
    return contents


def _same(a, b) -> None:
    """Two analyses of the same files: their JSON documents agree (floats to the last bits)."""
    left, right = json.loads(to_json(a)), json.loads(to_json(b))
    assert left["metrics"] == {k: pytest.approx(v, rel=1e-9) for k, v in right["metrics"].items()}
    assert left["steps"] == right["steps"] or _steps_close(left["steps"], right["steps"])
    assert left["run"] == right["run"]


def _steps_close(left: list[dict], right: list[dict]) -> bool:
    assert [{k: pytest.approx(v, rel=1e-9) if isinstance(v, float) else v for k, v in s.items()} for s in right] == left
    return True


def test_a_refresh_reads_only_what_was_appended(sim_run, tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    full = _cut(sim_run[0], trace, 0.6)
    cut = {path: path.read_bytes() for path in full}
    with Follower([trace], Options(cache=False)) as follower:
        first = follower.refresh()
        assert first.full and first.reason is None
        torn = sum(1 for path, data in cut.items() if path.suffix == ".csv" and not data.endswith(b"\n"))
        assert torn and first.analysis.header.rows_rejected == torn  # the lines being written wait
        # the rest is written, with a damaged CSV row and a line that is not JSON among the new lines
        damaged = {p: d for p, d in full.items()}
        csv_file = next(p for p in full if p.suffix == ".csv")
        jsonl_file = next(p for p in full if p.suffix == ".jsonl")
        damaged[csv_file] = full[csv_file] + b"a,b,c\r\n"
        damaged[jsonl_file] = full[jsonl_file] + b"not json\n"
        for path, data in damaged.items():
            path.write_bytes(data)
        second = follower.refresh()
        assert not second.full
        assert second.bytes_read == sum(_complete(damaged[p]) - _complete(cut[p]) for p in full)
        # the same figures, the same skipped rows at the same file:line, as a fresh read
        _same(second.analysis, analyze([trace], Options(cache=False)))
        lines = len(damaged[csv_file].splitlines())
        assert any(f"{csv_file}:{lines}" in s.examples for s in second.analysis.header.skipped)
        assert second.analysis.header.rows_rejected == 1
        third = follower.refresh()
        assert not third.full and third.bytes_read == 0
        assert third.analysis is second.analysis  # no file changed: the figures are shown again
        status = next(trace.glob("status/*.json"))
        os.utime(status, ns=(status.stat().st_atime_ns, status.stat().st_mtime_ns + 10**9))
        fourth = follower.refresh()  # a file touched: computed again, to the same figures
        assert fourth.analysis is not second.analysis and not fourth.full
        _same(fourth.analysis, second.analysis)


def test_growing_progress_files_read_as_a_fresh_analysis(sim_run, tmp_path: Path) -> None:
    """The progress logs are read on from where their complete lines ended: each refresh equals a
    fresh analysis, the step windows' progress flags and throughput included."""
    trace = tmp_path / "trace"
    _copy(sim_run[0], trace)
    logs = {path: path.read_bytes() for path in sorted(trace.glob("progress/*.log"))}
    assert logs
    for path, data in logs.items():
        path.write_bytes(data[: len(data) // 2])
    with Follower([trace], Options(cache=False)) as follower:
        _same(follower.refresh().analysis, analyze([trace], Options(cache=False)))
        for path, data in logs.items():
            path.write_bytes(data[: len(data) * 3 // 4])
        _same(follower.refresh().analysis, analyze([trace], Options(cache=False)))
        for path, data in logs.items():
            path.write_bytes(data)
        second = follower.refresh()
        assert not second.full and second.bytes_read == 0
        _same(second.analysis, analyze([trace], Options(cache=False)))
        assert any(s.progress == "complete" and s.gen_throughput for s in second.analysis.steps)
        # rewritten in place at the same size, its modification time set back (cp -p, rsync -a)
        path, data = next(iter(logs.items()))
        before = path.stat()
        path.write_bytes(data.replace(b"Step 1 rollout started", b"Step 9 rollout started", 1))
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        third = follower.refresh()
        assert third.analysis is not second.analysis
        _same(third.analysis, analyze([trace], Options(cache=False)))


def test_a_new_trajectory_file_is_read_as_appended(sim_run, tmp_path: Path) -> None:
    """A rotated trajectory file (the store starts a new one) is new lines, not a reason to reload."""
    trace = tmp_path / "trace"
    _copy(sim_run[0], trace)
    source = _growing(trace)[-1]
    assert source.suffix == ".jsonl"
    lines = source.read_bytes().splitlines(keepends=True)
    half = len(lines) // 2
    source.write_bytes(b"".join(lines[:half]))
    with Follower([trace], Options(cache=False)) as follower:
        follower.refresh()
        rotated = source.with_name(source.stem + "_rotated.jsonl")
        rotated.write_bytes(b"".join(lines[half:]))
        refresh = follower.refresh()
        assert not refresh.full and refresh.bytes_read == len(b"".join(lines[half:]))
        _same(refresh.analysis, analyze([trace], Options(cache=False)))


def test_a_rewritten_file_loads_everything_and_says_why(sim_run, tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    _copy(sim_run[0], trace)
    victim = _growing(trace)[0]
    with Follower([trace], Options(cache=False)) as follower:
        follower.refresh()
        lines = victim.read_bytes().splitlines(keepends=True)
        victim.write_bytes(b"".join(lines[: len(lines) // 2]))
        refresh = follower.refresh()
        assert refresh.full and refresh.reason == f"{victim} was rewritten"
        _same(refresh.analysis, analyze([trace], Options(cache=False)))


def test_a_file_rewritten_at_the_same_size_loads_everything(sim_run, tmp_path: Path) -> None:
    """Other bytes where the last refresh read (an append-only log never changes them) mean a rewrite."""
    trace = tmp_path / "trace"
    _copy(sim_run[0], trace)
    victim = _growing(trace)[0]
    with Follower([trace], Options(cache=False)) as follower:
        follower.refresh()
        data = victim.read_bytes()
        first = data.split(b"\n", 1)[0]
        fields = first.split(b",")
        fields[4] = str(int(fields[4]) + 7).encode()  # the same length
        victim.write_bytes(b",".join(fields) + data[len(first) :])
        assert len(victim.read_bytes()) == len(data)
        refresh = follower.refresh()
        assert refresh.full and refresh.reason == f"{victim} was rewritten"
        _same(refresh.analysis, analyze([trace], Options(cache=False)))


def test_the_cli_follows_and_the_page_reloads_itself(tiny_run: Path, tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    args = ["analyze", str(tiny_run), "--follow", "--interval", "0.2", "--refreshes", "2", "--html", str(page)]
    result = runner.invoke(app, [*args, "--format", "json"])
    assert result.exit_code == 0, result.output
    assert result.stderr.count("refreshed at ") == 2 and "read 0 bytes, appended" in result.stderr
    assert '<meta http-equiv="refresh" content="0.2">' in page.read_text(encoding="utf-8")


def test_follow_is_refused_with_spark_or_a_baseline(tiny_run: Path) -> None:
    spark = runner.invoke(app, ["analyze", str(tiny_run), "--follow", "--refreshes", "1", "--engine", "spark"])
    assert spark.exit_code == 2 and "DuckDB only" in spark.output
    both = runner.invoke(app, ["analyze", str(tiny_run), "--follow", "--baseline", str(tiny_run)])
    assert both.exit_code == 2
