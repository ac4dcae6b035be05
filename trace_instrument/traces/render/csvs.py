"""``analyze --csv DIR``: every view as a CSV file of plain values (numbers stay numbers).

``steps.csv`` holds the per-step keys of the JSON document (verl's names, one row per step),
``metrics.csv`` its run-level keys (``key,value``), ``run.csv`` the header with the analysis'
own fields (engine, cached, step basis, notes) and ``run_skipped.csv`` what reading left out;
every other view is a file of its own, named
after its field of the JSON ``details`` (the step windows: ``step_windows``). Which files there
are and their columns come from the model's types, never from the data: a view with no rows is a
file with its header alone, so a folder written again holds no file of an earlier run's.

A record's nested object becomes columns joined with ``/`` (``turns/mean``); a list of objects in
a record becomes a file of its own, its rows led by the record's first field
(``step_rollouts_stop_reasons.csv``: ``step,reason,count,frac``); a list of plain values is one
JSON cell.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from trace_instrument.traces import model
from trace_instrument.traces.model import Analysis
from trace_instrument.traces.render.metrics import metrics, step_metrics

Table = tuple[list[str], list[dict[str, Any]]]  # columns, rows


def _hints(kind: type) -> dict[str, Any]:
    return typing.get_type_hints(kind, vars(model))


def _optional(kind: Any) -> Any:
    """``X`` of ``X | None``; other types as they are."""
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(kind) if a is not type(None)]
        return inner[0] if len(inner) == 1 else kind
    return kind


def _record_list(kind: Any) -> type | None:
    """The dataclass of ``tuple[X, ...]``, else None."""
    args = typing.get_args(kind)
    if (
        typing.get_origin(kind) is tuple
        and len(args) == 2
        and args[1] is Ellipsis
        and dataclasses.is_dataclass(args[0])
    ):
        return typing.cast(type, args[0])
    return None


def _record_map(kind: Any) -> type | None:
    """The dataclass of ``dict[str, X]``, else None."""
    args = typing.get_args(kind)
    if typing.get_origin(kind) is dict and len(args) == 2 and dataclasses.is_dataclass(args[1]):
        return typing.cast(type, args[1])
    return None


def _columns(kind: type, prefix: str = "") -> list[str]:
    """A record type's columns: nested records flattened with ``/``, lists of records left out."""
    out: list[str] = []
    for f in dataclasses.fields(kind):
        hint = _optional(_hints(kind)[f.name])
        if _record_list(hint) is not None:
            continue
        if dataclasses.is_dataclass(hint) and isinstance(hint, type):
            out += _columns(hint, f"{prefix}{f.name}/")
        else:
            out.append(f"{prefix}{f.name}")
    return out


def _cell(value: Any) -> Any:
    return json.dumps(value) if isinstance(value, (list, tuple, dict)) else value


def _row(kind: type, record: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    row: dict[str, Any] = {}
    for f in dataclasses.fields(kind):
        hint = _optional(_hints(kind)[f.name])
        value = record.get(f.name)
        if _record_list(hint) is not None:
            continue
        if dataclasses.is_dataclass(hint) and isinstance(hint, type):
            row.update(_row(hint, value or {}, f"{prefix}{f.name}/"))
        else:
            row[f"{prefix}{f.name}"] = _cell(value)
    return row


def _tables(name: str, kind: type, records: list[dict[str, Any]], lead: str | None) -> Iterator[tuple[str, Table]]:
    """The table of ``records`` (of type ``kind``) and of the lists of records inside them."""
    first = dataclasses.fields(kind)[0].name
    lead_columns = [lead] if lead else []
    rows = [{**({lead: r["__lead"]} if lead else {}), **_row(kind, r)} for r in records]
    yield name, (lead_columns + _columns(kind), rows)
    for f in dataclasses.fields(kind):
        child = _record_list(_optional(_hints(kind)[f.name]))
        if child is None:
            continue
        nested = [{**item, "__lead": r.get(first)} for r in records for item in r.get(f.name) or ()]
        yield from _tables(f"{name}_{f.name}", child, nested, first)


def tables(analysis: Analysis) -> dict[str, Table]:
    """Every CSV file's columns and rows, by file name (without ``.csv``), in the order they are written."""
    details = dataclasses.asdict(analysis)
    hints = _hints(Analysis)
    header = _row(model.Header, details["header"])
    own = {
        f.name: _cell(details[f.name])
        for f in dataclasses.fields(Analysis)
        if f.name != "header" and not _is_table(hints[f.name])
    }
    run = {**header, **own}
    out: dict[str, Table] = {
        "run": (list(run), [run]),
        # what reading left out, by reason (per_file: a JSON cell of [path, count] pairs)
        "run_skipped": (_columns(model.Skipped), [_row(model.Skipped, s) for s in details["header"]["skipped"]]),
        "metrics": (["key", "value"], [{"key": k, "value": v} for k, v in metrics(analysis).items()]),
    }
    steps = step_metrics(analysis)
    out["steps"] = (list(dict.fromkeys(["step", *(k for entry in steps for k in entry)])), steps)
    for f in dataclasses.fields(Analysis):
        hint = _optional(hints[f.name])
        name = "step_windows" if f.name == "steps" else f.name
        value = details[f.name]
        if (kind := _record_list(hint)) is not None:
            out.update(_tables(name, kind, list(value), None))
        elif (kind := _record_map(hint)) is not None:
            rows = [{"key": key, **_row(kind, item)} for key, item in value.items()]
            out[name] = (["key", *_columns(kind)], rows)
        elif f.name != "header" and dataclasses.is_dataclass(hint) and isinstance(hint, type):
            out.update(_tables(name, hint, [value] if value is not None else [], None))
    return out


def _is_table(kind: Any) -> bool:
    hint = _optional(kind)
    return (
        _record_list(hint) is not None
        or _record_map(hint) is not None
        or (dataclasses.is_dataclass(hint) and isinstance(hint, type))
    )


def write_csvs(analysis: Analysis, folder: Path) -> list[Path]:
    """Write every view into ``folder`` (created; its parent must exist); returns the files written."""
    folder.mkdir(exist_ok=True)
    written = []
    for name, (columns, rows) in tables(analysis).items():
        path = folder / f"{name}.csv"
        with open(path, "w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=columns, restval="", extrasaction="raise")
            writer.writeheader()
            writer.writerows(rows)
        written.append(path)
    return written
