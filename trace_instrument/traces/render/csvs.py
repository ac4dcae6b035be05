"""``analyze --csv DIR``: every view as a CSV file of plain values (numbers stay numbers).

``steps.csv`` holds the per-step keys of the JSON document (verl's names, one row per step),
``metrics.csv`` its run-level keys (``key,value``), ``run.csv`` the header; every other view of
``details`` is a file of its own, named after its JSON key (the step windows: ``step_windows``). A record's nested object becomes
columns joined with ``/`` (``turns/mean``); a list of objects inside one record becomes a file of
its own (``rollouts_stop_reasons.csv``), and a list of plain values one JSON cell.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from trace_instrument.traces.model import Analysis
from trace_instrument.traces.render.metrics import metrics, step_metrics

Table = list[dict[str, Any]]


def tables(analysis: Analysis) -> dict[str, Table]:
    """The CSV files' rows by file name (without ``.csv``), in the order they are written."""
    details = asdict(analysis)
    out: dict[str, Table] = {
        "run": [_flat(details.pop("header"))],
        "metrics": [{"key": key, "value": value} for key, value in metrics(analysis).items()],
        "steps": step_metrics(analysis),
    }
    for name, value in details.items():
        # the step windows as the model holds them; steps.csv is the per-step keys above
        for table, rows in _tables("step_windows" if name == "steps" else name, value):
            out.setdefault(table, rows)
    return out


def _tables(name: str, value: Any) -> Iterator[tuple[str, Table]]:
    """The tables one JSON value makes: a list of objects is one; an object is a one-row table and
    the tables of its lists of objects."""
    if isinstance(value, dict):
        yield name, [_flat(value)]
        for key, item in value.items():
            if _is_records(item):
                yield from _tables(f"{name}_{key}", item)
    elif _is_records(value):
        yield name, [_flat(item) for item in value]
        for key in value[0] if value else ():
            nested = [row for item in value if _is_records(item.get(key)) for row in _tagged(item, key)]
            if nested:
                yield f"{name}_{key}", nested


def _tagged(item: dict[str, Any], key: str) -> Iterator[dict[str, Any]]:
    """The rows of ``item[key]``, each led by the item's first field (its step, its id)."""
    first = next(iter(item))
    for row in item[key]:
        yield {first: item[first], **_flat(row)}


def _is_records(value: Any) -> bool:
    # dataclasses.asdict keeps tuples as tuples
    return isinstance(value, (list, tuple)) and all(isinstance(item, dict) for item in value)


def _flat(record: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """One CSV row: nested objects as ``a/b`` columns; lists of objects are left to their own table."""
    row: dict[str, Any] = {}
    for key, value in record.items():
        column = f"{prefix}{key}"
        if isinstance(value, dict):
            row.update(_flat(value, f"{column}/"))
        elif isinstance(value, (list, tuple)):
            if value and _is_records(value):
                continue
            row[column] = json.dumps(value)
        else:
            row[column] = value
    return row


def write_csvs(analysis: Analysis, folder: Path) -> list[Path]:
    """Write every view into ``folder`` (created; its parent must exist); returns the files written."""
    folder.mkdir(exist_ok=True)
    written = []
    for name, rows in tables(analysis).items():
        path = folder / f"{name}.csv"
        columns = list(dict.fromkeys(column for row in rows for column in row))
        with open(path, "w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=columns, restval="")
            writer.writeheader()
            writer.writerows(rows)
        written.append(path)
    return written
