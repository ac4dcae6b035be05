"""Sample-flow events: one stdout line and one CSV row per sample and pipeline stage.

``trace_flow(uid, traj_uid, from_module, to_module, stage, detail, global_step)``
writes, for each sample of the call:

- on stdout: ``[FLOW_TRACE] {time} | uid=U | traj_uid=T | from=A | to=B | stage=S``
  then `` | global_step=N`` unless the step is -1 and `` | detail=D`` if the detail is truthy;
- to ``{trace_dir}/sample/{hostname}-pid{pid}.csv`` (no header): ``job_id,cat,
  sample_id,sample_status,timestamp,content``, quoted as csv.writer's default
  dialect quotes, with ``sample_id`` ``{uid}/{traj_uid}`` when traj_uid is all
  digits else ``{uid}/sample``, status ``COMPLETE`` for TRAIN_UPDATE and
  FILTER_TRAJECTORIES else ``RUNNING``, the timestamp in milliseconds and the
  content ``from=A|to=B|stage=S[|global_step=N][|detail=D]``.

A call formats its whole batch at once: one stdout write, one encoded chunk for
the background writer. No failure of the tracing's own raises from here; a row
that cannot be formatted or written is counted as lost.
"""

# Containment is this package's job: no failure of the tracing's own reaches the training
# loop, and nothing else (a signal handler's exception) is kept from it (see safety.py).

from __future__ import annotations

import contextvars
import logging
import os
import socket
import time
from collections.abc import Sequence
from typing import Any

from . import files, formats, losses, process, safety, settings, streams
from .formats import COMPLETE_STAGES, STATUS_COMPLETE, STATUS_RUNNING
from .settings import get_trace_dir, set_trace_dir
from .writer import BackgroundWriter, Chunk

__all__ = ["get_trace_dir", "set_trace_dir", "suppress_sample_trace", "trace_flow"]

logger = logging.getLogger(__name__)

_COMPLETE_STAGES = frozenset(COMPLETE_STAGES)
_FACILITY = "sample_flow"

# ---------------------------------------------------------------------------
# Suppression (validation samples)
# ---------------------------------------------------------------------------

_suppressed = contextvars.ContextVar("verl_trace_suppress_samples", default=False)


def suppress_sample_trace(flag: object = True) -> None:
    """Silence (flag=True) or restore trace_flow() for the current task/thread context.

    asyncio tasks copy the context when created, so calling this at the start of
    a validation sample's task silences every trace_flow() made on its behalf.
    """
    try:
        _suppressed.set(bool(flag))
    except Exception as exc:
        if safety.raised_by_signal_handler(exc):
            raise
        safety.warn_once("suppress_sample_trace", "tracing: suppress_sample_trace() ignored a flag with no truth value")


# ---------------------------------------------------------------------------
# The CSV file
# ---------------------------------------------------------------------------


def _csv_row_ends(data: bytes, limit: int, head_len: int, tail_len: int) -> tuple[int, int]:
    """(complete rows, their bytes) among the first ``limit`` bytes of rows ``head + sample_id + tail``.

    ``sample_id`` is the only field that varies within a chunk; unquoted it
    holds no comma, quoted it ends at a quote not followed by another.
    """
    rows = position = 0
    while True:
        start = position + head_len
        if data[start : start + 1] == b'"':
            end = start + 1
            while True:
                quote = data.find(b'"', end)
                if quote < 0:
                    return rows, position
                if data[quote + 1 : quote + 2] != b'"':
                    end = quote + 1
                    break
                end = quote + 2
        else:
            end = data.find(b",", start)
            if end < 0:
                return rows, position
        row_end = end + tail_len
        if row_end > limit:
            return rows, position
        rows, position = rows + 1, row_end


def _complete_records(chunks: list[Chunk], written: int) -> tuple[int, int]:
    """(rows, bytes) of ``chunks`` that lie wholly within the first ``written`` bytes."""
    records = kept = 0
    for data, count, layout in chunks:
        if written - kept >= len(data):
            records, kept = records + count, kept + len(data)
            continue
        rows, row_bytes = _csv_row_ends(data, written - kept, *layout)
        return records + rows, kept + row_bytes
    return records, kept


class _SampleCsvOutput:
    """Appends rows to ``{trace_dir}/sample/{hostname}-pid{pid}.csv``.

    The path is resolved when the file is opened, so a forked child gets a
    file named after its own pid. A failed write closes the file (the next batch
    starts from scratch: folder, file, discovery file). A write that stopped
    mid-row is cut back to the last whole row, so the next batch never glues
    onto a torn one; if it cannot be cut, the next batch starts on a fresh line.
    """

    def __init__(self, trace_dir: str) -> None:
        self.trace_dir = trace_dir
        self.path: str | None = None
        self._fd: int | None = None
        self._identity: files.FileIdentity = (0, 0)
        self._size = 0
        self._torn = False
        self._announced = False

    def write_chunks(self, chunks: list[Chunk]) -> tuple[int, losses.Counts]:
        records = sum(chunk[1] for chunk in chunks)
        data = chunks[0][0] if len(chunks) == 1 else b"".join(chunk[0] for chunk in chunks)
        if self._fd is not None and not files.still_named(self.path, self._identity):
            files.report_moved(self.trace_dir)
            self.close()  # the folder was removed or replaced: the next open makes it again
            self._torn = False  # a torn row in the old file is no concern of the new one
        try:
            fd = self._fd if self._fd is not None else self._open()
            if self._torn:
                files.write_all(fd, b"\r\n")
                self._size, self._torn = self._size + 2, False
            files.write_all(fd, data)
        except files.WriteError as exc:
            kept = self._cut_back(chunks, exc) if self._fd is not None and not self._torn else 0
            return self._failed(exc, kept, records)
        except OSError as exc:
            return self._failed(exc, 0, records)
        self._size += len(data)
        if files.unlinked(fd):  # removed while this batch was written: nobody will read it
            files.report_moved(self.trace_dir)
            self.close()
            return 0, {losses.FOLDER_REMOVED: records}
        return records, {}

    def _cut_back(self, chunks: list[Chunk], exc: files.WriteError) -> int:
        """Remove the torn row a partial write left; the whole rows written, kept."""
        rows, row_bytes = _complete_records(chunks, exc.written)
        assert self._fd is not None
        if not files.truncate_to(self._fd, self._size + row_bytes, self._size + exc.written):
            self._torn = exc.written > row_bytes
        return rows

    def _failed(self, exc: OSError, kept: int, records: int) -> tuple[int, losses.Counts]:
        self.close()
        safety.warn_once(("sample-write", self.trace_dir), "tracing: cannot write sample-flow rows: %s", exc)
        reason = losses.NOT_REGULAR_FILE if isinstance(exc, files.NotRegularFile) else losses.WRITE_ERROR
        return kept, {reason: records - kept} if records > kept else {}

    def _open(self) -> int:
        sample_dir = os.path.join(self.trace_dir, "sample")
        os.makedirs(sample_dir, exist_ok=True)
        self.path = os.path.join(sample_dir, f"{files.safe_name(socket.gethostname())}-pid{os.getpid()}.csv")
        fd = files.open_fd(self.path)
        info = os.fstat(fd)
        self._fd, self._size, self._identity = fd, info.st_size, files.identity(info)
        if not self._announced:
            self._announced = files.publish_discovery(files.SAMPLE_DISCOVERY_FILE, sample_dir)
        return fd

    def close(self) -> None:
        fd, self._fd = self._fd, None
        files.close_fd(fd)

    def forget_inherited(self) -> None:
        """In a forked child: close the inherited descriptor (a raw fd: nothing to flush)."""
        self.close()
        self._torn = False  # the child writes a file of its own


_sample_sink: tuple[str, BackgroundWriter] | None = None  # the writer of the current trace dir
_sample_sink_lock = safety.lock()


def _sample_writer_for(trace_dir: str) -> BackgroundWriter | None:
    """The CSV writer for ``trace_dir``; a writer for an older dir is retired."""
    global _sample_sink
    sink = _sample_sink
    if sink is not None and sink[0] == trace_dir:
        return sink[1]
    if not _sample_sink_lock.acquire(timeout=settings.LOCK_TIMEOUT_SECONDS):
        return None
    try:
        sink = _sample_sink
        if sink is None or sink[0] != trace_dir:
            if sink is not None:
                sink[1].retire()
            output = _SampleCsvOutput(trace_dir)
            writer = BackgroundWriter("sample-flow", _FACILITY, "row", output, settings.SAMPLE_QUEUE_MAX_BYTES)
            sink = _sample_sink = (trace_dir, writer)
        return sink[1]
    finally:
        _sample_sink_lock.release()


def _reset_in_child() -> None:
    global _sample_sink_lock
    _sample_sink_lock = safety.lock()


process.on_new_process(_reset_in_child)

# ---------------------------------------------------------------------------
# Formatting
# ---------------------------------------------------------------------------

# numpy dtype kinds whose .tolist() elements format exactly like the numpy
# scalars do (floats are excluded: float32 would print more digits).
_EXACT_TOLIST_KINDS = frozenset("OUSiub")


def _as_id_list(value: Any) -> Sequence[Any]:
    """A string, sequence or 1-D array as a sequence of ids; anything else is one id."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)):
        return value
    dtype_kind = getattr(getattr(value, "dtype", None), "kind", None)
    if getattr(value, "ndim", None) == 1 and dtype_kind in _EXACT_TOLIST_KINDS:
        return value.tolist()  # type: ignore[no-any-return]
    if isinstance(value, (bytes, bytearray)) or not hasattr(value, "__len__"):
        return [value]
    try:
        return list(value)
    except TypeError as exc:  # e.g. a 0-d numpy array
        if safety.raised_by_signal_handler(exc):
            raise
        return [value]


def _paired_length(n_uid: int, n_traj: int) -> int:
    """How many samples a call with these id counts records (see ``_paired_ids``)."""
    if n_uid == 0 or n_traj == 0:
        return 0
    if n_uid == 1 or n_traj == 1:
        return max(n_uid, n_traj)
    return min(n_uid, n_traj)


def _paired_ids(uid: Any, traj_uid: Any, stage: Any) -> tuple[Sequence[Any], Sequence[Any]]:
    """Broadcast a length-1 side to the other's length; zip-truncate otherwise.

    A side with no ids means no samples: nothing is recorded (one id broadcast over
    an empty batch, such as a placeholder uid next to no traj_uids, is no row at all).
    """
    uids, traj_uids = _as_id_list(uid), _as_id_list(traj_uid)
    n_uid, n_traj = len(uids), len(traj_uids)
    if n_uid == 0 or n_traj == 0:
        return [], []
    if n_uid == 1 and n_traj > 1:
        return list(uids) * n_traj, traj_uids
    if n_traj == 1 and n_uid > 1:
        return uids, list(traj_uids) * n_uid
    if n_uid != n_traj:
        n = _paired_length(n_uid, n_traj)
        logger.warning(
            "trace_flow: %d uid(s) vs %d traj_uid(s) at stage %s; neither side has length 1, "
            "so only the first %d pair(s) are recorded",
            n_uid,
            n_traj,
            stage,
            n,
        )
        return uids[:n], traj_uids[:n]
    return uids, traj_uids


def _is_truthy(value: object) -> bool:
    try:
        return bool(value)
    except Exception as exc:
        if safety.raised_by_signal_handler(exc):
            raise
        return True


def _is_unset_step(global_step: object) -> bool:
    try:
        return bool(global_step == -1)
    except Exception as exc:
        if safety.raised_by_signal_handler(exc):
            raise
        return False


def _sample_status(stage: object) -> str:
    try:
        return STATUS_COMPLETE if stage in _COMPLETE_STAGES else STATUS_RUNNING
    except TypeError as exc:  # unhashable stage
        if safety.raised_by_signal_handler(exc):
            raise
        return STATUS_RUNNING


def _event_suffixes(from_module: Any, to_module: Any, stage: Any, detail: Any, global_step: Any) -> tuple[str, str]:
    """(stdout suffix, CSV content) shared by every sample of one trace_flow() call."""
    optional = []
    if not _is_unset_step(global_step):
        optional.append(f"global_step={global_step}")
    if _is_truthy(detail):
        optional.append(f"detail={detail}")
    required = [f"from={from_module}", f"to={to_module}", f"stage={stage}"]
    echo_suffix = "".join(f" | {part}" for part in required + optional)
    return echo_suffix, "|".join(required + optional)


def _echo_text(now: float, uid_texts: list[str], traj_texts: list[str], echo_suffix: str) -> str:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(now))
    head = f"[FLOW_TRACE] {stamp} | uid="
    tail = echo_suffix + "\n"
    pairs = map(" | traj_uid=".join, zip(uid_texts, traj_texts))
    return head + (tail + head).join(pairs) + tail


def _csv_needs_quotes(text: str) -> bool:
    # csv.writer's default (excel) dialect quotes exactly these characters.
    return "," in text or '"' in text or "\n" in text or "\r" in text


def _csv_field(text: str) -> str:
    if _csv_needs_quotes(text):
        return '"' + text.replace('"', '""') + '"'
    return text


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "backslashreplace")


def _csv_parts(
    now: float, uid_texts: list[str], traj_texts: list[str], status: str, content: str
) -> tuple[str, str, str]:
    """(the rows, the head and the tail every row shares)."""
    sample_ids = [f"{u}/{t}" if t.isdigit() else f"{u}/sample" for u, t in zip(uid_texts, traj_texts)]
    if _csv_needs_quotes("".join(sample_ids)):
        sample_ids = [_csv_field(sample_id) for sample_id in sample_ids]
    head = f"{_csv_field(settings.JOB_ID)},sample,"
    tail = f",{status},{int(now * 1000)},{_csv_field(content)}\r\n"
    return head + (tail + head).join(sample_ids) + tail, head, tail


def _csv_chunk(now: float, uid_texts: list[str], traj_texts: list[str], status: str, content: str) -> Chunk:
    rows, head, tail = _csv_parts(now, uid_texts, traj_texts, status, content)
    return _encode(rows), len(uid_texts), (len(_encode(head)), len(_encode(tail)))


# ---------------------------------------------------------------------------
# trace_flow
# ---------------------------------------------------------------------------


def trace_flow(
    uid: Any,
    traj_uid: Any,
    from_module: Any,
    to_module: Any,
    stage: Any,
    detail: Any = "",
    global_step: Any = -1,
) -> None:
    """Record that samples moved from ``from_module`` to ``to_module`` at ``stage``.

    ``uid`` and ``traj_uid`` are each one id or a sequence of ids (list, tuple,
    numpy array); a length-1 side is broadcast to the other's length. Each
    sample gets one ``[FLOW_TRACE]`` stdout line and one CSV row. Does nothing
    when tracing is off or suppressed for the current context; never raises
    a failure of its own (an exception a signal handler raises while it runs
    reaches the caller unchanged) and never blocks on a lock its own thread
    holds (a call from a signal handler that interrupted another trace_flow is
    dropped and counted).
    """
    if not settings.enabled or _suppressed.get():
        return
    if not safety.enter():
        losses.count_lost(_FACILITY, formats.LOST_REENTRANT, _sample_count(uid, traj_uid), report=False)
        return
    try:
        _record_flow(uid, traj_uid, from_module, to_module, stage, detail, global_step)
    except Exception as exc:
        if safety.raised_by_signal_handler(exc):
            raise
        losses.count_lost(_FACILITY, formats.LOST_FORMAT_ERROR, 1)
        safety.warn_once("trace_flow", "tracing: trace_flow failed; event dropped", exc_info=True)
    finally:
        safety.leave()


def _sample_count(uid: Any, traj_uid: Any) -> int:
    """How many rows a call would record, for counting it lost; 1 when that cannot be told."""
    try:
        return _paired_length(len(_as_id_list(uid)), len(_as_id_list(traj_uid)))
    except Exception as exc:
        if safety.raised_by_signal_handler(exc):
            raise
        return 1


def _record_flow(
    uid: Any, traj_uid: Any, from_module: Any, to_module: Any, stage: Any, detail: Any, global_step: Any
) -> None:
    trace_dir = settings.trace_dir
    if not trace_dir:
        return
    process.ensure_current()
    uids, traj_uids = _paired_ids(uid, traj_uid, stage)
    if not uids:
        return
    try:
        # format() is exactly what the f-strings of the line formats apply.
        uid_texts = list(map(format, uids))
        traj_texts = list(map(format, traj_uids))
        now = settings.clock()
        echo_suffix, content = _event_suffixes(from_module, to_module, stage, detail, global_step)
        echo_text = _echo_text(now, uid_texts, traj_texts, echo_suffix)
        chunk = _csv_chunk(now, uid_texts, traj_texts, _sample_status(stage), content)
    except Exception as exc:
        if safety.raised_by_signal_handler(exc):
            raise
        losses.count_lost(_FACILITY, formats.LOST_FORMAT_ERROR, len(uids))
        safety.warn_once("trace_flow-format", "tracing: trace_flow could not format an event; dropped", exc_info=True)
        return
    streams.echo(echo_text)
    writer = _sample_writer_for(trace_dir)
    if writer is None:
        losses.count_lost(_FACILITY, formats.LOST_LOCK_TIMEOUT, len(uids))
    else:
        writer.submit(chunk)
