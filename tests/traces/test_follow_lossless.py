"""``analyze --follow`` is lossless while the run is written: each refresh reads every file up to
the last newline it saw and goes on from exactly there, whatever is appended while it reads, and a
finished file compressed in place (``X`` -> ``X.gz``) is read neither twice nor partly.

Each refresh is checked against a fresh ``analyze`` of the same bytes: a copy of the trace folder
in which every growing file holds the bytes the refresh says it saw (``Refresh.seen``). Appends
between a refresh's look and its read are made by hooks (deterministic, default tier); appends by
threads racing the refreshes are in the slow tier.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import shutil
import threading
import time
from pathlib import Path

import pytest

from trace_instrument.traces.analyze import Options, analyze
from trace_instrument.traces.duckdb_backend import DuckDBBackend
from trace_instrument.traces.follow import Follower, Refresh
from trace_instrument.traces.render.metrics import to_json

NO_CACHE = Options(cache=False)


def _growing(trace: Path) -> list[Path]:
    return sorted([*trace.glob("sample/*.csv"), *trace.glob("trajectory/*.jsonl")])


def _complete(data: bytes) -> int:
    return data.rfind(b"\n") + 1


def _start(sim_trace: Path, trace: Path, fraction: float) -> dict[Path, bytes]:
    """``trace``: a copy of the run with every growing file cut at ``fraction`` (mid-line); the
    full contents of each, by path in ``trace``."""
    shutil.copytree(sim_trace, trace, ignore=shutil.ignore_patterns(".trace-instrument-cache"))
    full = {path: path.read_bytes() for path in _growing(trace)}
    for path, data in full.items():
        path.write_bytes(data[: int(len(data) * fraction)])
    return full


def _grow(full: dict[Path, bytes], fraction: float) -> None:
    """Append to each file up to ``fraction`` of its full contents (never shrinking one)."""
    for path, data in full.items():
        if not path.exists():
            continue
        have = path.stat().st_size
        with open(path, "ab") as out:
            out.write(data[have : max(have, int(len(data) * fraction))])


def _document(analysis, folder: Path, shown_as: Path) -> dict:
    """The JSON document, the folder's path written as ``shown_as`` (two copies of one run)."""
    return json.loads(to_json(analysis).replace(str(folder), str(shown_as)))


def _same_bytes(refresh: Refresh, trace: Path, target: Path) -> None:
    """``refresh`` holds the figures a fresh ``analyze`` of the bytes it saw gives."""
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(trace, target, ignore=shutil.ignore_patterns(".trace-instrument-cache"))
    assert refresh.seen, "a refresh says what it saw of each growing file"
    for path, size in refresh.seen:
        with open(path, "rb") as source:  # append-only: its first bytes are what the refresh saw
            data = source.read(size)
        assert len(data) == size
        (target / Path(path).relative_to(trace)).write_bytes(data)
    fresh = _document(analyze([target], NO_CACHE), target, trace)
    mine = _document(refresh.analysis, trace, trace)
    assert mine["metrics"] == {k: pytest.approx(v, rel=1e-9) for k, v in fresh["metrics"].items()}
    assert mine["run"] == fresh["run"]
    assert len(mine["steps"]) == len(fresh["steps"])
    for left, right in zip(mine["steps"], fresh["steps"]):
        assert left == {k: pytest.approx(v, rel=1e-9) if isinstance(v, float) else v for k, v in right.items()}


def _rows(path: Path) -> int:
    """Lines ending with a newline: rows or trajectories, counted from the bytes themselves."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        return f.read().count(b"\n")


def test_appends_during_the_first_load_and_each_refresh_are_read_once(sim_run, tmp_path, monkeypatch) -> None:
    trace = tmp_path / "trace"
    full = _start(sim_run[0], trace, 0.4)
    at_look = {path: path.read_bytes() for path in full}
    load_rows, append = DuckDBBackend.load_rows, DuckDBBackend.append

    def load_while_growing(self, inputs):
        _grow(full, 0.7)  # after the refresh looked, before it reads: a live run never waits
        report = load_rows(self, inputs)
        _grow(full, 0.8)
        return report

    monkeypatch.setattr(DuckDBBackend, "load_rows", load_while_growing)
    with Follower([trace], NO_CACHE) as follower:
        first = follower.refresh()
        assert first.full
        assert dict(first.seen) == {str(p): len(d) for p, d in at_look.items()}
        _same_bytes(first, trace, tmp_path / "same")
        monkeypatch.setattr(DuckDBBackend, "load_rows", load_rows)
        at_look = {path: path.read_bytes() for path in full}

        def append_while_growing(self, new_files, tails):
            _grow(full, 0.95)
            return append(self, new_files, tails)

        monkeypatch.setattr(DuckDBBackend, "append", append_while_growing)
        second = follower.refresh()
        assert not second.full
        assert dict(second.seen) == {str(p): len(d) for p, d in at_look.items()}
        assert second.bytes_read == sum(
            _complete(at_look[p]) - _complete(d[: int(len(d) * 0.4)]) for p, d in full.items()
        )
        _same_bytes(second, trace, tmp_path / "same")
        monkeypatch.setattr(DuckDBBackend, "append", append)
        third = follower.refresh()  # what was appended while the second read is read now
        assert not third.full and third.bytes_read == sum(
            _complete(d[: int(len(d) * 0.95)]) - _complete(at_look[p]) for p, d in full.items()
        )
        _same_bytes(third, trace, tmp_path / "same")
        _grow(full, 1.0)
        last = follower.refresh()
        assert not last.full
        _same_bytes(last, trace, tmp_path / "same")
        rows = sum(_rows(p) for p in full if p.suffix == ".csv")
        assert last.analysis.header.rows_read == rows


def test_a_file_compressed_in_place_is_read_on_not_twice(sim_run, tmp_path) -> None:
    """``gzip X`` writes ``X.gz`` beside ``X`` and then removes ``X``: while both are there the
    ``.gz`` is left out (a fresh analyze leaves it out too), once ``X`` is gone its bytes past
    what was read of ``X`` are read, without loading everything again."""
    trace = tmp_path / "trace"
    full = _start(sim_run[0], trace, 0.5)
    finished = [next(p for p in full if p.suffix == ".csv"), next(p for p in full if p.suffix == ".jsonl")]
    with Follower([trace], NO_CACHE) as follower:
        follower.refresh()
        for path in finished:
            path.write_bytes(full[path])  # the rest written, then the file finished and compressed
            packed = gzip.compress(full[path])
            (path.parent / (path.name + ".gz")).write_bytes(packed[: len(packed) // 2])  # gzip at work
        during = follower.refresh()
        assert not during.full
        _same_bytes(during, trace, tmp_path / "same")
        assert any(s.reason == "duplicate file" for s in during.analysis.header.skipped)
        for path in finished:
            (path.parent / (path.name + ".gz")).write_bytes(gzip.compress(full[path]))
            path.unlink()
        after = follower.refresh()
        assert not after.full and after.reason is None
        half = {p: full[p][: int(len(full[p]) * 0.5)] for p in finished}
        assert after.bytes_read == 0  # everything of the finished files was read before they were compressed
        assert all(_complete(full[p]) > _complete(half[p]) for p in finished)
        _same_bytes(after, trace, tmp_path / "same")
        rows = sum(_rows(p) for p in trace.glob("sample/*.csv*"))
        assert after.analysis.header.rows_read == rows


def test_a_file_grown_and_compressed_between_refreshes_is_read_from_where_it_was(sim_run, tmp_path) -> None:
    trace = tmp_path / "trace"
    full = _start(sim_run[0], trace, 0.5)
    finished = [next(p for p in full if p.suffix == ".csv"), next(p for p in full if p.suffix == ".jsonl")]
    with Follower([trace], NO_CACHE) as follower:
        follower.refresh()
        read_before = {p: _complete(p.read_bytes()) for p in finished}
        for path in finished:
            (path.parent / (path.name + ".gz")).write_bytes(gzip.compress(full[path]))
            path.unlink()
        after = follower.refresh()
        assert not after.full and after.reason is None
        assert after.bytes_read == sum(_complete(full[p]) - read_before[p] for p in finished)
        _same_bytes(after, trace, tmp_path / "same")
        assert after.analysis.header.rows_read == sum(_rows(p) for p in trace.glob("sample/*.csv*"))
        # other bytes in the compressed file than were read of it: everything is loaded again
        victim = finished[0].parent / (finished[0].name + ".gz")
        victim.write_bytes(gzip.compress(b"x" + full[finished[0]]))
        again = follower.refresh()
        assert again.full and again.reason == f"{victim} changed"


def test_a_compressed_file_that_does_not_hold_what_was_read_loads_everything(sim_run, tmp_path) -> None:
    trace = tmp_path / "trace"
    full = _start(sim_run[0], trace, 0.5)
    path = next(p for p in full if p.suffix == ".csv")
    with Follower([trace], NO_CACHE) as follower:
        follower.refresh()
        packed = gzip.compress(full[path])
        (path.parent / (path.name + ".gz")).write_bytes(packed[: len(packed) // 4])  # cut short
        path.unlink()
        refresh = follower.refresh()
        assert refresh.full and refresh.reason == f"{path} is gone ({path}.gz does not hold what was read of it)"


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_threads_appending_while_follow_refreshes(sim_run, tmp_path, seed: int) -> None:
    """Writers append to every growing file in pieces of random length (lines cut anywhere) at
    random moments while refreshes run back to back; some files are finished and compressed in
    place between refreshes. After every refresh: the figures of a fresh analysis of what it saw."""
    rng = random.Random(seed)
    trace = tmp_path / "trace"
    full = _start(sim_run[0], trace, rng.uniform(0.05, 0.3))
    compress = set(rng.sample(sorted(full), 3))
    done = threading.Event()

    def writer(path: Path, data: bytes, pieces: random.Random) -> None:
        with open(path, "ab", buffering=0) as out:
            at = path.stat().st_size
            while at < len(data):
                step = pieces.randint(1, max(2, len(data) // 40))
                out.write(data[at : at + step])
                at += step
                time.sleep(pieces.uniform(0, 0.05))
        if path in compress:
            done.wait()

    threads = [
        threading.Thread(target=writer, args=(p, d, random.Random(rng.random())), daemon=True) for p, d in full.items()
    ]
    with Follower([trace], NO_CACHE) as follower:
        for thread in threads:
            thread.start()
        rounds = 0
        while any(t.is_alive() for t in threads) and rounds < 40:
            refresh = follower.refresh()
            _same_bytes(refresh, trace, tmp_path / "same")
            rounds += 1
            for path in sorted(compress):
                if path.exists() and path.stat().st_size == len(full[path]) and rng.random() < 0.5:
                    packed = path.parent / (path.name + ".gz")
                    packed.write_bytes(gzip.compress(full[path]))
                    path.unlink()
        done.set()
        for thread in threads:
            thread.join()
        for path in sorted(compress):
            if path.exists():
                (path.parent / (path.name + ".gz")).write_bytes(gzip.compress(full[path]))
                path.unlink()
        last = follower.refresh()
        assert not last.full, last.reason
        _same_bytes(last, trace, tmp_path / "same")
        assert rounds >= 3
        assert last.analysis.header.rows_read == sum(_rows(p) for p in trace.glob("sample/*.csv*"))
        assert os.listdir(follower._work) == ["spill"] or os.listdir(follower._work) == []


def test_a_last_line_of_nul_bytes_is_reported_as_a_fresh_analyze_reports_it(sim_run, tmp_path) -> None:
    """A crash or a full disk leaves a last line of NUL bytes, which the runtime never writes: a
    fresh ``analyze`` counts it as damage at its line, and so does ``--follow`` (not as a torn
    line of a run still being written, and not silently)."""
    trace = tmp_path / "trace"
    shutil.copytree(sim_run[0], trace, ignore=shutil.ignore_patterns(".trace-instrument-cache"))
    sample = min(trace.glob("sample/*.csv"))
    trajectory = min(trace.glob("trajectory/*.jsonl"))
    lines = {path: path.read_bytes().count(b"\n") for path in (sample, trajectory)}
    for path in (sample, trajectory):
        with open(path, "ab") as out:
            out.write(b"\0" * 40)  # no newline after it: the file ends inside the damage
    with Follower([trace], NO_CACHE) as follower:
        mine = follower.refresh().analysis.header
        fresh = analyze([trace], NO_CACHE).header
        assert mine.skipped == fresh.skipped
        assert mine.rows_rejected == fresh.rows_rejected == 1
        csv_nul = next(s for s in mine.skipped if s.reason.startswith("CSV row with NUL bytes"))
        assert (csv_nul.count, csv_nul.examples) == (1, (f"{sample}:{lines[sample] + 1}",))
        not_json = next(s for s in mine.skipped if s.reason == "trajectory line that is not JSON")
        assert (not_json.count, not_json.examples) == (1, (f"{trajectory}:{lines[trajectory] + 1}",))
        assert not any("torn" in s.reason for s in mine.skipped)
        for path in (sample, trajectory):  # a newline after the damage: the line is read, and counted once
            with open(path, "ab") as out:
                out.write(b"\n")
        again = follower.refresh()
        assert not again.full
        assert again.analysis.header.skipped == analyze([trace], NO_CACHE).header.skipped == mine.skipped
