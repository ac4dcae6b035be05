"""``analyze --follow``: one run's analysis kept up to date while the run writes its traces.

Each refresh first looks at every growing file (sample CSVs and trajectory JSONL, which only
ever grow) once, through a handle it keeps open: the bytes up to its last newline are what this
refresh reads, the rest is its torn last line, reported as such (a last line of NUL bytes, which
the runtime never writes, as the damage a fresh ``analyze`` counts). The first refresh loads a copy of
those bytes of each file (DuckDB reads a file to wherever it ends while it reads, and a live run
appends all along); each later one reads the complete lines from the recorded offset to the new
last newline, so lines appended while a refresh reads are read by the next, once. Files new since
(a rotated trajectory file, a process that started) are read as appended, and so is a finished file
compressed in place (``X`` replaced by ``X.gz``): the decompressed bytes past the offset read.
The progress logs are read on by a ``ProgressReader`` kept across refreshes. Anything else (a
file that shrank, vanished or was rewritten, a gzip file that changed or appeared, a first
trajectory file in a run that had none) loads everything again, and the refresh says why. DuckDB
only; no printing, no exiting.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO

from trace_instrument.traces.backend import LoadReport, merged, per_file, torn_report
from trace_instrument.traces.discover import TAIL_BYTES, Inputs, TornTail, file_marks, torn_line
from trace_instrument.traces.duckdb_backend import DuckDBBackend
from trace_instrument.traces.gunzip import gunzip
from trace_instrument.traces.model import Analysis, FileKind, Skipped, SourceFile, TraceInputError
from trace_instrument.traces.options import DEFAULT_OPTIONS, Options
from trace_instrument.traces.progress import ProgressReader
from trace_instrument.traces.runs import select_run
from trace_instrument.traces.salvage import NOT_JSON_LINE, byte_problem
from trace_instrument.traces.store import discover_inputs, trace_folders
from trace_instrument.traces.views import compute

GROWING = (FileKind.SAMPLE, FileKind.TRAJECTORY)  # append-only files: read on from where the last read ended
BLOCK = 1 << 20
LOOKS = 3  # times a refresh looks at the files again when one vanished while it looked (gzip at work)


@dataclass(frozen=True)
class Refresh:
    """One refresh: the analysis, the bytes of trace files it read, and whether it loaded everything."""

    analysis: Analysis
    bytes_read: int
    full: bool
    reason: str | None = None  # why everything was loaded again (None: the first load, or appended lines only)
    # each growing plain file's path and its size as this refresh saw it: the analysis holds its
    # lines up to its last newline within that size, and reports the rest as its torn last line
    seen: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class _Look:
    """One growing plain file as a refresh saw it, through a handle open until the refresh ends."""

    handle: BinaryIO
    size: int
    end: int  # the bytes up to its last newline: read up to here, no further
    tail: bytes  # the last bytes of its torn last line (none when the file ends with a newline)
    stat: tuple[int, int, int]  # its size, inode and modification time (ns)


def _complete_bytes(handle: BinaryIO, size: int) -> int:
    """How many of the first ``size`` bytes of ``handle`` end with a newline (a line being written is not read yet)."""
    end = size
    while end > 0:
        start = max(0, end - TAIL_BYTES)  # a line is short: most files are looked at in one small read
        handle.seek(start)
        cut = handle.read(end - start).rfind(b"\n")
        if cut >= 0:
            return start + cut + 1
        end = start
    return 0


def _look(path: str, stack: ExitStack) -> _Look:
    handle: BinaryIO = stack.enter_context(open(path, "rb"))  # noqa: SIM115 - open until the refresh ends
    stat = os.fstat(handle.fileno())
    size = stat.st_size
    end = _complete_bytes(handle, size)
    handle.seek(max(end, size - TAIL_BYTES))
    return _Look(handle, size, end, handle.read(size - handle.tell()), (size, stat.st_ino, stat.st_mtime_ns))


def _stat(path: str) -> tuple[int, int, int]:
    """A file's size, inode and modification time (ns): a finished file that changed has others."""
    stat = os.stat(path)
    return stat.st_size, stat.st_ino, stat.st_mtime_ns


def _copy_range(source: BinaryIO, start: int, end: int, target: Path) -> None:
    """Bytes ``start`` to ``end`` of ``source`` into ``target``: in the kernel where it can (the
    first load copies the whole run: 0.9 s for the 2M run's 700 MB, 4.2 s through Python)."""
    with open(target, "wb") as out:
        at = start
        if hasattr(os, "copy_file_range"):
            try:
                while at < end and (done := os.copy_file_range(source.fileno(), out.fileno(), end - at, at)):
                    at += done
            except OSError:
                pass  # another file system, or none that copies: the rest through Python
        source.seek(at)
        out.seek(at - start)
        while at < end:
            chunk = source.read(min(BLOCK, end - at))
            if not chunk:
                break
            out.write(chunk)
            at += len(chunk)


def _appendable(f: SourceFile) -> bool:
    return f.kind in GROWING and not f.path.endswith(".gz")


@dataclass(frozen=True)
class _Rotation:
    """A growing file compressed in place: ``X.gz`` beside the ``X`` read up to ``plain``'s offset."""

    plain: str
    copy: Path  # the decompressed bytes
    end: int  # of them, up to the last newline


class Follower:
    """An analysis of the run under ``roots`` that each ``refresh()`` brings up to date."""

    def __init__(self, roots: list[Path], options: Options = DEFAULT_OPTIONS) -> None:
        if options.engine != "duckdb":
            raise TraceInputError("--follow reads with DuckDB only")
        self.roots = trace_folders(roots)
        self.options = options
        self._work = Path(tempfile.mkdtemp(prefix="trace-follow-"))
        self._backend: DuckDBBackend | None = None
        self._inputs = Inputs((), (), ())
        self._ids: dict[str, int] = {}  # path -> file_id in the loaded tables
        self._read: dict[str, int] = {}  # path -> bytes read of an appendable file (its complete lines)
        self._seen: dict[str, tuple[int, bytes, bytes]] = {}  # path -> file_marks of what was read
        # path -> size, inode and modification time (ns) when last looked at
        self._sizes: dict[str, tuple[int, int, int]] = {}
        self._rows = LoadReport((), 0)  # what loading the complete lines skipped (torn lines apart)
        self._damaged = LoadReport((), 0)  # the last lines of NUL bytes, as the last refresh looked
        self._progress = ProgressReader()
        # the inputs' stamps at the last refresh, and its analysis
        self._last: tuple[tuple[tuple[str, int, int, int, int], ...], Refresh] | None = None

    def close(self) -> None:
        if self._backend is not None:
            self._backend.close()
            self._backend = None
        shutil.rmtree(self._work, ignore_errors=True)

    def __enter__(self) -> Follower:  # noqa: PYI034 - typing.Self needs Python 3.11
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def refresh(self) -> Refresh:
        """Read what is new and compute every view; raises TraceInputError as ``analyze`` does."""
        for attempt in range(LOOKS):
            found = discover_inputs(self.roots)
            stamps = _stamps(found)
            if self._last is not None and stamps == self._last[0]:
                # no file changed (size, inode, modification or change time), none came or went
                return Refresh(self._last[1].analysis, 0, False, None, self._last[1].seen)
            with ExitStack() as stack:
                try:
                    looks = {f.path: _look(f.path, stack) for f in found.files if _appendable(f)}
                except FileNotFoundError:
                    if attempt + 1 < LOOKS:
                        continue  # renamed or compressed since it was found: look again
                    raise
                refresh = self._refresh(found, looks)
            self._last = (stamps, refresh)
            return refresh
        raise AssertionError("unreachable")  # pragma: no cover - the last attempt returns or raises

    def _refresh(self, found: Inputs, looks: dict[str, _Look]) -> Refresh:
        seen = tuple(sorted((path, look.size) for path, look in looks.items()))
        rotations: dict[str, _Rotation] = {}
        reason = None if self._backend is None else self._why_reload(found, looks, rotations)
        if self._backend is None or reason is not None:
            for rotation in rotations.values():  # decompressed before the reason to reload was found
                rotation.copy.unlink(missing_ok=True)
            self._load_all(found, looks)
            self._damaged = _damaged_tails(found.files, looks)
            return Refresh(self._compute_with(self._inputs), self._total(found, looks), True, reason, seen)
        read = self._append(found, looks, rotations)
        self._damaged = _damaged_tails(found.files, looks)
        return Refresh(self._compute_with(self._inputs), read, False, None, seen)

    # -- deciding --------------------------------------------------------------------------------

    def _why_reload(self, found: Inputs, looks: dict[str, _Look], rotations: dict[str, _Rotation]) -> str | None:
        present = {f.path for f in found.files}
        for f in found.files:
            plain = f.path.removesuffix(".gz")
            if f.path not in self._ids and plain != f.path and plain in self._read and plain not in present:
                rotated = self._rotated(f, rotations)
                if rotated is not None:
                    return rotated
        gone = [path for path in self._ids if path not in present and path + ".gz" not in rotations]
        if gone:
            return f"{gone[0]} is gone"
        trajectories = any(self._kind(path) is FileKind.TRAJECTORY for path in self._ids)
        for f in found.files:
            if f.path in rotations:
                continue
            if f.path not in self._ids:
                if f.kind in GROWING and f.path.endswith(".gz"):
                    return f"{f.path} is a new gzip file"
                if f.kind is FileKind.TRAJECTORY and not trajectories:
                    return f"{f.path} is the run's first trajectory file"
            elif _appendable(f):
                look, read = looks[f.path], self._read[f.path]
                if look.size < read or file_marks(look.handle, read) != self._seen[f.path]:
                    return f"{f.path} was rewritten"
            elif f.kind in GROWING and _stat(f.path) != self._sizes[f.path]:
                return f"{f.path} changed"
        return None

    def _rotated(self, f: SourceFile, rotations: dict[str, _Rotation]) -> str | None:
        """Take ``f`` (``X.gz``, ``X`` gone) as ``X`` compressed: None, or why it is not."""
        plain, read = f.path[:-3], self._read[f.path[:-3]]
        copy = self._work / f"rotated-{self._ids[plain]}{Path(plain).suffix}"
        unpacked = gunzip(f.path, copy)
        with open(copy, "rb") as handle:
            if not unpacked.complete or unpacked.size < read or file_marks(handle, read) != self._seen[plain]:
                return f"{plain} is gone ({f.path} does not hold what was read of it)"
            end = _complete_bytes(handle, unpacked.size)
        rotations[f.path] = _Rotation(plain, copy, end)
        return None

    def _kind(self, path: str) -> FileKind | None:
        return next((f.kind for f in self._inputs.files if f.path == path), None)

    # -- reading ---------------------------------------------------------------------------------

    def _load_all(self, found: Inputs, looks: dict[str, _Look]) -> None:
        """Load every file: each growing plain one from a copy of its complete lines as looked at."""
        if self._backend is not None:
            self._backend.close()
        spill = self._work / "spill"
        shutil.rmtree(spill, ignore_errors=True)
        spill.mkdir()
        self._backend = DuckDBBackend(None, spill, self.options.memory_limit, self.options.threads)
        copies: dict[str, SourceFile] = {}
        files = []
        for f in found.files:
            if f.path in looks:
                copy = self._work / f"read-{f.file_id}{Path(f.path).suffix}"
                _copy_range(looks[f.path].handle, 0, looks[f.path].end, copy)
                copies[str(copy)] = f
                files.append(replace(f, path=str(copy)))
            else:
                files.append(f)
        paths = {f.file_id: f.path for f in found.files}
        torn = tuple(t for t in found.torn if paths[t.file_id] not in looks)
        try:
            report = self._backend.load_rows(Inputs(tuple(files), torn, found.skipped))
        finally:
            for name in copies:
                Path(name).unlink(missing_ok=True)
        self._backend.rename_files({f.file_id: f.path for f in copies.values()})
        self._rows = _renamed(report, {copy: (f.path, _zero) for copy, f in copies.items()})
        self._ids = {f.path: f.file_id for f in found.files}
        self._read, self._sizes, self._seen = {}, {}, {}
        for f in found.files:
            look = looks.get(f.path)
            self._sizes[f.path] = look.stat if look else _stat(f.path)
            if look is not None:
                self._read[f.path] = look.end
                self._seen[f.path] = file_marks(look.handle, look.end)
        self._inputs = Inputs(found.files, _torn_tails(found, looks, found.files), found.skipped)

    def _total(self, found: Inputs, looks: dict[str, _Look]) -> int:
        return sum(looks[f.path].end if f.path in looks else self._sizes[f.path][0] for f in found.files)

    def _append(self, found: Inputs, looks: dict[str, _Look], rotations: dict[str, _Rotation]) -> int:
        """Read the new complete lines and the new files; returns how many bytes that was."""
        assert self._backend is not None
        next_id = max(self._ids.values(), default=-1) + 1
        files: list[SourceFile] = []
        new_files: list[SourceFile] = []
        tails: list[SourceFile] = []
        # a tail copy -> the file it continues, and how many lines of it come before the copy
        starts: dict[str, tuple[str, Callable[[], int]]] = {}
        read = 0
        for f in found.files:
            rotation = rotations.get(f.path)
            if rotation is not None:
                self._rotate(rotation, f.path)
            elif f.path not in self._ids:
                self._ids[f.path], next_id = next_id, next_id + 1
                new_files.append(replace(f, file_id=self._ids[f.path]))
            own = replace(f, file_id=self._ids[f.path])
            files.append(own)
            look = looks.get(f.path)
            if rotation is not None:
                with open(rotation.copy, "rb") as handle:
                    start = self._read.pop(rotation.plain)
                    read += self._tail(own, handle, start, rotation.end, tails, starts, _lines_of(rotation.copy, start))
                self._sizes[f.path] = _stat(f.path)
                rotation.copy.unlink(missing_ok=True)
                continue
            if look is None:
                self._sizes[f.path] = _stat(f.path)
                continue
            start, end = self._read.get(f.path, 0), look.end
            read += self._tail(own, look.handle, start, end, tails, starts, _lines_of(f.path, start))
            self._sizes[f.path] = look.stat
            self._read[f.path] = max(start, end)
            self._seen[f.path] = file_marks(look.handle, self._read[f.path])
        if tails or new_files:
            try:
                appended = self._backend.append(tuple(new_files), tuple(tails))
            finally:
                for tail in tails:
                    Path(tail.path).unlink(missing_ok=True)
            self._rows = merged(self._rows, _renamed(appended, starts))
        ids = {f.file_id: self._ids[f.path] for f in found.files}
        own_files = tuple(files)
        torn = _torn_tails(found, looks, own_files, ids)
        self._inputs = Inputs(own_files, torn, found.skipped)
        return read

    def _tail(
        self,
        own: SourceFile,
        source: BinaryIO,
        start: int,
        end: int,
        tails: list[SourceFile],
        starts: dict[str, tuple[str, Callable[[], int]]],
        lines_before: Callable[[], int],
    ) -> int:
        """A copy of bytes ``start`` to ``end`` of ``source`` among the ``tails`` to append; their count."""
        if end <= start:
            return 0
        copy = self._work / f"appended-{own.file_id}-{end}{Path(own.path.removesuffix('.gz')).suffix}"
        _copy_range(source, start, end, copy)
        tails.append(replace(own, path=str(copy)))
        starts[str(copy)] = (own.path, lines_before)
        return end - start

    def _rotate(self, rotation: _Rotation, gz_path: str) -> None:
        """``X.gz`` takes ``X``'s place: its file id, its name in the tables and the reports."""
        assert self._backend is not None
        file_id = self._ids.pop(rotation.plain)
        self._ids[gz_path] = file_id
        self._seen.pop(rotation.plain, None)
        self._sizes.pop(rotation.plain, None)
        self._backend.rename_files({file_id: gz_path})
        self._rows = _renamed(self._rows, {rotation.plain: (gz_path, _zero)})

    def _compute_with(self, inputs: Inputs) -> Analysis:
        assert self._backend is not None
        torn = torn_report(inputs)
        report = merged(merged(self._rows, self._damaged), torn)
        selection = select_run(self._backend, inputs, self.options.run)
        return compute(self._backend, selection, report, self.options, self._progress)


def _zero() -> int:
    return 0


def _torn_tails(
    found: Inputs, looks: dict[str, _Look], files: tuple[SourceFile, ...], ids: dict[int, int] | None = None
) -> tuple[TornTail, ...]:
    """The torn last lines: a growing plain file's as it was looked at, any other's as found."""
    ids = ids or {f.file_id: f.file_id for f in found.files}
    paths = {f.file_id: f.path for f in found.files}
    torn = [replace(t, file_id=ids[t.file_id]) for t in found.torn if paths[t.file_id] not in looks]
    for f in files:
        look = looks.get(f.path)
        line = torn_line(f, look.tail) if look is not None else None
        if line is not None:
            torn.append(line)
    return tuple(sorted(torn, key=lambda t: t.file_id))


def _damaged_tails(files: tuple[SourceFile, ...], looks: dict[str, _Look]) -> LoadReport:
    """The last lines of NUL bytes (a crash or a full disk; ``torn_line`` leaves them out) reported
    as a fresh ``analyze`` reports them: a CSV one as the salvaged row it is, a trajectory one as a
    line that is not JSON, each at its line. They are not read: no such line makes a row, and one
    that a newline ends later is read then, with the lines appended."""
    found: dict[str, list[str]] = {}
    rejected: list[str] = []
    for f in files:
        look = looks.get(f.path)
        if look is None or not look.tail or look.tail.endswith(b"\n"):
            continue
        line = look.tail[look.tail.rfind(b"\n") + 1 :]
        if b"\0" not in line:
            continue
        reason = byte_problem(line.rstrip(b"\r")).value if f.kind is FileKind.SAMPLE else NOT_JSON_LINE
        found.setdefault(reason, []).append(f"{f.path}:{_lines_before(f.path, look.end) + 1}")
        if f.kind is FileKind.SAMPLE:
            rejected.append(f.path)
    skipped = tuple(
        Skipped(reason, len(where), tuple(where), per_file([w.rsplit(":", 1)[0] for w in where]))
        for reason, where in found.items()
    )
    return LoadReport(skipped, len(rejected), per_file(rejected))


def _stamps(found: Inputs) -> tuple[tuple[str, int, int, int, int], ...]:
    """Every input file's path, size, inode, modification and change times (ns), as the refresh
    found them. The change time is the kernel's own: ``cp -p``, ``rsync -a`` or ``touch -r`` set
    a copy's modification time back, never its change time."""
    stamps = []
    for f in found.files:
        try:
            stat = os.stat(f.path)
        except OSError:
            stamps.append((f.path, -1, -1, -1, -1))
            continue
        stamps.append((f.path, stat.st_size, stat.st_ino, stat.st_mtime_ns, stat.st_ctime_ns))
    return tuple(sorted(stamps))


def _lines_of(path: str | Path, offset: int) -> Callable[[], int]:
    """How many lines of ``path`` end before ``offset``, counted when asked (an example needs it)."""

    def count() -> int:
        return _lines_before(path, offset)

    return count


def _lines_before(path: str | Path, offset: int) -> int:
    """How many lines of ``path`` end before ``offset``."""
    count = 0
    with open(path, "rb") as handle:
        left = offset
        while left > 0:
            chunk = handle.read(min(BLOCK, left))
            if not chunk:
                break
            count += chunk.count(b"\n")
            left -= len(chunk)
    return count


def _renamed(report: LoadReport, starts: dict[str, tuple[str, Callable[[], int]]]) -> LoadReport:
    """The report of copied lines as a load of the whole files gives it: each copy's name replaced
    by its file's, and its line numbers counted from the file's first line."""
    names = {copy: original for copy, (original, _) in starts.items()}
    before: dict[str, int] = {}

    def rename(text: str) -> str:
        for copy, (original, lines_before) in starts.items():
            if not text.startswith(copy):
                continue
            rest = text[len(copy) :]
            if rest.startswith(":"):
                number, _, after = rest[1:].partition(" ")
                if number.isdigit():
                    if copy not in before:
                        before[copy] = lines_before()
                    return f"{original}:{int(number) + before[copy]}" + (f" {after}" if after else "")
            if rest and not rest.startswith((" ", ":")):
                continue  # another file whose name starts with this one's
            return original + rest
        return text

    skipped = tuple(
        Skipped(
            s.reason,
            s.count,
            tuple(rename(e) for e in s.examples),
            tuple((names.get(path, path), n) for path, n in s.per_file),
        )
        for s in report.skipped
    )
    rejected = tuple((names.get(path, path), n) for path, n in report.rejected_per_file)
    return LoadReport(skipped, report.rows_rejected, rejected)
