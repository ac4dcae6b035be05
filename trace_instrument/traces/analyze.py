"""``analyze``: read one run's trace folders and compute every view (no printing, no exiting); a result
computed once is kept in the cache for the same steps."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from trace_instrument.traces import serde
from trace_instrument.traces.backend import Backend, sql_string
from trace_instrument.traces.model import Analysis
from trace_instrument.traces.options import DEFAULT_OPTIONS, Options
from trace_instrument.traces.runs import select_run
from trace_instrument.traces.store import Progress, open_engine, trace_folders
from trace_instrument.traces.trajectory import load_details
from trace_instrument.traces.views import compute

__all__ = ["Options", "analyze"]  # Options for the callers that build them beside the call


def analyze(roots: list[Path], options: Options = DEFAULT_OPTIONS, progress: Progress | None = None) -> Analysis:
    """Every view of the run under ``roots``; raises TraceInputError when nothing usable is there.

    ``progress`` is told what is being done as each part of a long read starts."""
    roots = trace_folders(roots)
    with open_engine(roots, options, progress) as (backend, inputs, report, cached):
        if cached:
            stored = _cached_result(backend, options)
            if stored is not None:
                return _replace_cached(stored, True)
        if progress is not None:
            progress("computing the views")
        selection = select_run(backend, inputs, options.run)
        analysis = compute(backend, selection, report, options)
        if options.open_slowest:
            opened = load_details(backend, [t.sample_id for t in analysis.slowest[: options.open_slowest]])
            analysis = replace(analysis, slowest_details=opened)
        if options.cache and backend.name == "duckdb":
            _store_result(backend, options, analysis)
        return _replace_cached(analysis, cached)


def _result_key(options: Options) -> str:
    steps = "all" if options.steps is None else f"{options.steps[0]}-{options.steps[1]}"
    key = steps if options.run is None else f"{steps} run={options.run}"
    return key if not options.open_slowest else f"{key} open={options.open_slowest}"


def _cached_result(backend: Backend, options: Options) -> Analysis | None:
    """The analysis a previous run stored for the same steps (the cache holds plain JSON, never code)."""
    try:
        rows = backend.rows("cached_result", key=sql_string(_result_key(options)))
        return serde.from_json(rows[0][0]) if rows else None
    except Exception:  # noqa: BLE001 - an older or damaged cache means: compute again
        return None


def _store_result(backend: Backend, options: Options, analysis: Analysis) -> None:
    backend.run("CREATE TABLE IF NOT EXISTS cache_results (steps VARCHAR, analysis VARCHAR)")
    key = sql_string(_result_key(options))
    backend.run(f"DELETE FROM cache_results WHERE steps = {key}")
    backend.run(f"INSERT INTO cache_results VALUES ({key}, {sql_string(serde.to_json(analysis))})")


def _replace_cached(analysis: Analysis, cached: bool) -> Analysis:
    return replace(analysis, cached=cached)
