"""``export --parquet``: the normalised tables as Parquet files, the hand-off to other engines.

Tables: ``events`` (one row per CSV row), ``trajectories`` (one per JSONL line),
``turns`` (one per turn) and ``steps`` (one per global step); docs/analyze.md documents
their columns. A ``manifest.json`` names the schema version and the sources.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from trace_instrument.traces.backend import Backend
from trace_instrument.traces.events import EVENT_NAMES
from trace_instrument.traces.model import Skipped, StepWindow
from trace_instrument.traces.options import DEFAULT_OPTIONS, Options
from trace_instrument.traces.runs import select_run
from trace_instrument.traces.store import open_engine
from trace_instrument.traces.views import prepare_export, selected_steps

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class ParquetSummary:
    """Rows written per table, and the inputs left out (given to no run, progress lines of several runs)."""

    tables: dict[str, int]
    left_out: tuple[Skipped, ...] = ()


def export_parquet(roots: list[Path], target: Path, options: Options = DEFAULT_OPTIONS) -> ParquetSummary:
    """Write events/trajectories/turns/steps Parquet files into ``target``; returns rows per table."""
    written: dict[str, int] = {}
    with open_engine([Path(r) for r in roots], options) as (backend, inputs, report, _cached):
        selection = select_run(backend, inputs, options.run)
        inputs = selection.inputs
        backend.select_steps(options.steps)
        progress, left_out = prepare_export(backend, selection, report)
        target.mkdir(exist_ok=True)  # only once the run is known and usable: a refusal leaves nothing behind
        backend.run("CREATE OR REPLACE TEMP TABLE event_names (code INTEGER, event VARCHAR, stage VARCHAR)")
        for code, name in EVENT_NAMES.items():
            backend.run(f"INSERT INTO event_names VALUES ({code}, '{name}', '{name.split(':')[0]}')")
        for table in ("events", "trajectories", "turns"):
            sql = backend.dialect.render(_sql(f"export_{table}"), {})
            path = target / f"{table}.parquet"
            backend.run(f"CREATE OR REPLACE TEMP TABLE export_{table} AS {sql}")
            backend.export_parquet(f"export_{table}", str(path))
            written[table] = int(backend.run(f"SELECT count(*) FROM export_{table}")[0][0])
        steps = selected_steps(backend, progress.info, options.steps)
        _write_steps(backend, steps, target / "steps.parquet")
        written["steps"] = len(steps)
        manifest = {
            "schema": SCHEMA_VERSION,
            "tables": written,
            "sources": [asdict(f) for f in inputs.files if f.path not in progress.paths_left_out],
            "steps": list(options.steps) if options.steps else None,
            "run": selection.run.run_id if selection.run else None,
            "left_out": [asdict(s) for s in left_out],
        }
        (target / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return ParquetSummary(written, left_out)


def _sql(name: str) -> str:
    from trace_instrument.traces.backend import sql_text

    return sql_text(name).strip().rstrip(";")


def _write_steps(backend: Backend, steps: tuple[StepWindow, ...], path: Path) -> None:
    columns = (
        "step BIGINT, data_ms BIGINT, rollout_start_ms BIGINT, rollout_end_ms BIGINT, train_start_ms BIGINT, "
        "train_end_ms BIGINT, sync_ms BIGINT, rollouts_completed BIGINT, samples_trained BIGINT, overlap_ms BIGINT, "
        "trainer_idle_ms BIGINT, rollout_gap_ms BIGINT, progress VARCHAR, progress_order_ok BOOLEAN, "
        "gen_throughput DOUBLE"
    )
    backend.run(f"CREATE OR REPLACE TEMP TABLE export_steps ({columns})")
    for s in steps:
        values = [
            s.step,
            s.data_ms,
            s.rollout_start_ms,
            s.rollout_end_ms,
            s.train_start_ms,
            s.train_end_ms,
            s.sync_ms,
            s.rollouts_completed,
            s.samples_trained,
            s.overlap_ms,
            s.trainer_idle_ms,
            s.rollout_gap_ms,
            s.progress,
            s.progress_order_ok,
            s.gen_throughput,
        ]
        backend.run("INSERT INTO export_steps VALUES (" + ", ".join(_literal(v) for v in values) + ")")
    backend.export_parquet("export_steps", str(path))


def _literal(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, (int, float)):
        return repr(value)
    return "'" + str(value).replace("'", "''") + "'"
