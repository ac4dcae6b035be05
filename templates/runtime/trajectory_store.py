"""Appends finished trajectories to size-rotated JSONL files from a background thread."""

# Containment is this package's job: no failure of the tracing's own reaches the training
# loop, and nothing else (a signal handler's exception) is kept from it (see safety.py).

from __future__ import annotations

import collections
import dataclasses
import errno
import json
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from . import files, formats, losses, safety, settings
from .formats import TRAJECTORY_LINE_KEYS, TURN_KEYS
from .safety import raised_by_signal_handler
from .trajectory_types import Turn, _json_default
from .writer import BackgroundWriter, Chunk, deadline_after

_MB = 1024 * 1024

# Dropped from every line: bulky token ids, and fields verl cannot fill.
_DROPPED_TRAJECTORY_FIELDS = frozenset({"initial_prompt_token_ids", "replica_id"})
_DROPPED_TURN_FIELDS = frozenset({"completion_token_ids", "observation_token_ids", "prompt_text", "sglang_rid"})
# A Turn's fields a line keeps (its others are dropped): the format's turn keys
_KEPT_TURN_FIELDS = TURN_KEYS
# Top-level index columns of a line; everything else goes into "raw_message" (the last key).
_INDEX_KEYS = TRAJECTORY_LINE_KEYS[:-1]


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


def _dumps(value) -> str:
    return json.dumps(value, ensure_ascii=False, default=_json_default)


def format_trajectory_line(trajectory) -> str:
    """One JSONL line (without newline): index columns plus the rest as a JSON string."""
    payload = _compact_trajectory(trajectory)
    line = {key: payload.pop(key, None) for key in _INDEX_KEYS}
    line["raw_message"] = _dumps(payload)
    return _dumps(line)


def encode_trajectory_line(trajectory) -> bytes:
    r"""``format_trajectory_line(trajectory) + "\n"`` as the file gets it: UTF-8, lone surrogates backslash-escaped.

    Quoting ``raw_message`` a second time is the costly part of a large line.
    Done on the UTF-8 bytes it is two byte replacements: that JSON text holds
    no control characters (the first dumps escaped them), so its string
    escaping only doubles backslashes and escapes quotes, and in UTF-8 those
    two bytes never occur inside another character. Text that needs the
    surrogate escape takes the plain path.
    """
    payload = _compact_trajectory(trajectory)
    index = [(key, payload.pop(key, None)) for key in _INDEX_KEYS]
    raw_message = _dumps(payload)
    try:
        head = "".join(f'"{key}": {_dumps(value)}, ' for key, value in index).encode("utf-8")
        quoted = raw_message.encode("utf-8").replace(b"\\", b"\\\\").replace(b'"', b'\\"')
    except UnicodeEncodeError as exc:
        if raised_by_signal_handler(exc):
            raise
        line = dict(index, raw_message=raw_message)
        return (_dumps(line) + "\n").encode("utf-8", "backslashreplace")
    return b"".join((b"{", head, b'"raw_message": "', quoted, b'"}\n'))


def _file_stamp(epoch_ms: int) -> str:
    seconds, millis = divmod(epoch_ms, 1000)
    return f"{time.strftime('%Y%m%d_%H%M%S', time.localtime(seconds))}_{millis:03d}"


class _RotatingJsonlOutput:
    """Writes lines to ``trajectory_{instance_id}_{stamp}.jsonl``, starting a new file at the size limit.

    New files are created exclusively; a taken name (same millisecond, or a
    planted file) moves the stamp forward by 1 ms instead of appending to it.
    A line that fails part-way is cut off again, so the file keeps only whole
    lines and the next line goes to the same file; a file left empty is
    removed when the store closes.
    """

    _MAX_NAME_ATTEMPTS = 1000

    def __init__(self, dump_dir: str | None, instance_id: str, max_bytes: int) -> None:
        self.dump_dir = dump_dir
        self.instance_id = instance_id
        self.max_bytes = max_bytes
        self.path: str | None = None
        self._fd: int | None = None
        self._identity: files.FileIdentity = (0, 0)
        self._size = 0
        self._last_stamp_ms = -1

    def write_chunks(self, chunks: list[Chunk]) -> tuple[int, losses.Counts]:
        if self._fd is not None and not files.still_named(self.path, self._identity):
            files.report_moved(str(self.dump_dir))
            self._close(remove_if_empty=False)  # the next line makes the folder again
        written, lost = 0, collections.Counter[str]()
        in_open_file = 0  # lines of this batch in the file still open at its end
        for data, count, _ in chunks:
            try:
                in_open_file = 0 if self._fd is None or self._size >= self.max_bytes else in_open_file
                self._write_line(data)
                written, in_open_file = written + count, in_open_file + count
            except OSError as exc:
                if raised_by_signal_handler(exc):
                    raise
                lost[losses.NOT_REGULAR_FILE if isinstance(exc, files.NotRegularFile) else losses.WRITE_ERROR] += count
                self._recover(exc)
                safety.warn_once(("trajectory-write", self.dump_dir), "tracing: trajectory write failed: %s", exc)
        if in_open_file and self._fd is not None and files.unlinked(self._fd):  # removed while written
            files.report_moved(str(self.dump_dir))
            self._close(remove_if_empty=False)
            written, lost[losses.FOLDER_REMOVED] = written - in_open_file, in_open_file
        return written, dict(lost)

    def _write_line(self, data: bytes) -> None:
        if self._fd is None or self._size >= self.max_bytes:
            self._open_next_file()
        assert self._fd is not None
        files.write_all(self._fd, data)
        self._size += len(data)

    def _recover(self, exc: OSError) -> None:
        """After a failed line: cut its torn part off and keep the file, or give the file up."""
        torn = getattr(exc, "written", 0)
        if self._fd is not None and files.truncate_to(self._fd, self._size, self._size + torn):
            return
        self._close(remove_if_empty=False)

    def _open_next_file(self) -> None:
        self.close()
        if self.dump_dir is None:
            raise OSError(errno.EINVAL, "the trajectory folder is not a usable path")
        os.makedirs(self.dump_dir, exist_ok=True)
        stamp_ms = max(int(settings.clock() * 1000), self._last_stamp_ms + 1)
        for _ in range(self._MAX_NAME_ATTEMPTS):
            path = os.path.join(self.dump_dir, f"trajectory_{self.instance_id}_{_file_stamp(stamp_ms)}.jsonl")
            try:
                self._fd = files.open_fd(path, files.CREATE_NEW_FLAGS)
            except FileExistsError as exc:
                if raised_by_signal_handler(exc):
                    raise
                stamp_ms += 1
                continue
            self.path, self._size, self._last_stamp_ms = path, 0, stamp_ms
            self._identity = files.identity(os.fstat(self._fd))
            return
        raise FileExistsError(f"no free trajectory file name in {self.dump_dir}")

    def close(self) -> None:
        self._close(remove_if_empty=True)

    def _close(self, remove_if_empty: bool) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        files.close_fd(fd)
        if remove_if_empty and self._size == 0 and self.path is not None:
            try:
                os.unlink(self.path)
            except OSError as exc:
                if raised_by_signal_handler(exc):
                    raise

    def forget_inherited(self) -> None:
        """In a forked child: close the inherited descriptor; the parent's file stays as it is."""
        fd, self._fd = self._fd, None
        files.close_fd(fd)


def _text_or_none(path: Any) -> str | None:
    try:
        return settings.path_text(path)
    except Exception as exc:
        if raised_by_signal_handler(exc):
            raise
        return None


def _id_text(instance_id: Any) -> str:
    """The instance id as it appears in file names: one name part, whatever it is."""
    try:
        text = format(instance_id)
    except Exception as exc:
        if raised_by_signal_handler(exc):
            raise
        text = f"{type(instance_id).__name__}-{id(instance_id):x}"
    return files.safe_name(text)


def _size_limit(max_file_size_mb: Any, max_file_size_bytes: Any) -> int:
    try:
        if max_file_size_bytes is not None:
            return max(1, int(max_file_size_bytes))
        return max(1, int(max_file_size_mb * _MB))
    except Exception as exc:
        if raised_by_signal_handler(exc):
            raise
        return 100 * _MB


def _queue_limit(max_queue_bytes: Any) -> int:
    try:
        if max_queue_bytes is not None:
            return max(1, int(max_queue_bytes))
    except Exception as exc:
        if raised_by_signal_handler(exc):
            raise
    return settings.TRAJECTORY_QUEUE_MAX_BYTES


class TrajectoryStore:
    """Appends one JSONL line per trajectory under ``dump_dir``, off the caller's thread.

    Lines are built and encoded in ``write()`` (a snapshot of the trajectory at
    that moment) and queued for one background writer. The queue holds at most
    ``max_queue_bytes`` of encoded lines (default: ``$VERL_TRACE_TRAJECTORY_QUEUE_MB``,
    256 MiB); when it is full, ``write()`` waits up to
    ``TRAJECTORY_QUEUE_WAIT_SECONDS`` for room, then drops the trajectory and
    counts it. Nothing here raises, not even for a garbage folder or id.
    """

    def __init__(
        self,
        dump_dir: Any,
        instance_id: Any,
        max_file_size_mb: Any = 100,
        *,
        max_file_size_bytes: Any = None,
        max_queue_bytes: Any = None,
        max_queue_chars: Any = None,  # older name of max_queue_bytes
    ) -> None:
        self.dump_dir = dump_dir
        self.instance_id = instance_id
        self.max_file_size_bytes = _size_limit(max_file_size_mb, max_file_size_bytes)
        folder = _text_or_none(dump_dir)
        self._output = _RotatingJsonlOutput(folder, _id_text(instance_id), self.max_file_size_bytes)
        self._writer = BackgroundWriter(
            "trajectory",
            "trajectory",
            "trajectory",
            self._output,
            _queue_limit(max_queue_bytes if max_queue_bytes is not None else max_queue_chars),
            settings.TRAJECTORY_QUEUE_WAIT_SECONDS,
        )
        self._prepare_dump_dir(folder)

    @staticmethod
    def _prepare_dump_dir(folder: str | None) -> None:
        if folder is None:
            safety.warn_once("trajectory-dir", "tracing: TrajectoryStore got a folder that is not a path")
            return
        try:
            os.makedirs(folder, exist_ok=True)
        except Exception as exc:
            if raised_by_signal_handler(exc):
                raise
            safety.warn_once(("trajectory-dir", folder), "tracing: cannot create %s: %s", folder, exc)
            return
        files.publish_discovery(files.TRAJECTORY_DISCOVERY_FILE, folder)

    @property
    def current_file(self) -> str | None:
        """Path of the file being appended to (None before the first line is written)."""
        return self._output.path

    def write(self, trajectory: Any) -> None:
        """Queue ``trajectory`` (a Trajectory or an equivalent dict) for writing."""
        if not safety.enter():
            self._writer.count_drop(formats.LOST_REENTRANT, report=False)
            return
        try:
            try:
                data = encode_trajectory_line(trajectory)
            except Exception as exc:
                if raised_by_signal_handler(exc):
                    raise
                self._writer.count_drop(formats.LOST_UNSERIALIZABLE)
                safety.warn_once("trajectory-serialize", "tracing: trajectory dropped, cannot serialize: %s", exc)
                return
            self._writer.submit((data, 1, None))
        except Exception as exc:
            if raised_by_signal_handler(exc):
                raise
            safety.warn_once("trajectory-submit", "tracing: trajectory dropped", exc_info=True)
        finally:
            safety.leave()

    def flush(self, timeout: float | None = 5.0) -> bool:
        """Wait up to ``timeout`` seconds for queued lines to be written."""
        return self._guarded(lambda: self._writer.flush(deadline_after(timeout)))

    def close(self, timeout: float | None = 5.0) -> bool:
        """Write what is queued (waiting at most ``timeout`` seconds) and close the file."""
        return self._guarded(lambda: self._writer.close(deadline_after(timeout)))

    @staticmethod
    def _guarded(operation: Callable[[], bool]) -> bool:
        if not safety.enter():
            return False
        try:
            return operation()
        except Exception as exc:
            if raised_by_signal_handler(exc):
                raise
            return False
        finally:
            safety.leave()
