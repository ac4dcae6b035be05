"""The event summaries (per file, job id and content; the placeholder rows) hold what the events hold.

Several views read the summaries instead of the events. Each summary is checked here against the
rows of the ``events`` view it stands for, counted in Python, for the whole run, one run's files,
a step range and both; and ``--follow``'s merged summaries against a fresh load of the same files.
"""

from __future__ import annotations

import shutil
from collections import defaultdict
from pathlib import Path

import pytest

from trace_instrument.traces.backend import PLACEHOLDER_UIDS
from trace_instrument.traces.discover import discover
from trace_instrument.traces.duckdb_backend import DuckDBBackend
from trace_instrument.traces.events import Event
from trace_instrument.traces.follow import Follower
from trace_instrument.traces.options import Options

TOOL = "from=ToolAgentLoop|to=Tool|stage=AGENT_TOOL|detail=tool_executed_name=search"
SYNC = "from=Trainer|to=Rollout|stage=SYNC_PARAMS|global_step=2|detail=weights_synced"
# placeholder ids, and ids beside the rule (a placeholder uid is the part before the last slash)
IDS = ["unknown/sample", "None/0", "nan/3", "N/A/x", "/7", "unknown/a/b", "unknownx/1", "real"]


def _rows(sample_ids: list[str], ts: int) -> bytes:
    rows = [f"job-other,sample,{sid},RUNNING,{ts + i},{TOOL}" for i, sid in enumerate(sample_ids)]
    rows.append(f"job-other,sample,unknown/sample,RUNNING,{ts + 99},{SYNC}")  # a sync row is no placeholder row
    return "".join(row + "\r\n" for row in rows).encode()


def _is_placeholder_row(sample_id: str, code: int | None) -> bool:
    if code is None or code == Event.SYNC_PARAMS or "/" not in sample_id:
        return False
    return sample_id.rsplit("/", 1)[0] in PLACEHOLDER_UIDS


def _expected(backend: DuckDBBackend) -> tuple[list[tuple], list[tuple]]:
    """What the summaries of the ``events`` view hold, counted here from its rows."""
    counts: dict[tuple, list[int]] = defaultdict(list)
    placeholders = []
    for file_id, job_id, sample_id, ts, cid, code in backend.run(
        "SELECT file_id, job_id, sample_id, ts, cid, code FROM events"
    ):
        counts[(file_id, job_id, cid)].append(ts)
        if _is_placeholder_row(sample_id, code):
            placeholders.append((file_id, sample_id, ts))
    summary = []
    for key, times in counts.items():
        known = [t for t in times if t is not None]
        summary.append((*key, len(times), min(known, default=None), max(known, default=None)))
    return sorted(summary, key=repr), sorted(placeholders)


def _shown(backend: DuckDBBackend) -> tuple[list[tuple], list[tuple]]:
    counts = backend.run("SELECT file_id, job_id, cid, n, first_ts, last_ts FROM event_counts")
    placeholders = backend.run("SELECT file_id, sample_id, ts FROM placeholder_events")
    return sorted(counts, key=repr), sorted(placeholders)


@pytest.fixture
def mixed_run(sim_run, tmp_path: Path) -> Path:
    trace = Path(shutil.copytree(sim_run[0], tmp_path / "trace", ignore=shutil.ignore_patterns(".trace-*")))
    for path in sorted(trace.glob("sample/*.csv"))[:2]:
        with open(path, "ab") as f:
            f.write(_rows(IDS, 1787215021300))
    return trace


@pytest.mark.parametrize("files", ["every", "some"])
@pytest.mark.parametrize("steps", [None, (2, 3)])
def test_the_summaries_hold_what_the_selected_events_hold(mixed_run: Path, tmp_path: Path, files, steps) -> None:
    inputs = discover([mixed_run])
    backend = DuckDBBackend(None, tmp_path / "spill")
    try:
        backend.load(inputs)
        if files == "some":
            backend.select_run(tuple(f.file_id for f in inputs.files)[1::2])
        backend.select_steps(steps)
        expected = _expected(backend)
        assert expected[0]
        if steps is None and files == "every":
            assert len(expected[1]) == 2 * 5  # the five placeholder ids in each of the two files
        assert _shown(backend) == expected
    finally:
        backend.close()


def _summaries_by_content(backend: DuckDBBackend) -> tuple[list[tuple], list[tuple]]:
    """The run's whole summaries, with each content's text for its id (ids differ between loads)."""
    counts = backend.run(
        "SELECT e.file_id, e.job_id, c.content, e.n, e.first_ts, e.last_ts "
        "FROM event_counts_all AS e JOIN contents AS c ON c.cid = e.cid"
    )
    placeholders = backend.run("SELECT file_id, sample_id, ts FROM placeholder_events_all")
    return sorted(counts, key=repr), sorted(placeholders)


def test_follow_merges_the_summaries_of_appended_rows(mixed_run: Path, tmp_path: Path) -> None:
    files = sorted(mixed_run.glob("sample/*.csv"))
    full = {path: path.read_bytes() for path in files}
    for path, data in full.items():
        lines = data.splitlines(keepends=True)
        path.write_bytes(b"".join(lines[: len(lines) * 2 // 3]))
    with Follower([mixed_run], Options(cache=False)) as follower:
        follower.refresh()
        for path, data in full.items():
            path.write_bytes(data)  # the rest, the placeholder rows and a new job id among it
        assert not follower.refresh().full
        assert follower._backend is not None
        merged = _summaries_by_content(follower._backend)
    fresh = DuckDBBackend(None, tmp_path / "spill")
    try:
        fresh.load(discover([mixed_run]))
        assert merged == _summaries_by_content(fresh)
        assert len(merged[1]) == 2 * 5
    finally:
        fresh.close()
