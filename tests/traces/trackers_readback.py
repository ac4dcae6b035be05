"""Reading the runs `export --to` wrote back, with each tracker's own reader (never a mock):
TensorBoard's EventAccumulator, MlflowClient, and W&B's own record schema.

W&B: wandb 0.31 no longer ships a reader of its run files (``wandb.sdk.internal.datastore`` went
with the legacy ``wandb sync``); the file is LevelDB's log format behind a 7-byte W&B header, a
framing of a few lines read here, and each record is parsed with wandb's own protocol buffers
(``wandb.proto.wandb_internal_pb2.Record``)."""

from __future__ import annotations

import json
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest


def require(module: str, extra: str) -> None:
    """Fail (never skip) with the install command when a tracker's library is missing."""
    try:
        __import__(module)
    except ImportError:
        pytest.fail(f"{module} is needed for this test: pip install -e '.[test,{extra}]'", pytrace=False)


@dataclass
class Run:
    """What a tracker holds of one run: each name's points (step, value) in order, and the summary."""

    points: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    summary: dict[str, float] = field(default_factory=dict)


def tensorboard_run(folder: Path) -> Run:
    """Every scalar of the event files in ``folder`` (tensors of the scalars plugin, and simple values)."""
    require("tensorboard", "trackers-test")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.util import tensor_util

    run = Run()
    for events in sorted(folder.glob("events.out.tfevents.*")):
        accumulator = EventAccumulator(str(events), size_guidance={"tensors": 0, "scalars": 0})
        accumulator.Reload()
        for tag in accumulator.Tags()["tensors"]:
            assert accumulator.SummaryMetadata(tag).plugin_data.plugin_name == "scalars", tag
            run.points.setdefault(tag, []).extend(
                (e.step, tensor_util.make_ndarray(e.tensor_proto).item()) for e in accumulator.Tensors(tag)
            )
        for tag in accumulator.Tags()["scalars"]:
            run.points.setdefault(tag, []).extend((e.step, e.value) for e in accumulator.Scalars(tag))
    return run


def mlflow_run(uri: str, run_id: str) -> Run:
    """Every metric's history in the run (MlflowClient on the store)."""
    require("mlflow", "trackers-test")
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    run = Run()
    for key in client.get_run(run_id).data.metrics:
        history = sorted(client.get_metric_history(run_id, key), key=lambda m: (m.step, m.timestamp))
        run.points[key] = [(m.step, m.value) for m in history]
    return run


BLOCK = 32768  # LevelDB's log blocks
HEADER = struct.Struct("<4sHB")  # ":W&B", magic, version
RECORD = struct.Struct("<IHB")  # checksum, length, type (1 full, 2 first, 3 middle, 4 last)


def wandb_records(path: Path) -> list[bytes]:
    """The records of a W&B run file (``run-ID.wandb``), whole (fragments joined)."""
    data = path.read_bytes()
    ident, _magic, _version = HEADER.unpack_from(data)
    assert ident == b":W&B", path
    records, pending, offset = [], b"", HEADER.size
    while offset + RECORD.size <= len(data):
        left = BLOCK - offset % BLOCK
        if left < RECORD.size:  # the block's tail is padding
            offset += left
            continue
        _checksum, length, kind = RECORD.unpack_from(data, offset)
        if kind == 0:  # zeros: the rest of the block is padding (a writer may pad a 7-byte tail too)
            offset += left
            continue
        body = data[offset + RECORD.size : offset + RECORD.size + length]
        offset += RECORD.size + length
        pending = body if kind in (1, 2) else pending + body
        if kind in (1, 4):
            records.append(pending)
            pending = b""
    return records


@dataclass
class WandbRun(Run):
    """A W&B run's history rows, summary, id and metric definitions (name -> its step metric)."""

    run_id: str = ""
    rows: list[dict[str, float]] = field(default_factory=list)
    step_metrics: dict[str, str] = field(default_factory=dict)


def _parsed(path: Path, timeout: float) -> list:
    """The records of a run file once its ``exit`` record is written: W&B's service process writes
    the file's last block after ``finish()`` has returned (seen in a process's second run)."""
    from wandb.proto import wandb_internal_pb2

    deadline = time.monotonic() + timeout
    while True:
        records = []
        for raw in wandb_records(path):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(raw)
            records.append(record)
        if any(r.WhichOneof("record_type") == "exit" for r in records) or time.monotonic() > deadline:
            return records
        time.sleep(0.1)


def wandb_run(folder: Path, timeout: float = 60) -> WandbRun:
    """The one run written under ``folder`` (``folder/wandb/offline-run-*/run-*.wandb``)."""
    require("wandb", "trackers-test")
    (path,) = folder.glob("wandb/offline-run-*/run-*.wandb")
    run = WandbRun()
    records = _parsed(path, timeout)
    assert records[-1].WhichOneof("record_type") == "exit", f"{path} has no exit record after {timeout} s"
    for record in records:
        kind = record.WhichOneof("record_type")
        if kind == "run":
            run.run_id = record.run.run_id
        elif kind == "metric":
            if record.metric.step_metric:
                run.step_metrics[record.metric.name or record.metric.glob_name] = record.metric.step_metric
        elif kind == "history":
            row = {_key(item): json.loads(item.value_json) for item in record.history.item}
            run.rows.append(row)
        elif kind == "summary":
            run.summary.update({_key(item): json.loads(item.value_json) for item in record.summary.update})
    return run


def _key(item) -> str:
    return item.key or "/".join(item.nested_key)
