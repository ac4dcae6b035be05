"""DuckDB runs the views' queries side by side, each task on a cursor of its own showing the same
views (DuckDBBackend.side_by_side): the analysis is the one the same queries give one after
another, for the whole run, a step selection, and each refresh of ``--follow``."""

from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path

import duckdb
import pytest
from test_follow import _cut, _same

from trace_instrument.traces import duckdb_backend, views
from trace_instrument.traces.analyze import Options, analyze
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


def test_out_of_memory_side_by_side_is_run_again_one_after_another(sim_run, monkeypatch) -> None:
    # the queries running at once share one memory limit: what fits it one at a time must pass
    options = Options(cache=False, threads=2, steps=(2, 3))
    expected = json.loads(to_json(analyze([sim_run[0]], options)))
    original = views._latency_views

    def latency_views(backend):  # as DuckDB fails when the queries at once outgrow the limit
        if threading.current_thread().name.startswith(WORKER):
            raise duckdb.OutOfMemoryException("Out of Memory Error: could not allocate block")
        return original(backend)

    monkeypatch.setattr(views, "_latency_views", latency_views)
    names = _threads_running_queries(monkeypatch)
    assert json.loads(to_json(analyze([sim_run[0]], options))) == expected
    assert any(name.startswith(WORKER) for name in names)  # tried side by side first


def test_any_other_error_side_by_side_is_raised(sim_run, monkeypatch) -> None:
    monkeypatch.setattr(views, "_latency_views", _raises)
    with pytest.raises(duckdb.OutOfMemoryException):  # one after another too: it is not retried
        analyze([sim_run[0]], Options(cache=False, threads=1))
    monkeypatch.setattr(views, "_latency_views", _fails)
    with pytest.raises(RuntimeError, match="a view failed"):
        analyze([sim_run[0]], Options(cache=False, threads=2))


def test_an_unused_view_that_fails_still_fails_the_analysis(sim_run, monkeypatch, tmp_path: Path) -> None:
    # progress lines only: no rollouts to show, so nothing reads the sglang times' result
    trace = tmp_path / "trace"
    shutil.copytree(sim_run[0] / "progress", trace / "progress")
    assert analyze([trace], Options(cache=False, threads=2)).rollouts is None
    monkeypatch.setattr(views, "_sglang_fields", _fails)
    for threads in (1, 2):
        with pytest.raises(RuntimeError, match="a view failed"):
            analyze([trace], Options(cache=False, threads=threads))


def _fails(*_: object) -> None:
    raise RuntimeError("a view failed")


def _raises(*_: object) -> None:
    raise duckdb.OutOfMemoryException("Out of Memory Error: could not allocate block")


def test_an_interrupt_drops_the_queued_views_and_closes_cleanly(sim_run, monkeypatch) -> None:
    # Ctrl-C while the views run: the tasks not started are dropped, the error is the interrupt
    # (the connections close after it, not "busy"), and the next analysis runs whole
    started: list[str] = []

    def busy(name: str):
        def task(*_: object) -> None:
            started.append(name)
            time.sleep(0.5)

        return task

    monkeypatch.setattr(views, "_sglang_fields", busy("sglang"))
    monkeypatch.setattr(views, "_rollouts", busy("rollouts"))
    monkeypatch.setattr(views, "_funnel", busy("funnel"))

    def interrupted(*_: object) -> None:
        time.sleep(0.1)  # both workers busy, the rest queued
        raise KeyboardInterrupt

    monkeypatch.setattr(views, "_header", interrupted)
    with pytest.raises(KeyboardInterrupt):
        analyze([sim_run[0]], Options(cache=False, threads=2))
    assert sorted(started) == ["rollouts", "sglang"]
    monkeypatch.undo()
    assert analyze([sim_run[0]], Options(cache=False, threads=2)).rollouts is not None
