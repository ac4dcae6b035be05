"""Find the trace files under one or more folders, and the torn last lines of a run still being written."""

from __future__ import annotations

import csv
import gzip
import io
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from trace_instrument.traces.model import FileKind, Skipped, SourceFile

CACHE_DIR_NAME = ".trace-instrument-cache"
_SAMPLE_NAME = re.compile(r"^(?P<host>.+)-pid(?P<pid>\d+)\.csv(?:\.gz)?$")
_TRAJECTORY_NAME = re.compile(r"^trajectory_(?P<pid>\d+)_.*\.jsonl(?:\.gz)?$")
_STATUS_NAME = re.compile(r"^(?P<host>.+)-pid(?P<pid>\d+)\.json$")
TAIL_BYTES = 1 << 16


@dataclass(frozen=True)
class TornTail:
    """The last line of a file that does not end with a newline: cut off while it was written."""

    file_id: int
    text: str
    fields: tuple[str, ...]  # the CSV fields of the torn line (sample files)


@dataclass(frozen=True)
class Inputs:
    files: tuple[SourceFile, ...]
    torn: tuple[TornTail, ...]
    skipped: tuple[Skipped, ...]

    def of_kind(self, kind: FileKind) -> list[SourceFile]:
        return [f for f in self.files if f.kind == kind]


_SUFFIXES = {
    FileKind.SAMPLE: (".csv", ".csv.gz"),
    FileKind.PROGRESS: (".log",),
    FileKind.TRAJECTORY: (".jsonl", ".jsonl.gz"),
    FileKind.STATUS: (".json",),
}


def _kind(path: Path) -> FileKind | None:
    """The kind of a file by its folder and name (None: not an input)."""
    try:
        kind = FileKind(path.parent.name)
    except ValueError:
        return None
    return kind if path.name.endswith(_SUFFIXES[kind]) else None


def _walk(root: Path) -> list[Path]:
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d != CACHE_DIR_NAME)
        for name in sorted(filenames):
            found.append(Path(dirpath) / name)
    return found


def _being_compressed(path: Path, kind: FileKind, names: set[Path]) -> bool:
    """Whether ``path`` is the gzip copy of a growing file that is still there (``gzip`` at work)."""
    return kind in (FileKind.SAMPLE, FileKind.TRAJECTORY) and path.suffix == ".gz" and path.with_suffix("") in names


def _fingerprint(path: Path) -> tuple[str, int, bytes, bytes]:
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(4096)
        f.seek(max(0, size - 4096))
        tail = f.read(4096)
    return path.name, size, head, tail


def discover(roots: list[Path]) -> Inputs:
    """Every trace file under ``roots`` (recursively), identical copies found twice left out."""
    files: list[SourceFile] = []
    seen: dict[tuple[str, int, bytes, bytes], str] = {}
    duplicates: list[str] = []
    for root in roots:
        walked = _walk(root)
        names = set(walked)
        for path in walked:
            kind = _kind(path)
            if kind is None:
                continue
            if _being_compressed(path, kind, names):
                # gzip writes X.gz beside X and removes X once done: the rows are X's, read once
                duplicates.append(f"{path} (being compressed from {path.with_suffix('')})")
                continue
            try:
                key = _fingerprint(path)
            except OSError:
                continue
            if key in seen and kind is not FileKind.PROGRESS:
                duplicates.append(f"{path} (same as {seen[key]})")
                continue
            seen[key] = str(path)
            files.append(_source(len(files), path, kind, root))
    skipped = [Skipped("duplicate file", len(duplicates), tuple(duplicates[:3]))] if duplicates else []
    torn = [
        t for f in files if f.kind in (FileKind.SAMPLE, FileKind.TRAJECTORY) for t in [_torn_tail(f)] if t is not None
    ]
    return Inputs(tuple(files), tuple(torn), tuple(skipped))


def _source(file_id: int, path: Path, kind: FileKind, root: Path) -> SourceFile:
    host: str | None = None
    pid: int | None = None
    pattern = {FileKind.SAMPLE: _SAMPLE_NAME, FileKind.TRAJECTORY: _TRAJECTORY_NAME, FileKind.STATUS: _STATUS_NAME}.get(
        kind
    )
    match = pattern.match(path.name) if pattern else None
    if match:
        host = match.groupdict().get("host")
        pid = int(match.group("pid"))
    return SourceFile(file_id, str(path), kind, str(root), host, pid)


def _last_bytes(path: str) -> bytes:
    if path.endswith(".gz"):
        data = b""
        with gzip.open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                data = (data + chunk)[-TAIL_BYTES:]
        return data
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - TAIL_BYTES))
        return f.read()


def _torn_tail(source: SourceFile) -> TornTail | None:
    try:
        tail = _last_bytes(source.path)
    except (OSError, EOFError):
        return None
    return torn_line(source, tail)


def torn_line(source: SourceFile, tail: bytes) -> TornTail | None:
    """The torn last line of ``source`` from its last bytes ``tail`` (None: they end with a newline,
    or the line holds NUL bytes, which the runtime never writes: a file cut by a crash or a full
    disk, read as the damage it is)."""
    if not tail or tail.endswith(b"\n") or b"\0" in tail[tail.rfind(b"\n") + 1 :]:
        return None
    text = tail[tail.rfind(b"\n") + 1 :].decode("utf-8", "replace")
    fields: tuple[str, ...] = ()
    if source.kind is FileKind.SAMPLE:
        try:
            fields = tuple(next(csv.reader(io.StringIO(text.rstrip("\r"))), []))
        except csv.Error:
            fields = ()
    return TornTail(source.file_id, text, fields)


MARK = 1 << 16  # bytes at the start of what was read of a growing file, and at its end


def file_marks(path: str | BinaryIO, offset: int) -> tuple[int, bytes, bytes]:
    """What tells that the ``offset`` bytes read of ``path`` (a path, or a file open for reading)
    are still there: the offset and the first and last MARK bytes of them. A file rewritten with
    other bytes at either end is caught (an append-only log never changes them); a rewrite that
    keeps both ends, and the length read, is not."""
    if not isinstance(path, str):
        return _marks(path, offset)
    with open(path, "rb") as handle:
        return _marks(handle, offset)


def _marks(handle: BinaryIO, offset: int) -> tuple[int, bytes, bytes]:
    handle.seek(0)
    head = handle.read(min(MARK, offset))
    handle.seek(max(0, offset - MARK))
    tail = handle.read(min(MARK, offset))
    return offset, head, tail


def locate_line(path: str, needle: str) -> int | None:
    """1-based number of the first line of ``path`` containing ``needle`` (for example messages)."""
    target = needle.encode("utf-8", "surrogateescape")
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            for number, line in enumerate(f, 1):
                if target in line:
                    return number
    except (OSError, EOFError):
        return None
    return None
