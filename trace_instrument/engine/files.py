"""Reading target files safely and writing a run's changes all-or-nothing."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

LOCK_NAME = ".trace-instrument.lock"
TEMP_SUFFIX = ".ti-tmp"
# fault injection for the kill-during-write test: seconds to wait between renames
PAUSE_ENV = "TRACE_INSTRUMENT_PAUSE_BETWEEN_RENAMES"


class CheckoutError(Exception):
    """The target is not something we can work on (exit code 2)."""


@dataclass(frozen=True)
class SourceFile:
    path: str  # relative, posix
    absolute: Path
    data: bytes


def checkout_root(path: str | os.PathLike) -> Path:
    root = Path(path).resolve()
    if not root.is_dir():
        raise CheckoutError(f"{path}: no such directory")
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
        raise CheckoutError(f"{relative}: is a link to {resolved}, outside the checkout; refusing to touch it")
    if not resolved.is_file():
        raise CheckoutError(f"{relative}: not a regular file")
    return SourceFile(relative, absolute, resolved.read_bytes())


@dataclass(frozen=True)
class PendingWrite:
    path: str
    data: bytes | None  # None: delete the file
    expected: bytes | None = None  # the bytes the run read; the write is refused if the file changed since


@contextlib.contextmanager
def checkout_lock(root: Path) -> Iterator[None]:
    """An exclusive lock so two runs on one checkout cannot interleave.

    The lock file is removed by its holder only, while holding it; a run that
    locked a file another run had just removed tries again on the new one.
    """
    lock_path = root / LOCK_NAME
    for _attempt in range(3):
        handle = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(handle)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise CheckoutError(f"{root}: another trace-instrument run holds {LOCK_NAME}") from None
            raise
        if _same_file(handle, lock_path):
            break
        os.close(handle)  # we locked a file the previous holder unlinked
    else:
        raise CheckoutError(f"{root}: could not take {LOCK_NAME}")
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            lock_path.unlink()
        os.close(handle)


def _same_file(handle: int, path: Path) -> bool:
    try:
        return os.path.samestat(os.fstat(handle), os.stat(path))
    except OSError:
        return False


def write_all(root: Path, writes: list[PendingWrite]) -> None:
    """Stage every file next to its target, then rename them all into place.

    Anything that fails while staging (a read-only file, a full disk, a file
    changed since it was read) leaves every file untouched. Renames are atomic,
    so a run killed at any moment leaves each file either original or complete;
    the next run finishes the job and clears staged leftovers (*.ti-tmp).
    """
    staged: list[tuple[Path, Path | None]] = []
    try:
        for write in writes:
            target = _real_target(root, write.path)
            if write.expected is not None and _current(target) != write.expected:
                raise CheckoutError(f"{write.path}: changed while this run was working on it; run again")
            if write.data is None:
                staged.append((target, None))
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            staged.append((target, _stage(target, write.data)))
    except BaseException:
        for _target, temp in staged:
            if temp is not None:
                with contextlib.suppress(OSError):
                    temp.unlink()
        raise
    pause = float(os.environ.get(PAUSE_ENV, "0") or 0)
    for done, (target, temp) in enumerate(staged):
        try:
            if temp is None:
                with contextlib.suppress(FileNotFoundError):
                    target.unlink()
            else:
                os.replace(temp, target)
        except OSError:
            for _target, leftover in staged[done:]:
                if leftover is not None:
                    with contextlib.suppress(OSError):
                        leftover.unlink()
            raise
        if pause:
            time.sleep(pause)
    for directory in {target.parent for target, temp in staged if temp is None}:
        with contextlib.suppress(OSError):
            directory.rmdir()  # only when now empty


def _current(target: Path) -> bytes | None:
    try:
        return target.read_bytes()
    except FileNotFoundError:
        return None


def _real_target(root: Path, relative: str) -> Path:
    """Where the bytes go: a link inside the checkout is followed, so the link stays a link."""
    target = root / relative
    if target.is_symlink():
        resolved = target.resolve()
        if not resolved.is_relative_to(root):
            raise CheckoutError(f"{relative}: is a link to {resolved}, outside the checkout; refusing to write it")
        return resolved
    return target


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
