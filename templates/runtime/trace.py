"""Sample-flow events, training-progress lines and the I/O plumbing they share.

This module runs inside every training process, so its public functions never
raise into the caller. File output goes through bounded background writers
that drop (and count) rows instead of blocking, survive ``fork()``, and are
flushed with a time limit at interpreter exit.

Output is controlled by one switch, the trace directory: ``set_trace_dir()``
if it was called, otherwise ``$VERL_TRACE_DIR`` as read once at import.
"""

from __future__ import annotations

import atexit
import collections
import contextvars
import functools
import logging
import os
import socket
import sys
import tempfile
import threading
import time
import weakref

logger = logging.getLogger(__name__)

# ---------------------------------------------------------------------------
# Configuration. Environment variables are read once, here, so the per-call
# cost of a disabled trace_flow() is a single global lookup.
# ---------------------------------------------------------------------------

_trace_dir = os.environ.get("VERL_TRACE_DIR") or None
_enabled = _trace_dir is not None
_job_id = os.environ.get("DLC_JOB_ID", "ENV_NOTFOUND_DLC_JOB_ID")

# Where external tools look for the output directories. Overridable so tests
# (and sandboxed jobs) never touch the real files in /tmp.
DISCOVERY_DIR = os.environ.get("VERL_TRACE_DISCOVERY_DIR") or "/tmp"
SAMPLE_DISCOVERY_FILE = "verl_trace_sample_path.txt"
TRAJECTORY_DISCOVERY_FILE = "verl_trace_trajectory_path.txt"
PROGRESS_DISCOVERY_FILE = "verl_progress_path.txt"

# Memory bound for rows waiting to be written (characters, roughly bytes).
SAMPLE_QUEUE_MAX_CHARS = 32 * 1024 * 1024
# Total time the atexit hook spends draining writers; keeps exit under 2 s.
EXIT_FLUSH_SECONDS = 1.0
# Upper bound on waiting for a module lock; a lock inherited in a locked
# state through a fork that bypassed our at-fork hook can never deadlock us.
_LOCK_TIMEOUT_SECONDS = 1.0

_clock = time.time  # single time source; tests replace it

_APPEND_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
_COMPLETE_STAGES = frozenset({"TRAIN_UPDATE", "FILTER_TRAJECTORIES"})


# ---------------------------------------------------------------------------
# Failure containment helpers
# ---------------------------------------------------------------------------

_warned_keys: set = set()


def _warn_once(key, message, *args, exc_info=False):
    """Log a warning the first time ``key`` is seen; never raises."""
    if key in _warned_keys:
        return
    _warned_keys.add(key)
    try:
        logger.warning(message, *args, exc_info=exc_info)
    except Exception:
        pass


def _never_raise(fallback=None):
    """Decorator: swallow exceptions, warn once, return ``fallback()`` (or None)."""

    def decorate(func):
        @functools.wraps(func)
        def guarded(*args, **kwargs):
            try:
                return func(*args, **kwargs)
            except Exception:
                _warn_once(func.__qualname__, "tracing: %s failed; continuing", func.__qualname__, exc_info=True)
                return fallback() if fallback is not None else None

        return guarded

    return decorate


def _write_all(fd, data):
    """Write every byte of ``data`` to a raw fd (raw fds: nothing buffered to leak over fork)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:
            raise OSError("short write")
        view = view[written:]


def _close_fd(fd):
    if fd is None:
        return
    try:
        os.close(fd)
    except OSError:
        pass


def _publish_discovery(filename, directory):
    """Atomically point ``DISCOVERY_DIR/filename`` at ``directory``; True on success.

    The content goes to a fresh temp file that then replaces the target name, so
    a symlink planted at the target is replaced itself; its target is never opened.
    """
    try:
        content = os.path.abspath(directory).encode("utf-8", "surrogateescape")
        fd, tmp_path = tempfile.mkstemp(prefix=f".{filename}.", dir=DISCOVERY_DIR)
    except Exception as exc:
        _warn_once(("discovery", filename), "tracing: cannot write discovery file %s: %s", filename, exc)
        return False
    try:
        try:
            _write_all(fd, content)
            os.fchmod(fd, 0o644)
        finally:
            os.close(fd)
        os.replace(tmp_path, os.path.join(DISCOVERY_DIR, filename))
        return True
    except Exception as exc:
        _warn_once(("discovery", filename), "tracing: cannot write discovery file %s: %s", filename, exc)
        try:
            os.unlink(tmp_path)
        except OSError:
            pass
        return False


def _echo(text, flush=False):
    """Write ``text`` to the current sys.stdout; a closed or broken stream is ignored."""
    stream = sys.stdout
    if stream is None:
        return
    try:
        try:
            stream.write(text)
        except UnicodeEncodeError:
            encoding = getattr(stream, "encoding", None) or "utf-8"
            stream.write(text.encode(encoding, "backslashreplace").decode(encoding, "replace"))
        if flush:
            stream.flush()
    except Exception:
        pass


# ---------------------------------------------------------------------------
# Bounded background writers
# ---------------------------------------------------------------------------


class _PendingText:
    """FIFO of ``(text, n_records)`` chunks, bounded by total characters.

    Also keeps the bookkeeping behind flush() and the exit report: records
    accepted, records finished (written or failed) and records dropped, by reason.
    """

    def __init__(self, max_chars):
        lock = threading.Lock()
        self._has_chunks = threading.Condition(lock)
        self._progressed = threading.Condition(lock)
        self._chunks = collections.deque()
        self._chars = 0
        self._max_chars = max_chars
        self._accepted = 0
        self._finished = 0
        self._closed = False
        self._drops = collections.Counter()

    def put(self, text, n_records):
        with self._has_chunks:
            if self._closed:
                self._drops["writer closed"] += n_records
                return False
            if self._chars + len(text) > self._max_chars:
                self._drops["queue full"] += n_records
                return False
            self._chunks.append((text, n_records))
            self._chars += len(text)
            self._accepted += n_records
            self._has_chunks.notify()
            return True

    def take_all(self):
        """Block until chunks are queued; return them all, or None once closed and empty."""
        with self._has_chunks:
            while not self._chunks and not self._closed:
                self._has_chunks.wait()
            chunks = list(self._chunks)
            self._chunks.clear()
            self._chars = 0
            return chunks or None

    def mark_finished(self, n_records):
        with self._progressed:
            self._finished += n_records
            self._progressed.notify_all()

    def count_drop(self, reason, n_records):
        with self._progressed:
            self._drops[reason] += n_records

    def wait_finished(self, deadline):
        """Wait until everything accepted so far is finished; False on timeout."""
        with self._progressed:
            target = self._accepted
            while self._finished < target:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._progressed.wait(min(remaining, 1.0))
            return True

    def close(self):
        with self._has_chunks:
            self._closed = True
            self._has_chunks.notify_all()

    def drop_counts(self):
        with self._progressed:
            counts = dict(self._drops)
            unfinished = self._accepted - self._finished
        if unfinished:
            counts["not flushed at exit"] = unfinished
        return counts


# Every writer of this process, for flush(), the exit hook and the fork hook.
_live_writers: "weakref.WeakSet[_BackgroundWriter]" = weakref.WeakSet()


class _BackgroundWriter:
    """One daemon thread that drains a ``_PendingText`` into an output object.

    The output object provides ``write_chunks(chunks) -> n_failed_records``,
    ``close()`` and ``forget_inherited()``. The thread starts on first use. In a
    forked child the inherited queue (the parent's rows) is discarded and a new
    thread is started on demand, so a child never waits on the parent's thread;
    every entry point first checks for a fork (see ``_ensure_process_state``).
    """

    def __init__(self, name, unit, output, max_chars):
        self.name = name
        self.unit = unit
        self.output = output
        self._max_chars = max_chars
        self._reset_process_state()
        _live_writers.add(self)

    def _reset_process_state(self):
        self._pending = _PendingText(self._max_chars)
        self._thread = None
        self._start_lock = threading.Lock()

    def forget_after_fork(self):
        """Drop state inherited from the parent; must not touch the parent's locks."""
        self.output.forget_inherited()
        self._reset_process_state()

    def submit(self, text, n_records=1):
        """Queue ``text`` (holding ``n_records`` records); False if it was dropped."""
        _ensure_process_state()
        if self._thread is None and not self._start_thread():
            self._pending.count_drop("no writer thread", n_records)
            return False
        return self._pending.put(text, n_records)

    def count_drop(self, reason, n_records=1):
        _ensure_process_state()
        self._pending.count_drop(reason, n_records)

    def _start_thread(self):
        if not self._start_lock.acquire(timeout=_LOCK_TIMEOUT_SECONDS):
            return False
        try:
            if self._thread is None:
                thread = threading.Thread(
                    target=self._drain, args=(self._pending,), name=f"verl-trace-{self.name}", daemon=True
                )
                thread.start()  # RuntimeError at interpreter shutdown
                self._thread = thread
                _hook_multiprocessing_exit()
            return True
        except RuntimeError:
            return False
        finally:
            self._start_lock.release()

    def _drain(self, pending):
        while True:
            chunks = pending.take_all()
            if chunks is None:
                break
            n_records = sum(n for _, n in chunks)
            try:
                failed = self.output.write_chunks(chunks)
            except Exception as exc:
                failed = n_records
                _warn_once(("write", self.name), "tracing: %s writer failed: %s", self.name, exc)
            if failed:
                pending.count_drop("write error", failed)
            pending.mark_finished(n_records)
        self.output.close()

    def flush(self, deadline):
        """Wait (until ``deadline``, a time.monotonic() value) for queued records."""
        _ensure_process_state()
        return self._pending.wait_finished(deadline)

    def close(self, deadline):
        """Flush, then stop the thread and close the output; False if time ran out."""
        _ensure_process_state()
        flushed = self._pending.wait_finished(deadline)
        self._pending.close()
        thread = self._thread
        if thread is None:
            self.output.close()
        else:
            thread.join(max(0.0, deadline - time.monotonic()))
        return flushed

    def retire(self):
        """Stop accepting records; the thread finishes what is queued and exits."""
        self._pending.close()
        if self._thread is None:
            self.output.close()

    def drop_report(self):
        counts = self._pending.drop_counts()
        total = sum(counts.values())
        if not total:
            return None
        details = ", ".join(f"{reason}: {n}" for reason, n in sorted(counts.items()))
        return f"[verl tracing] {self.name} writer dropped {total} {self.unit}(s) ({details})"


def _deadline_after(timeout):
    if timeout is None:
        return float("inf")
    return time.monotonic() + max(0.0, float(timeout))


def flush(timeout=5.0):
    """Wait up to ``timeout`` seconds for all queued trace output to reach disk.

    The atexit hook does this automatically; call it explicitly before leaving
    through ``os._exit()``. Returns True when everything was written (or dropped
    for a counted reason) in time.
    """
    try:
        _ensure_process_state()
        deadline = _deadline_after(timeout)
        done = True
        for writer in list(_live_writers):
            done = writer.flush(deadline) and done
        return done
    except Exception:
        return False


_exit_report_written = False


def _flush_and_report_at_exit():
    """atexit: bounded flush of every writer, then one stderr line per lossy writer."""
    global _exit_report_written
    try:
        _ensure_process_state()  # may reset the flag below: check it afterwards
        if _exit_report_written:
            return
        _exit_report_written = True
        writers = list(_live_writers)
        deadline = time.monotonic() + EXIT_FLUSH_SECONDS
        for writer in writers:
            writer.flush(deadline)
        report = "".join(f"{line}\n" for line in map(_BackgroundWriter.drop_report, writers) if line)
    except Exception:
        return
    if report:
        _write_stderr(report)


_mp_exit_hook_pid = None


def _hook_multiprocessing_exit():
    """Also flush on a multiprocessing child's exit path, once per process.

    multiprocessing children finish with os._exit() and so skip atexit, but
    their bootstrap runs multiprocessing's own finalizers first.
    """
    global _mp_exit_hook_pid
    multiprocessing = sys.modules.get("multiprocessing")
    if multiprocessing is None or _mp_exit_hook_pid == os.getpid():
        return
    _mp_exit_hook_pid = os.getpid()
    try:
        if multiprocessing.parent_process() is not None:
            from multiprocessing import util

            util.Finalize(None, _flush_and_report_at_exit, exitpriority=0)
    except Exception:
        pass


def _write_stderr(text):
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except Exception:
        try:
            os.write(2, text.encode("utf-8", "backslashreplace"))
        except OSError:
            pass


_state_pid = os.getpid()


def _reset_for_new_process():
    """Forget everything inherited from the parent process, without touching its locks."""
    global _state_pid, _sample_sink_lock, _progress_lock, _exit_report_written
    _state_pid = os.getpid()
    _exit_report_written = False
    _sample_sink_lock = threading.Lock()
    _progress_lock = threading.Lock()
    for writer in list(_live_writers):
        writer.forget_after_fork()


def _ensure_process_state():
    """Catch up on a fork the at-fork hook did not see (e.g. fork() called from C)."""
    if _state_pid != os.getpid():
        _reset_for_new_process()


def _at_fork_in_child():
    _reset_for_new_process()


atexit.register(_flush_and_report_at_exit)
if hasattr(os, "register_at_fork"):
    # Late-bound so a test can simulate a fork that skips the hook.
    os.register_at_fork(after_in_child=lambda: _at_fork_in_child())


# ---------------------------------------------------------------------------
# Trace switch
# ---------------------------------------------------------------------------


def set_trace_dir(path):
    """Turn tracing on with ``path`` as the trace directory, or off with None/''."""
    global _trace_dir, _enabled
    try:
        text = os.fsdecode(path) if path is not None else None
    except TypeError:
        text = str(path)
    # Order matters for concurrent readers: never enabled without a directory.
    _enabled = False
    _trace_dir = text or None
    _enabled = _trace_dir is not None


def get_trace_dir():
    """The active trace directory, or None when tracing is off."""
    return _trace_dir


# ---------------------------------------------------------------------------
# Sample-flow CSV
# ---------------------------------------------------------------------------

_suppressed = contextvars.ContextVar("verl_trace_suppress_samples", default=False)


def suppress_sample_trace(flag=True):
    """Silence (flag=True) or restore trace_flow() for the current task/thread context.

    asyncio tasks copy the context when created, so calling this at the start of
    a validation sample's task silences every trace_flow() made on its behalf.
    """
    try:
        _suppressed.set(bool(flag))
    except Exception:
        _warn_once("suppress_sample_trace", "tracing: suppress_sample_trace() ignored a flag with no truth value")


def _csv_needs_quotes(text):
    # csv.writer's default (excel) dialect quotes exactly these characters.
    return "," in text or '"' in text or "\n" in text or "\r" in text


def _csv_field(text):
    if _csv_needs_quotes(text):
        return '"' + text.replace('"', '""') + '"'
    return text


class _SampleCsvOutput:
    """Appends CSV text to ``{trace_dir}/sample/{hostname}-pid{pid}.csv``.

    The path is resolved when the file is opened, so a forked child that traces
    gets a file named after its own pid. A failed write closes the file; the
    next batch retries from scratch (directory, file and discovery file).
    """

    def __init__(self, trace_dir):
        self.trace_dir = trace_dir
        self.path = None
        self._fd = None
        self._announced = False

    def write_chunks(self, chunks):
        data = "".join(text for text, _ in chunks).encode("utf-8", "backslashreplace")
        try:
            if self._fd is None:
                self._open()
            _write_all(self._fd, data)
        except OSError:
            self.close()
            raise
        return 0

    def _open(self):
        sample_dir = os.path.join(self.trace_dir, "sample")
        os.makedirs(sample_dir, exist_ok=True)
        self.path = os.path.join(sample_dir, f"{socket.gethostname()}-pid{os.getpid()}.csv")
        self._fd = os.open(self.path, _APPEND_FLAGS, 0o644)
        if not self._announced:
            self._announced = _publish_discovery(SAMPLE_DISCOVERY_FILE, sample_dir)

    def close(self):
        fd, self._fd = self._fd, None
        _close_fd(fd)

    forget_inherited = close  # raw fd: closing the child's copy flushes nothing


_sample_sink = None  # (trace_dir, _BackgroundWriter) of the current trace dir
_sample_sink_lock = threading.Lock()


def _sample_writer_for(trace_dir):
    """The CSV writer for ``trace_dir``; a writer for an older dir is retired."""
    global _sample_sink
    sink = _sample_sink
    if sink is not None and sink[0] == trace_dir:
        return sink[1]
    if not _sample_sink_lock.acquire(timeout=_LOCK_TIMEOUT_SECONDS):
        return None
    try:
        sink = _sample_sink
        if sink is None or sink[0] != trace_dir:
            if sink is not None:
                sink[1].retire()
            writer = _BackgroundWriter("sample-flow", "row", _SampleCsvOutput(trace_dir), SAMPLE_QUEUE_MAX_CHARS)
            sink = _sample_sink = (trace_dir, writer)
        return sink[1]
    finally:
        _sample_sink_lock.release()


# numpy dtype kinds whose .tolist() elements format exactly like the numpy
# scalars do (floats are excluded: float32 would print more digits).
_EXACT_TOLIST_KINDS = frozenset("OUSiub")


def _as_id_list(value):
    """A string, sequence or 1-D array as a sequence of ids; anything else is one id."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)):
        return value
    dtype_kind = getattr(getattr(value, "dtype", None), "kind", None)
    if getattr(value, "ndim", None) == 1 and dtype_kind in _EXACT_TOLIST_KINDS:
        return value.tolist()
    if isinstance(value, (bytes, bytearray)) or not hasattr(value, "__len__"):
        return [value]
    try:
        return list(value)
    except TypeError:  # e.g. a 0-d numpy array
        return [value]


def _paired_ids(uid, traj_uid, stage):
    """Broadcast a length-1 side to the other's length; zip-truncate otherwise."""
    uids, traj_uids = _as_id_list(uid), _as_id_list(traj_uid)
    n_uid, n_traj = len(uids), len(traj_uids)
    if n_uid == 1 and n_traj > 1:
        return list(uids) * n_traj, traj_uids
    if n_traj == 1 and n_uid > 1:
        return uids, list(traj_uids) * n_uid
    if n_uid != n_traj:
        logger.warning(
            "trace_flow: %d uid(s) vs %d traj_uid(s) at stage %s; neither side has length 1, "
            "so only the first %d pair(s) are recorded",
            n_uid,
            n_traj,
            stage,
            min(n_uid, n_traj),
        )
        n = min(n_uid, n_traj)
        return uids[:n], traj_uids[:n]
    return uids, traj_uids


def _is_truthy(value):
    try:
        return bool(value)
    except Exception:
        return True


def _is_unset_step(global_step):
    try:
        return bool(global_step == -1)
    except Exception:
        return False


def _sample_status(stage):
    try:
        return "COMPLETE" if stage in _COMPLETE_STAGES else "RUNNING"
    except TypeError:  # unhashable stage
        return "RUNNING"


def _event_suffixes(from_module, to_module, stage, detail, global_step):
    """(stdout suffix, CSV content) shared by every sample of one trace_flow() call."""
    optional = []
    if not _is_unset_step(global_step):
        optional.append(f"global_step={global_step}")
    if _is_truthy(detail):
        optional.append(f"detail={detail}")
    required = [f"from={from_module}", f"to={to_module}", f"stage={stage}"]
    echo_suffix = "".join(f" | {part}" for part in required + optional)
    return echo_suffix, "|".join(required + optional)


def _echo_text(now, uid_texts, traj_texts, echo_suffix):
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(now))
    head = f"[FLOW_TRACE] {stamp} | uid="
    tail = echo_suffix + "\n"
    pairs = map(" | traj_uid=".join, zip(uid_texts, traj_texts))
    return head + (tail + head).join(pairs) + tail


def _csv_text(now, uid_texts, traj_texts, status, content):
    sample_ids = [f"{u}/{t}" if t.isdigit() else f"{u}/sample" for u, t in zip(uid_texts, traj_texts)]
    if _csv_needs_quotes("".join(sample_ids)):
        sample_ids = [_csv_field(sample_id) for sample_id in sample_ids]
    head = f"{_csv_field(_job_id)},sample,"
    tail = f",{status},{int(now * 1000)},{_csv_field(content)}\r\n"
    return head + (tail + head).join(sample_ids) + tail


def trace_flow(uid, traj_uid, from_module, to_module, stage, detail="", global_step=-1):
    """Record that samples moved from ``from_module`` to ``to_module`` at ``stage``.

    ``uid`` and ``traj_uid`` are each one id or a sequence of ids (list, tuple,
    numpy array); a length-1 side is broadcast to the other's length. Each
    sample gets one ``[FLOW_TRACE]`` stdout line and one CSV row. Does nothing
    when tracing is off or suppressed for the current context; never raises.
    """
    if not _enabled:
        return
    try:
        if not _suppressed.get():
            _record_flow(uid, traj_uid, from_module, to_module, stage, detail, global_step)
    except Exception:
        _warn_once("trace_flow", "tracing: trace_flow failed; event dropped", exc_info=True)


def _record_flow(uid, traj_uid, from_module, to_module, stage, detail, global_step):
    trace_dir = _trace_dir
    if not trace_dir:
        return
    _ensure_process_state()
    uids, traj_uids = _paired_ids(uid, traj_uid, stage)
    if not uids:
        return
    # format() is exactly what the f-strings of the line formats apply.
    uid_texts = list(map(format, uids))
    traj_texts = list(map(format, traj_uids))
    now = _clock()
    echo_suffix, content = _event_suffixes(from_module, to_module, stage, detail, global_step)
    _echo(_echo_text(now, uid_texts, traj_texts, echo_suffix))
    writer = _sample_writer_for(trace_dir)
    if writer is not None:
        writer.submit(_csv_text(now, uid_texts, traj_texts, _sample_status(stage), content), len(uid_texts))


# ---------------------------------------------------------------------------
# Progress lines: stdout always, plus {trace_dir}/progress/{YYYYMMDD-HH}.log
# ---------------------------------------------------------------------------

_progress_lock = threading.Lock()
_progress_key = None  # (progress_dir, hour) of the open file
_progress_fd = None
_progress_announced = False


def _progress_fd_for(progress_dir, hour):
    global _progress_key, _progress_fd, _progress_announced
    if _progress_fd is not None and _progress_key == (progress_dir, hour):
        return _progress_fd
    _close_progress_file()
    os.makedirs(progress_dir, exist_ok=True)
    if not _progress_announced:
        _progress_announced = _publish_discovery(PROGRESS_DISCOVERY_FILE, progress_dir)
    _progress_fd = os.open(os.path.join(progress_dir, f"{hour}.log"), _APPEND_FLAGS, 0o644)
    _progress_key = (progress_dir, hour)
    return _progress_fd


def _close_progress_file():
    global _progress_key, _progress_fd
    fd, _progress_fd, _progress_key = _progress_fd, None, None
    _close_fd(fd)


def _append_progress_line(trace_dir, line):
    progress_dir = os.path.join(trace_dir, "progress")
    hour = time.strftime("%Y%m%d-%H", time.localtime(_clock()))
    data = (line + "\n").encode("utf-8", "backslashreplace")
    _ensure_process_state()
    if not _progress_lock.acquire(timeout=_LOCK_TIMEOUT_SECONDS):
        return
    try:
        _write_all(_progress_fd_for(progress_dir, hour), data)
    except OSError as exc:
        _close_progress_file()  # retry from scratch on the next line
        _warn_once("progress-write", "tracing: cannot append to progress log in %s: %s", progress_dir, exc)
    finally:
        _progress_lock.release()


def log_progress(message):
    """Print one progress line; also append it to the hourly progress log when tracing is on."""
    try:
        line = message if isinstance(message, str) else str(message)
        _echo(line + "\n", flush=True)
        trace_dir = _trace_dir
        if trace_dir:
            _append_progress_line(trace_dir, line)
    except Exception:
        _warn_once("log_progress", "tracing: log_progress failed", exc_info=True)


def log_step_window(step, phase, boundary):
    """Progress line ``Step {step} {phase} {boundary}``, e.g. ``Step 3 train started``."""
    try:
        log_progress(f"Step {step} {phase} {boundary}")
    except Exception:
        pass


def log_gen_throughput_tokens(n_tokens, seconds):
    """Progress line ``gen throughput (token/s): X.XX``; skips missing or invalid input."""
    try:
        if n_tokens is None or seconds is None or n_tokens < 0 or seconds <= 0:
            return
        log_progress(f"gen throughput (token/s): {int(n_tokens) / seconds:.2f}")
    except Exception:
        pass


def log_gen_throughput(batch, seconds):
    """Throughput line for a rollout batch, counting only non-padding response tokens.

    ``batch.batch`` must hold ``responses``; with a 2-D ``attention_mask`` the
    tokens are its sum over the response columns, otherwise every response slot
    counts. Works on anything tensor-like (``dim``, ``shape``, ``sum``, ``numel``).
    """
    try:
        tensors = batch.batch
        if tensors is None or "responses" not in tensors.keys():
            return
        responses = tensors["responses"]
        mask = tensors.get("attention_mask", None)
        if mask is not None and mask.dim() == 2 and mask.shape[-1] >= responses.shape[-1]:
            prompt_len = mask.shape[-1] - responses.shape[-1]
            n_tokens = int(mask[:, prompt_len:].sum())
        else:
            n_tokens = int(responses.numel())
        log_gen_throughput_tokens(n_tokens, seconds)
    except Exception:
        pass


def log_rollout_completed(uid, traj_uid, score=None):
    """Progress line ``Task {uid}/{traj_uid} is completed, score=S status=Finished`` (tracing on only)."""
    try:
        if not _trace_dir:
            return
        if score is None:
            score = 0.0
        log_progress(f"Task {uid}/{traj_uid} is completed, score={score} status=Finished")
    except Exception:
        pass


def _close_all_writers(timeout=2.0):
    """Flush and stop every writer of this process (test and shutdown helper)."""
    deadline = _deadline_after(timeout)
    for writer in list(_live_writers):
        try:
            writer.close(deadline)
        except Exception:
            pass
    with _progress_lock:
        _close_progress_file()
