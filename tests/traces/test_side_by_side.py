"""DuckDB runs the views' queries side by side, each task on a cursor of its own showing the same
views (DuckDBBackend.side_by_side): the analysis is the one the same queries give one after
another, for the whole run, a step selection, and each refresh of ``--follow``."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from test_follow import _cut, _same

from trace_instrument.traces import Options, analyze, duckdb_backend
from trace_instrument.traces.duckdb_backend import DuckDBBackend
from trace_instrument.traces.follow import Follower
from trace_instrument.traces.render.metrics import to_json

WORKER = "trace-views"  # the name of side_by_side's threads


def _threads_running_queries(monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """The names of the threads that run a query from now on."""
    names: set[str] = set()
    original = DuckDBBackend.run

    def run(self: DuckDBBackend, sql: str) -> list:
        names.add(threading.current_thread().name)
        return original(self, sql)

    monkeypatch.setattr(DuckDBBackend, "run", run)
    return names


@pytest.mark.parametrize("steps", [None, (2, 3)], ids=["whole-run", "steps-2-3"])
def test_side_by_side_gives_what_one_after_another_gives(sim_run, monkeypatch, steps) -> None:
    # threads=2 runs two cursors whatever the machine's cores
    options = Options(cache=False, threads=2, steps=steps)
    names = _threads_running_queries(monkeypatch)
    side_by_side = analyze([sim_run[0]], options)
    assert any(name.startswith(WORKER) for name in names)
    assert "MainThread" in names  # the header and the in-flight samples, meanwhile
    monkeypatch.setattr(duckdb_backend, "SIDE_BY_SIDE", 1)
    names.clear()
    in_order = analyze([sim_run[0]], options)
    assert names == {"MainThread"}
    assert json.loads(to_json(side_by_side)) == json.loads(to_json(in_order))


def test_a_refresh_shows_on_the_cursors_what_it_merged(sim_run, monkeypatch, tmp_path: Path) -> None:
    # the cursors outlive a refresh: the next one's queries read the tables it brought up to date
    trace = tmp_path / "trace"
    full = _cut(sim_run[0], trace, 0.7)
    with Follower([trace], Options(cache=False, threads=2)) as follower:
        follower.refresh()
        for path, data in full.items():
            path.write_bytes(data)
        names = _threads_running_queries(monkeypatch)
        refresh = follower.refresh()
        assert not refresh.full
        assert any(name.startswith(WORKER) for name in names)
        _same(refresh.analysis, analyze([trace], Options(cache=False)))


def test_one_thread_runs_every_query_on_its_own_connection(sim_run, monkeypatch) -> None:
    names = _threads_running_queries(monkeypatch)
    analyze([sim_run[0]], Options(cache=False, threads=1))
    assert names == {"MainThread"}
