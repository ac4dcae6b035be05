"""Appends finished trajectories to size-rotated JSONL files from a background thread."""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Mapping

from . import trace as _trace
from .trajectory_types import Turn, _json_default

_MB = 1024 * 1024

# Dropped from every line: bulky token ids, and fields verl cannot fill.
_DROPPED_TRAJECTORY_FIELDS = frozenset({"initial_prompt_token_ids", "replica_id"})
_DROPPED_TURN_FIELDS = frozenset({"completion_token_ids", "observation_token_ids", "prompt_text", "sglang_rid"})
_KEPT_TURN_FIELDS = tuple(f.name for f in dataclasses.fields(Turn) if f.name not in _DROPPED_TURN_FIELDS)
# Top-level index columns of a line; everything else goes into "raw_message".
_INDEX_KEYS = ("prompt_uid", "sample_index")


def _field_items(record):
    """(name, value) pairs of a dataclass instance or a mapping, in field order."""
    if dataclasses.is_dataclass(record) and not isinstance(record, type):
        return [(f.name, getattr(record, f.name)) for f in dataclasses.fields(record)]
    if isinstance(record, Mapping):
        return list(record.items())
    raise TypeError(f"cannot serialize a {type(record).__name__} as a trajectory")


def _compact_turn(turn):
    if isinstance(turn, Turn):
        compact = {name: getattr(turn, name) for name in _KEPT_TURN_FIELDS}
    elif isinstance(turn, Mapping):
        compact = {key: value for key, value in turn.items() if key not in _DROPPED_TURN_FIELDS}
    else:
        return turn
    if compact.get("turn_total_time_ms") is None:
        compact["turn_total_time_ms"] = (compact.get("completion_time_ms") or 0.0) + (
            compact.get("observation_time_ms") or 0.0
        )
    return compact


def _compact_trajectory(trajectory) -> dict:
    compact = {}
    for name, value in _field_items(trajectory):
        if name in _DROPPED_TRAJECTORY_FIELDS:
            continue
        compact[name] = [_compact_turn(turn) for turn in value] if name == "turns" and value else value
    return compact


def format_trajectory_line(trajectory) -> str:
    """One JSONL line (without newline): index columns plus the rest as a JSON string."""
    payload = _compact_trajectory(trajectory)
    line = {key: payload.pop(key, None) for key in _INDEX_KEYS}
    line["raw_message"] = json.dumps(payload, ensure_ascii=False, default=_json_default)
    return json.dumps(line, ensure_ascii=False, default=_json_default)


def _file_stamp(epoch_ms: int) -> str:
    seconds, millis = divmod(epoch_ms, 1000)
    return f"{time.strftime('%Y%m%d_%H%M%S', time.localtime(seconds))}_{millis:03d}"


class _RotatingJsonlOutput:
    """Writes lines to ``trajectory_{instance_id}_{stamp}.jsonl``, starting a new file at the size limit.

    New files are created exclusively; a taken name (same millisecond, or a
    planted file) moves the stamp forward by 1 ms instead of appending to it.
    """

    _MAX_NAME_ATTEMPTS = 1000
    _CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)

    def __init__(self, dump_dir, instance_id, max_bytes):
        self.dump_dir = dump_dir
        self.instance_id = instance_id
        self.max_bytes = max_bytes
        self.path = None
        self._fd = None
        self._size = 0
        self._last_stamp_ms = -1

    def write_chunks(self, chunks):
        failed = 0
        for text, n_records in chunks:
            try:
                self._write_line(text.encode("utf-8", "backslashreplace"))
            except OSError as exc:
                failed += n_records
                self.close()  # next line starts a fresh file
                _trace._warn_once(("trajectory-write", self.dump_dir), "tracing: trajectory write failed: %s", exc)
        return failed

    def _write_line(self, data):
        if self._fd is None or self._size >= self.max_bytes:
            self._open_next_file()
        _trace._write_all(self._fd, data)
        self._size += len(data)

    def _open_next_file(self):
        self.close()
        os.makedirs(self.dump_dir, exist_ok=True)
        stamp_ms = max(int(_trace._clock() * 1000), self._last_stamp_ms + 1)
        for _ in range(self._MAX_NAME_ATTEMPTS):
            path = os.path.join(self.dump_dir, f"trajectory_{self.instance_id}_{_file_stamp(stamp_ms)}.jsonl")
            try:
                self._fd = os.open(path, self._CREATE_FLAGS, 0o644)
            except FileExistsError:
                stamp_ms += 1
                continue
            self.path, self._size, self._last_stamp_ms = path, 0, stamp_ms
            return
        raise FileExistsError(f"no free trajectory file name in {self.dump_dir}")

    def close(self):
        fd, self._fd = self._fd, None
        _trace._close_fd(fd)

    forget_inherited = close


class TrajectoryStore:
    """Appends one JSONL line per trajectory under ``dump_dir``, off the caller's thread.

    Lines are built in ``write()`` (a snapshot of the trajectory at that moment)
    and queued for one background writer; when the bounded queue is full the
    trajectory is dropped and counted in the exit report. Nothing here raises.
    """

    DEFAULT_MAX_QUEUE_CHARS = 64 * _MB

    def __init__(self, dump_dir, instance_id, max_file_size_mb=100, *, max_file_size_bytes=None,
                 max_queue_chars=DEFAULT_MAX_QUEUE_CHARS):
        self.dump_dir = dump_dir
        self.instance_id = instance_id
        self.max_file_size_bytes = self._size_limit(max_file_size_mb, max_file_size_bytes)
        self._output = _RotatingJsonlOutput(dump_dir, instance_id, self.max_file_size_bytes)
        self._writer = _trace._BackgroundWriter("trajectory", "trajectory", self._output, max_queue_chars)
        self._prepare_dump_dir()

    @staticmethod
    def _size_limit(max_file_size_mb, max_file_size_bytes):
        try:
            if max_file_size_bytes is not None:
                return max(1, int(max_file_size_bytes))
            return max(1, int(max_file_size_mb * _MB))
        except (TypeError, ValueError):
            return 100 * _MB

    def _prepare_dump_dir(self):
        try:
            os.makedirs(self.dump_dir, exist_ok=True)
        except Exception as exc:
            _trace._warn_once(("trajectory-dir", str(self.dump_dir)), "tracing: cannot create %s: %s",
                              self.dump_dir, exc)
            return
        _trace._publish_discovery(_trace.TRAJECTORY_DISCOVERY_FILE, self.dump_dir)

    @property
    def current_file(self):
        """Path of the file being appended to (None before the first line is written)."""
        return self._output.path

    def write(self, trajectory):
        """Queue ``trajectory`` (a Trajectory or an equivalent dict) for writing."""
        try:
            line = format_trajectory_line(trajectory)
        except Exception as exc:
            self._writer.count_drop("unserializable")
            _trace._warn_once("trajectory-serialize", "tracing: trajectory dropped, cannot serialize: %s", exc)
            return
        try:
            self._writer.submit(line + "\n", 1)
        except Exception:
            _trace._warn_once("trajectory-submit", "tracing: trajectory dropped", exc_info=True)

    def flush(self, timeout=5.0):
        """Wait up to ``timeout`` seconds for queued lines to be written."""
        try:
            return self._writer.flush(_trace._deadline_after(timeout))
        except Exception:
            return False

    def close(self, timeout=5.0):
        """Write what is queued (waiting at most ``timeout`` seconds) and close the file."""
        try:
            return self._writer.close(_trace._deadline_after(timeout))
        except Exception:
            return False
