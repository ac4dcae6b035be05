"""Raw file descriptors for every file the runtime writes.

Raw descriptors because nothing is then buffered in Python objects: nothing
leaks into a forked child or is lost at exit, and every write is accounted
for in bytes (a write that stops part-way says how far it got).

- Output files never take descriptors 0-2: in a process that closed stdout,
  a trace file opened as fd 1 would receive every later print().
- Small files that are rewritten whole (discovery files, status files) go to a
  fresh temp file that then replaces the target name, so a link planted at the
  name is replaced, never followed; a file another user owns in the way (EPERM
  in a sticky /tmp) is reported once on stderr and left as it is.
- File names built from a host name or an id keep path separators out.
- Nothing opened can block the caller: files are opened with O_NONBLOCK and
  anything that is not a regular file (a FIFO, a socket, a device) is refused
  (``NotRegularFile``), said once per path on stderr.
- A file whose folder was removed or replaced while it was open is noticed
  (``still_named``, ``unlinked``): its writer opens a new one, and says so
  once on stderr.
"""

# Containment is this package's job: no failure of the tracing's own reaches the training
# loop, and nothing else (a signal handler's exception) is kept from it (see safety.py).

from __future__ import annotations

import errno
import os
import stat
import tempfile

from . import safety, settings, streams

try:
    import fcntl
except ImportError:  # not on POSIX: descriptors are moved with os.dup instead
    fcntl = None  # type: ignore[assignment]

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
APPEND_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND | _CLOEXEC
CREATE_NEW_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | _CLOEXEC

SAMPLE_DISCOVERY_FILE = "verl_trace_sample_path.txt"
TRAJECTORY_DISCOVERY_FILE = "verl_trace_trajectory_path.txt"
PROGRESS_DISCOVERY_FILE = "verl_progress_path.txt"


class WriteError(OSError):
    """A write that failed after ``written`` bytes of its data reached the file."""

    def __init__(self, cause: OSError, written: int) -> None:
        super().__init__(cause.errno, cause.strerror)
        self.written = written


class NotRegularFile(OSError):
    """The path is a FIFO, a socket or a device: writing to it could block, or go anywhere."""


def open_fd(path: str, flags: int = APPEND_FLAGS, mode: int = 0o644) -> int:
    """``os.open`` of a regular file that never blocks and never returns a standard descriptor (0-2).

    O_NONBLOCK makes the open of a FIFO with no reader fail (ENXIO) instead of
    waiting for one; whatever did open is checked with fstat, so a path swapped
    between a check and the open changes nothing. Raises NotRegularFile for a
    FIFO, socket or device (said once per path on stderr), OSError otherwise.
    """
    try:
        fd = os.open(path, flags | _NONBLOCK, mode)
    except OSError as exc:
        if safety.raised_by_signal_handler(exc):
            raise
        kind = _special_kind(path)
        if kind is None:
            raise
        raise _refuse(path, kind) from exc
    try:
        kind = _special_kind(fd)
        if kind is not None:
            raise _refuse(path, kind)
        if _NONBLOCK and fcntl is not None:  # a regular file: back to plain writes
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return _above_standard_streams(fd)


_SPECIAL_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def _special_kind(target: str | int) -> str | None:
    """What ``target`` (a path or an open descriptor) is, if it is a FIFO, socket or device."""
    try:
        mode = os.stat(target).st_mode
    except OSError as exc:
        if safety.raised_by_signal_handler(exc):
            raise
        return None
    return next((name for test, name in _SPECIAL_KINDS if test(mode)), None)


_refused_paths: set[str] = set()


def _refuse(path: str, kind: str) -> NotRegularFile:
    if path not in _refused_paths:
        _refused_paths.add(path)
        streams.write_stderr(
            f"[verl tracing] {path} is {kind}, not a regular file: nothing is written to it "
            "(what was meant for it is counted as lost: not a regular file)\n"
        )
    return NotRegularFile(errno.EINVAL, f"{path} is {kind}, not a regular file")


FileIdentity = tuple[int, int]  # (st_dev, st_ino)


def identity(info: os.stat_result) -> FileIdentity:
    """What ``still_named`` compares: the file ``info`` (an fstat of an open file) describes."""
    return info.st_dev, info.st_ino


def still_named(path: str | None, opened: FileIdentity) -> bool:
    """False when ``path`` no longer names the file opened as ``opened``: removed, or its folder replaced.

    One stat of the path; a file that still has this name has not lost its last link.
    """
    if path is None:
        return True
    try:
        named = os.stat(path)
    except OSError as exc:
        if safety.raised_by_signal_handler(exc):
            raise
        # gone; else cannot tell (EACCES, a stale mount...): the next write says what it finds
        return not isinstance(exc, (FileNotFoundError, NotADirectoryError))
    return (named.st_dev, named.st_ino) == opened


def unlinked(fd: int) -> bool:
    """True when the open file ``fd`` has no name left: what was written to it is gone."""
    try:
        return os.fstat(fd).st_nlink == 0
    except OSError as exc:
        if safety.raised_by_signal_handler(exc):
            raise
        return False


_reported_moves: set[str] = set()


def report_moved(folder: str) -> None:
    """Say once on stderr that ``folder`` (or the trace folder holding it) was removed or replaced."""
    trace_dir = settings.trace_dir
    if trace_dir and (folder == trace_dir or folder.startswith(os.path.join(trace_dir, ""))):
        folder = trace_dir  # its sample, progress and trajectory folders went with it: one line
    if folder in _reported_moves:
        return
    _reported_moves.add(folder)
    streams.write_stderr(
        f"[verl tracing] {folder} was removed or replaced while the run went on: writing on into a new one "
        "(what went into the old one after that is counted as lost: folder removed)\n"
    )


def _above_standard_streams(fd: int) -> int:
    if fd > 2:
        return fd
    try:
        if fcntl is not None:
            return fcntl.fcntl(fd, getattr(fcntl, "F_DUPFD_CLOEXEC", fcntl.F_DUPFD), 3)
        low = []
        moved = os.dup(fd)
        while moved <= 2:
            low.append(moved)
            moved = os.dup(fd)
        for extra in low:
            os.close(extra)
        return moved
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data``; a failure raises WriteError saying how many were written."""
    view = memoryview(data)
    written = 0
    while written < len(view):
        try:
            count = os.write(fd, view[written:])
        except OSError as exc:
            if safety.raised_by_signal_handler(exc):
                raise
            raise WriteError(exc, written) from exc
        if count <= 0:
            raise WriteError(OSError(errno.EIO, "write returned nothing"), written)
        written += count


def close_fd(fd: int | None) -> None:
    if fd is None:
        return
    try:
        os.close(fd)
    except OSError as exc:
        if safety.raised_by_signal_handler(exc):
            raise


def truncate_to(fd: int, good_size: int, expected_size: int) -> bool:
    """Cut the file back to ``good_size`` if it is still ``expected_size`` long; True if cut.

    The size check keeps a file someone else appended to meanwhile intact.
    """
    try:
        if os.fstat(fd).st_size != expected_size:
            return False
        os.ftruncate(fd, good_size)
        return True
    except OSError as exc:
        if safety.raised_by_signal_handler(exc):
            raise
        return False


def replace_file(directory: str, name: str, content: bytes) -> None:
    """Make ``directory/name`` hold ``content`` atomically, never following a link; raises OSError."""
    fd, tmp_path = tempfile.mkstemp(prefix=f".{name}.", dir=directory)
    try:
        fd = _above_standard_streams(fd)
        try:
            write_all(fd, content)
            os.fchmod(fd, 0o644)
        finally:
            os.close(fd)
        os.replace(tmp_path, os.path.join(directory, name))
    except BaseException:
        try:
            os.unlink(tmp_path)
        except OSError as exc:
            if safety.raised_by_signal_handler(exc):
                raise
        raise


_reported_discovery_failures: set[str] = set()


def publish_discovery(filename: str, directory: str) -> bool:
    """Point ``DISCOVERY_DIR/filename`` at ``directory`` (made absolute); True on success."""
    try:
        content = os.path.abspath(directory).encode("utf-8", "surrogateescape")
        replace_file(settings.DISCOVERY_DIR, filename, content)
        return True
    except Exception as exc:
        if safety.raised_by_signal_handler(exc):
            raise
        _report_discovery_failure(filename, exc)
        return False


def _report_discovery_failure(filename: str, exc: Exception) -> None:
    if filename in _reported_discovery_failures:
        return
    _reported_discovery_failures.add(filename)
    path = os.path.join(settings.DISCOVERY_DIR, filename)
    hint = ""
    if isinstance(exc, PermissionError):
        hint = " (a file another user owns is in the way; it was left as it is and does not point at this run)"
    streams.write_stderr(f"[verl tracing] cannot write the discovery file {path}: {exc}{hint}\n")


def safe_name(text: str) -> str:
    """``text`` fit to be part of one file name: path separators and NUL become ``_``."""
    for separator in ("/", os.altsep, "\0"):
        if separator and separator in text:
            text = text.replace(separator, "_")
    return text
