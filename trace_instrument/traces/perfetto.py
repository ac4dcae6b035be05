"""``export --perfetto``: a Chrome trace-event JSON timeline that ui.perfetto.dev opens.

One process per host-pid; one async track per trajectory (its stages as nested slices,
on the process that ran its agent loop); the trainer's step windows as slices on tracks
of their own; weight syncs as instants; a counter of trajectories in flight. Timestamps
are microseconds. A uniform sample of trajectories plus the slowest tail keeps the file
under about a million events by default.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from trace_instrument.traces.backend import Backend
from trace_instrument.traces.events import Event, short_name
from trace_instrument.traces.model import Skipped, SourceFile
from trace_instrument.traces.options import DEFAULT_OPTIONS, Options
from trace_instrument.traces.runs import select_run
from trace_instrument.traces.store import open_engine
from trace_instrument.traces.views import prepare_export, selected_steps

EVENT_BUDGET = 1_000_000
SLOWEST_SHARE = 0.1
TRAINER_PID = 1  # the step windows' process when no trainer rows name one; host-pids get 1000 + file_id
IN_FLIGHT_BUCKETS = 2000


@dataclass(frozen=True)
class PerfettoSummary:
    events: int
    trajectories: int
    trajectories_total: int
    processes: int
    left_out: tuple[Skipped, ...] = ()  # inputs given to no run, progress lines of several runs


def export_perfetto(
    roots: list[Path], target: Path, options: Options = DEFAULT_OPTIONS, max_trajectories: int | None = None
) -> PerfettoSummary:
    """Write the timeline of the run under ``roots`` to ``target`` (gzip when it ends in .gz)."""
    with open_engine([Path(r) for r in roots], options) as (backend, inputs, report, _cached):
        selection = select_run(backend, inputs, options.run)
        inputs = selection.inputs
        backend.select_steps(options.steps)
        files = {f.file_id: f for f in inputs.files}
        progress, left_out = prepare_export(backend, selection, report)
        total, rows = backend.rows("trajectory_count")[0]
        limit = _trajectory_limit(int(total), int(rows), max_trajectories)
        slowest = min(limit, max(1, int(limit * SLOWEST_SHARE))) if limit else 0
        backend.script("perfetto_selection", slowest=slowest, uniform=max(0, limit - slowest))
        opener = gzip.open if target.name.endswith(".gz") else open
        with opener(target, "wt", encoding="utf-8") as out:
            writer = _EventWriter(out)
            selected = writer.trajectories(backend, files)
            writer.trainer(backend, progress.info, options)
            writer.finish(files)
        return PerfettoSummary(writer.count, selected, int(total), len(writer.pids), left_out)


def _trajectory_limit(total: int, rows: int, requested: int | None) -> int:
    if requested is not None:
        return max(0, min(total, requested))
    per_trajectory = 2 * (rows / total) + 2 if total else 1
    return min(total, int(EVENT_BUDGET * 0.9 / per_trajectory))


def _pid(file_id: int) -> int:
    return 1000 + int(file_id)


def _segment_name(prev_code: int, code: int, param: str | None) -> str:
    if code == Event.GENERATE_RESPONSE_RECEIVED:
        return "generate"
    if code == Event.TOOL_EXECUTED:
        return f"tool {param}"
    if code == Event.GENERATE_REQUEST_SENT and prev_code == Event.TOOL_EXECUTED:
        return "next turn"
    return f"{short_name(prev_code)} -> {short_name(code)}"


class _EventWriter:
    """Streams trace events as one JSON object ``{"traceEvents": [...]}``."""

    def __init__(self, out: IO[str]) -> None:
        self.out = out
        self.count = 0
        self.pids: set[int] = set()
        out.write('{"displayTimeUnit": "ms", "traceEvents": [\n')

    def emit(self, event: dict[str, Any]) -> None:
        self.out.write((",\n" if self.count else "") + json.dumps(event, separators=(",", ":")))
        self.count += 1
        self.pids.add(int(event["pid"]))

    def trajectories(self, backend: Backend, files: dict[int, SourceFile]) -> int:
        n = 0
        for track_id, group in enumerate(_grouped(backend.rows("perfetto_rows")), 1):
            self._trajectory(track_id, group)
            n += 1
        return n

    def _trajectory(self, track_id: int, rows: list[tuple[Any, ...]]) -> None:
        sample_id = str(rows[0][0])
        worker = next((r[3] for r in rows if 5 <= int(r[1]) <= 10), rows[0][3])
        pid = _pid(int(worker))
        times = []
        latest = 0
        for row in rows:  # a later stage never starts before an earlier one on the timeline (clock skew)
            latest = max(latest, int(row[2]))
            times.append(latest * 1000)
        base = {"cat": "trajectory", "id": track_id, "pid": pid, "tid": 0}
        self.emit({**base, "ph": "b", "name": sample_id, "ts": times[0], "args": {"sample_id": sample_id}})
        for i in range(1, len(rows)):
            prev, cur = rows[i - 1], rows[i]
            name = _segment_name(int(prev[1]), int(cur[1]), cur[4])
            args = {"ms": int(cur[2]) - int(prev[2])}
            self.emit({**base, "ph": "b", "name": name, "ts": times[i - 1], "args": args})
            self.emit({**base, "ph": "e", "name": name, "ts": times[i]})
        self.emit({**base, "ph": "e", "name": sample_id, "ts": times[-1]})

    def trainer(self, backend: Backend, progress: Any, options: Options) -> None:
        trainer = backend.rows("trainer_file")
        pid = _pid(int(trainer[0][0])) if trainer else TRAINER_PID  # the trainer's own host-pid process
        for tid, name in ((1, "rollout windows"), (2, "train windows"), (3, "weight syncs")):
            self.emit({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}})
        for window in selected_steps(backend, progress, options.steps):
            for tid, label, start, end in (
                (1, "rollout", window.rollout_start_ms, window.rollout_end_ms),
                (2, "train", window.train_start_ms, window.train_end_ms),
            ):
                if start is not None and end is not None:
                    self.emit(
                        {
                            "ph": "X",
                            "cat": "step",
                            "name": f"step {window.step} {label}",
                            "pid": pid,
                            "tid": tid,
                            "ts": start * 1000,
                            "dur": max(0, end - start) * 1000,
                            "args": {"step": window.step, "ms": end - start},
                        }
                    )
        for ts, step, _file_id in backend.rows("perfetto_syncs"):
            self.emit(
                {
                    "ph": "i",
                    "s": "p",
                    "cat": "sync",
                    "name": f"weights synced (step {step})",
                    "pid": pid,
                    "tid": 3,
                    "ts": int(ts) * 1000,
                }
            )
        for ts, n in backend.rows("perfetto_in_flight", buckets=IN_FLIGHT_BUCKETS):
            self.emit(
                {
                    "ph": "C",
                    "name": "trajectories in flight",
                    "pid": pid,
                    "ts": int(ts) * 1000,
                    "args": {"in flight": int(n)},
                }
            )

    def finish(self, files: dict[int, SourceFile]) -> None:
        for pid in sorted(self.pids):
            if pid == TRAINER_PID:
                name = "run (trainer windows)"
            else:
                source = files.get(pid - 1000)
                name = f"{source.host}-pid{source.pid}" if source and source.host else f"process {pid}"
            self.emit({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}})
        self.out.write("\n]}\n")


def _grouped(rows: list[tuple[Any, ...]]) -> Iterator[list[tuple[Any, ...]]]:
    group: list[tuple[Any, ...]] = []
    for row in rows:
        if group and row[0] != group[0][0]:
            yield group
            group = []
        group.append(row)
    if group:
        yield group
