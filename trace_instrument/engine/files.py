"""Reading target files safely and writing a run's changes all-or-nothing."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from trace_instrument.model import ChangeKind, FileChange, FileProblemKind, RunError, RunErrorKind, RunResult

LOCK_NAME = ".trace-instrument.lock"
TEMP_SUFFIX = ".ti-tmp"
# fault injection for the interruption tests: at which stage of the writes to pause, for how long
# "before-writes", "staging" (after each staged file), "before-renames" (all staged, none renamed)
# or "renames" (after each rename)
PAUSE_AT_ENV = "TRACE_INSTRUMENT_PAUSE_AT"
PAUSE_ENV = "TRACE_INSTRUMENT_PAUSE_SECONDS"
# what ends a run cleanly (the command line raises Interrupted for each): Ctrl-C, kill, a closed terminal
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(BaseException):
    """SIGINT, SIGTERM or SIGHUP, raised by the handlers the command line installs."""

    def __init__(self, signal_name: str):
        super().__init__(signal_name)
        self.signal_name = signal_name


class InterruptedAfterWrite(BaseException):
    """An interruption that arrived while the renames ran: it was held back until they were all done."""

    def __init__(self, interruption: BaseException):
        super().__init__(str(interruption))
        self.interruption = interruption


class CheckoutError(Exception):
    """The target is not something we can work on (exit code 2)."""

    def __init__(
        self, message: str, kind: FileProblemKind | None = None, run_kind: RunErrorKind = RunErrorKind.NOT_A_CHECKOUT
    ):
        super().__init__(message)
        self.kind = kind  # when it is about one file
        self.run_kind = run_kind  # when it stops the whole run

    def as_run_error(self) -> RunError:
        return RunError(self.run_kind, str(self))


@dataclass(frozen=True)
class SourceFile:
    path: str  # relative, posix
    absolute: Path
    data: bytes


def checkout_root(path: str | os.PathLike[str]) -> Path:
    root = Path(path).resolve()
    if not root.is_dir():
        what = "is a file, not a directory" if root.exists() else "no such directory"
        raise CheckoutError(f"{path}: {what}: expected the verl checkout, the folder that holds verl/")
    if not (root / "verl").is_dir():
        hint = " (did you mean its parent?)" if root.name == "verl" else ""
        raise CheckoutError(f"{path}: not a verl checkout: expected the folder that holds verl/{hint}")
    return root


def read_target(root: Path, relative: str) -> SourceFile | None:
    """The file's bytes, or None when it does not exist. Refuses links that leave the checkout."""
    absolute = root / relative
    if not absolute.exists() and not absolute.is_symlink():
        return None
    resolved = absolute.resolve()
    if not resolved.is_relative_to(root):
        message = f"{relative}: is a link to {resolved}, outside the checkout; refusing to touch it"
        raise CheckoutError(message, FileProblemKind.OUTSIDE)
    if not resolved.is_file():
        raise CheckoutError(f"{relative}: not a regular file", FileProblemKind.NOT_A_FILE)
    return SourceFile(relative, absolute, resolved.read_bytes())


@dataclass(frozen=True)
class PendingWrite:
    path: str
    data: bytes | None  # None: delete the file
    expected: bytes | None = None  # the bytes the run read; the write is refused if the file changed since
    kind: ChangeKind = ChangeKind.SOURCE  # whose file it is (the runtime package's and the manifest's say so)


# the fds of the checkout locks this process holds: a forked child closes its copies, so that the
# lock goes with the run that took it (flock's lock lives while any copy of its fd is open)
_HELD_LOCKS: set[int] = set()


@contextlib.contextmanager
def checkout_lock(root: Path) -> Iterator[None]:
    """An exclusive lock so two runs on one checkout cannot interleave.

    The kernel releases it when its holder ends, however it ends. The holder writes its pid,
    start time and command into the lock file: a run that finds the lock taken names them, and
    takes over a lock whose recorded holder is gone (its orphaned children still hold it).
    The lock file is removed by its holder only, while holding it; a run that locked a file
    another run had just removed tries again on the new one.
    """
    lock_path = root / LOCK_NAME
    for _attempt in range(4):
        handle = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(handle)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise
            holder = _holder(lock_path)
            if holder is None or holder.alive() or not _break_stale(root, lock_path, holder):
                raise CheckoutError(_held_message(root, holder), run_kind=RunErrorKind.LOCKED) from None
            continue
        with _folder_locked(root):  # a run breaking a stale lock checks and unlinks under it too
            if _same_file(handle, lock_path):
                _record_holder(handle)
                break
        os.close(handle)  # we locked a file the previous holder unlinked
    else:
        raise CheckoutError(f"{root}: could not take {LOCK_NAME}", run_kind=RunErrorKind.LOCKED)
    _HELD_LOCKS.add(handle)
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            lock_path.unlink()
        _HELD_LOCKS.discard(handle)
        os.close(handle)


def forget_inherited_locks() -> None:
    """In a forked child: close its copies of the parent's lock fds (the parent keeps its lock)."""
    for handle in list(_HELD_LOCKS):
        with contextlib.suppress(OSError):
            os.close(handle)
    _HELD_LOCKS.clear()


@dataclass(frozen=True)
class LockHolder:
    """The run a lock file names: its pid, its start time (clock ticks since boot; 0 unknown), its command."""

    pid: int
    started: int
    command: str

    def alive(self) -> bool:
        """Is that very process still running (a pid reused since by another process is not it)?"""
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True  # someone else's process by that pid
        return not self.started or _start_time(self.pid) in (self.started, 0)


def _record_holder(handle: int) -> None:
    command = " ".join(getattr(sys, "orig_argv", sys.argv))[:300].replace("\n", " ")
    record = f"{os.getpid()} {_start_time(os.getpid())} {command}\n".encode(errors="replace")
    with contextlib.suppress(OSError):
        os.ftruncate(handle, 0)
        os.pwrite(handle, record, 0)


def _holder(lock_path: Path) -> LockHolder | None:
    """Who holds the lock, as its file says (None: it does not say: a holder from before the
    tool recorded itself, or one that has not written its record yet)."""
    for _try in range(3):
        try:
            text = lock_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
        pid, started, command = (text.strip().split(" ", 2) + ["", "", ""])[:3]
        if pid.isdigit() and started.isdigit():
            return LockHolder(int(pid), int(started), command)
        time.sleep(0.05)  # the holder locks first, then writes
    return None


def _start_time(pid: int) -> int:
    """When the process started, in clock ticks since boot (Linux; 0 elsewhere or when unknown)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat.rpartition(")")[2].split()[19])
    except (OSError, ValueError, IndexError):
        return 0


def _break_stale(root: Path, lock_path: Path, holder: LockHolder) -> bool:
    """Unlink a lock file whose recorded holder is gone, so the next try locks a new one; False
    when it cannot. Under the folder's lock, as a run records itself, and only while the file
    still names that holder: a run that took the lock meanwhile keeps it."""
    try:
        with _folder_locked(root):
            if _holder(lock_path) == holder:
                lock_path.unlink()
    except OSError:
        return False
    return True


@contextlib.contextmanager
def _folder_locked(root: Path) -> Iterator[None]:
    """A short exclusive lock on the checkout folder itself, for the moves of the lock file's life."""
    folder = os.open(root, os.O_RDONLY)
    try:
        fcntl.flock(folder, fcntl.LOCK_EX)
        yield
    finally:
        os.close(folder)


def _held_message(root: Path, holder: LockHolder | None) -> str:
    message = f"{root}: another trace-instrument run holds {LOCK_NAME}"
    if holder is None:
        return message + " (it does not say which: if no run is under way, delete the file)"
    return f"{message}: pid {holder.pid} ({holder.command}); wait for it to end, or end it"


def held_by_a_run(root: Path) -> bool:
    """Does a run hold the checkout's lock now (its staged copies are then work in progress)? Only
    looks: the lock file is neither created nor removed."""
    try:
        handle = os.open(root / LOCK_NAME, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as exc:
        return exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN)
    finally:
        os.close(handle)  # (closing it releases a shared lock taken here)
    return False


def _same_file(handle: int, path: Path) -> bool:
    try:
        return os.path.samestat(os.fstat(handle), os.stat(path))
    except OSError:
        return False


def write_all(root: Path, writes: list[PendingWrite]) -> None:
    """Stage every file next to its target, then rename them all into place, in the given order.

    Anything that fails while staging (a read-only file, a full disk, a file
    changed since it was read, Ctrl-C) leaves every file untouched and no staged
    copy behind. The renames run with SIGINT and SIGTERM held back, so an
    interruption lands after the last one: the tree is the old one or the new one,
    never a mix. Against SIGKILL, renames are atomic (each file is whole) and the
    order the caller gives puts the runtime package before the code importing it;
    the next run finishes the job and clears staged leftovers (*.ti-tmp).
    """
    staged: list[_Staged] = []
    created: list[Path] = []  # folders made for new files (outermost first)
    seen: dict[Path, str] = {}
    _fault_pause("before-writes")
    try:
        for write in writes:
            target = _real_target(root, write.path)
            if target in seen:
                # two paths, one file (a link): each was edited on its own, neither edit holds the other
                raise CheckoutError(f"{write.path} and {seen[target]} are one file (a link); edit the file itself")
            seen[target] = write.path
            previous, stamp = _current(target), _stamp(target)
            if write.expected is not None and previous != write.expected:
                raise ChangedMeanwhile(write.path)
            if write.data is None:
                staged.append(_Staged(write.path, target, None, previous, stamp))
                continue
            created += _make_folders(target.parent)
            staged.append(_Staged(write.path, target, _stage(target, write.data), previous, stamp))
            _fault_pause("staging")
        _fault_pause("before-renames")
    except BaseException:
        _drop_staged(staged)
        _remove_empty(created)
        raise
    try:
        with _signals_held():
            _rename_all(staged, created)
    except (KeyboardInterrupt, Interrupted) as exc:
        # held back during the renames and delivered when they were done: everything is written
        raise InterruptedAfterWrite(exc) from exc


@dataclass(frozen=True)
class _Staged:
    path: str  # as the run names it
    target: Path
    temp: Path | None  # the staged new content (None: the file is deleted)
    previous: bytes | None  # what the file held (None: it did not exist)
    stamp: tuple[int, int] | None  # its size and mtime_ns as it was read (None: it did not exist)

    def changed(self) -> bool:
        """Has the file changed since it was read (an editor's autosave, a `git pull`)?"""
        if _stamp(self.target) != self.stamp:
            return True
        return self.previous is not None and _current(self.target) != self.previous


class ChangedMeanwhile(CheckoutError):
    """A file changed after this run read it: what the run made of it would replace that edit."""

    def __init__(self, path: str):
        super().__init__(f"{path}: changed while this run was working on it; run again", run_kind=RunErrorKind.CHANGED)
        self.path = path

    def as_run_error(self) -> RunError:
        return RunError(self.run_kind, f"nothing written: {self}", path=self.path)


class PartlyWritten(CheckoutError):
    """A rename failed and putting the files renamed before it back failed too."""


def _rename_all(staged: list[_Staged], created: list[Path]) -> None:
    for done, item in enumerate(staged):
        if item.changed():  # checked at the last moment: the edit is kept, the run undone
            _drop_staged(staged[done:])
            _roll_back(staged[:done], created, ChangedMeanwhile(item.path))
            raise ChangedMeanwhile(item.path)
        try:
            if item.temp is None:
                _delete(item.target)
            else:
                os.replace(item.temp, item.target)
        except OSError as exc:
            _drop_staged(staged[done:])
            _roll_back(staged[:done], created, exc)
            raise
        _fault_pause("renames")
    for directory in {item.target.parent for item in staged if item.temp is None}:
        with contextlib.suppress(OSError):
            directory.rmdir()  # only when now empty


def _roll_back(renamed: list[_Staged], created: list[Path], cause: Exception) -> None:
    """Put back what the files renamed before a failed rename held: the run writes all or nothing
    (an immutable file, a bind mount or a full disk can refuse a rename half-way)."""
    failed: list[str] = []
    for item in reversed(renamed):
        try:
            if item.previous is None:
                with contextlib.suppress(FileNotFoundError):
                    item.target.unlink()
            else:
                item.target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(_stage(item.target, item.previous), item.target)
        except (OSError, CheckoutError):
            failed.append(item.path)
    _remove_empty(created)
    if failed:
        names = ", ".join(reversed(failed))
        raise PartlyWritten(
            f"partly written: writing stopped at a file that could not be replaced ({cause}), and {names} "
            "could not be put back as they were; run the same command again to finish the job"
        ) from cause


def _make_folders(folder: Path) -> list[Path]:
    """Create the folder (and missing parents); the ones created, outermost first."""
    missing = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for path in reversed(missing):
        path.mkdir(exist_ok=True)
    return list(reversed(missing))


def _remove_empty(created: list[Path]) -> None:
    for folder in reversed(created):
        with contextlib.suppress(OSError):
            folder.rmdir()  # only when empty


def _delete(target: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        target.unlink()
    if target.suffix == ".py":
        # the package's byte code goes with its source (and lets the folder go once empty)
        cache = target.parent / "__pycache__"
        if cache.is_symlink():
            return  # never delete through a link
        for compiled in cache.glob(f"{target.stem}.*.pyc"):
            with contextlib.suppress(OSError):
                compiled.unlink()
        with contextlib.suppress(OSError):
            cache.rmdir()


def _drop_staged(staged: list[_Staged]) -> None:
    for item in staged:
        if item.temp is not None:
            with contextlib.suppress(OSError):
                item.temp.unlink()


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Hold the stop signals back while the block runs (main thread; elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "pthread_sigmask"):
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _fault_pause(stage: str) -> None:
    """For the interruption tests only: say where we are and wait (off unless configured)."""
    if os.environ.get(PAUSE_AT_ENV) != stage:
        return
    sys.stderr.write(f"trace-instrument: paused at {stage}\n")
    sys.stderr.flush()
    time.sleep(float(os.environ.get(PAUSE_ENV, "0") or 0))


def _stamp(target: Path) -> tuple[int, int] | None:
    """A file's size and modification time in nanoseconds (None: it does not exist)."""
    try:
        status = target.stat()
    except FileNotFoundError:
        return None
    return status.st_size, status.st_mtime_ns


def _current(target: Path) -> bytes | None:
    try:
        return target.read_bytes()
    except FileNotFoundError:
        return None


def _real_target(root: Path, relative: str) -> Path:
    """Where the bytes go: a link inside the checkout is followed, so the link stays a link. A path
    that leads out of the checkout, through a link to the file or to a folder on the way, is refused."""
    target = root / relative
    try:
        resolved = target.resolve()
    except (OSError, RuntimeError) as exc:  # a loop of links
        raise CheckoutError(f"{relative}: cannot be followed ({exc}); refusing to write it") from None
    if not resolved.is_relative_to(root):
        how = "is a link to" if target.is_symlink() else "leads through a link to"
        raise CheckoutError(f"{relative}: {how} {resolved}, outside the checkout; refusing to write it")
    return resolved if target.is_symlink() else target


def is_staged(name: str) -> bool:
    """Is a file name one of a staged copy (`.NAME.XXXX.ti-tmp`, next to its target NAME)?"""
    return name.startswith(".") and name.endswith(TEMP_SUFFIX)


def staged_in(folder: Path) -> list[Path]:
    """The staged copies in a folder (a killed run's leftovers when no run is writing), sorted."""
    try:
        return sorted(p for p in folder.iterdir() if is_staged(p.name) and p.is_file() and not p.is_symlink())
    except OSError:
        return []


def _drop_leftovers(target: Path) -> None:
    """Staged copies a killed run left behind next to this target."""
    for leftover in target.parent.glob(f".{target.name}.*{TEMP_SUFFIX}"):
        with contextlib.suppress(OSError):
            leftover.unlink()


def _stage(target: Path, data: bytes) -> Path:
    mode = target.stat().st_mode & 0o7777 if target.exists() else 0o644
    if target.exists() and not mode & 0o222:
        # honour the read-only bit even for root: somebody set it on purpose
        raise CheckoutError(f"{target}: read-only; make it writable (chmod u+w) or leave its points out with --skip")
    _drop_leftovers(target)
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=TEMP_SUFFIX, dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            # no fsync: rename is atomic against a killed run, and a dozen fsyncs would
            # double the run's time; a machine crash is covered by re-running apply
            handle.write(data)
        os.chmod(name, mode)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(name)
        raise
    return Path(name)


# -- a run's writes ------------------------------------------------------------------------------


def other_changes(root: Path, writes: list[PendingWrite]) -> tuple[FileChange, ...]:
    """The texts before and after of writes that are not edits of target files, each with its kind."""
    changes = []
    for write in writes:
        target = root / write.path
        before = target.read_text(encoding="utf-8", errors="replace") if target.is_file() else None
        after = write.data.decode("utf-8", errors="replace") if write.data is not None else None
        if before != after:
            changes.append(FileChange(write.path, before, after, write.kind))
    return tuple(changes)


def commit(root: Path, result: RunResult, writes: list[PendingWrite], write: bool = True) -> RunResult:
    """Write the pending files in order (the caller holds the checkout lock); the result says what changed."""
    file_paths = {f.path for f in result.files}
    extra = other_changes(root, [w for w in writes if w.path not in file_paths])
    result = replace(result, other_changes=extra)
    if not write or not writes:
        return result
    try:
        write_all(root, writes)
    except PartlyWritten as exc:
        return replace(result, written=False, error=RunError(RunErrorKind.WRITE_FAILED, str(exc)))
    except ChangedMeanwhile as exc:
        return replace(result, written=False, error=exc.as_run_error())
    except (CheckoutError, OSError) as exc:
        return replace(result, written=False, error=RunError(RunErrorKind.WRITE_FAILED, f"nothing written: {exc}"))
    return replace(result, written=True)


@contextlib.contextmanager
def locked(root: Path, write: bool) -> Iterator[None]:
    """Hold the checkout lock for a run that writes (a dry run needs none)."""
    if not write:
        yield
        return
    with checkout_lock(root):
        yield


def unwritable(root: Path, relative: str) -> str | None:
    """Why a target file could not be written (None: it can), found before anything is written."""
    target = root / relative
    try:
        target = _real_target(root, relative)
        mode = target.stat().st_mode
    except CheckoutError as exc:
        return str(exc)
    except OSError:
        return None  # a new file: its folder is checked when it is staged
    if not mode & 0o222:
        return f"{relative}: read-only; make it writable (chmod u+w) or leave its points out with --skip"
    if not os.access(target.parent, os.W_OK):
        return f"{relative}: its folder is not writable"
    return None


def unwritable_folder(root: Path, relative: str) -> str | None:
    """Why files could not be created in the checkout's folder `relative` (None: they can): the
    nearest folder of it that exists is read-only (its bit honoured even for root, as a file's is)."""
    folder = root / relative
    while not folder.exists() and folder != root:
        folder = folder.parent
    try:
        mode = folder.stat().st_mode
    except OSError:
        return None  # staging says what is wrong, and nothing is written
    if mode & 0o222 and os.access(folder, os.W_OK):
        return None
    where = folder.relative_to(root).as_posix() if folder != root else "."
    return f"{where}/: read-only, and {relative}/ goes in it; make it writable (chmod u+w {folder})"
