"""``analyze --follow``: one run's analysis kept up to date while the run writes its traces.

The first refresh loads every file; each later one reads only the complete lines appended since
(sample CSVs and trajectory JSONL only ever grow) and the files new since (a rotated trajectory
file, a process that started), then computes the views again; the progress logs are read on by a
``ProgressReader`` kept across refreshes. Anything else (a file that shrank,
vanished or was rewritten, a gzip file that changed or appeared, a first trajectory file in a run
that had none) loads everything again, and the refresh says why. A line still being written waits
for the next refresh (until then it is reported as torn). DuckDB only; no printing, no exiting.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from trace_instrument.traces.backend import LoadReport, merged, torn_report
from trace_instrument.traces.discover import Inputs, file_marks
from trace_instrument.traces.duckdb_backend import DuckDBBackend
from trace_instrument.traces.model import Analysis, FileKind, Skipped, SourceFile, TraceInputError
from trace_instrument.traces.options import DEFAULT_OPTIONS, Options
from trace_instrument.traces.progress import ProgressReader
from trace_instrument.traces.runs import select_run
from trace_instrument.traces.store import discover_inputs, trace_folders
from trace_instrument.traces.views import compute

GROWING = (FileKind.SAMPLE, FileKind.TRAJECTORY)  # append-only files: read on from where the last read ended
BLOCK = 1 << 20


@dataclass(frozen=True)
class Refresh:
    """One refresh: the analysis, the bytes of trace files it read, and whether it loaded everything."""

    analysis: Analysis
    bytes_read: int
    full: bool
    reason: str | None = None  # why everything was loaded again (None: the first load, or appended lines only)


def _complete_bytes(path: str, size: int) -> int:
    """How many bytes of ``path`` end with its last newline (a line being written is not read yet)."""
    with open(path, "rb") as handle:
        end = size
        while end > 0:
            start = max(0, end - BLOCK)
            handle.seek(start)
            cut = handle.read(end - start).rfind(b"\n")
            if cut >= 0:
                return start + cut + 1
            end = start
    return 0


def _copy_range(path: str, start: int, end: int, target: Path) -> None:
    with open(path, "rb") as source, open(target, "wb") as out:
        source.seek(start)
        left = end - start
        while left > 0:
            chunk = source.read(min(BLOCK, left))
            if not chunk:
                break
            out.write(chunk)
            left -= len(chunk)


def _appendable(f: SourceFile) -> bool:
    return f.kind in GROWING and not f.path.endswith(".gz")


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
        self._read: dict[str, int] = {}  # path -> bytes read of an appendable file
        self._seen: dict[str, tuple[int, bytes, bytes]] = {}  # path -> file_marks of what was read
        self._sizes: dict[str, int] = {}  # path -> size when last looked at
        self._rows = LoadReport((), 0)  # what loading the complete lines skipped (torn lines apart)
        self._progress = ProgressReader()
        # the inputs' stamps at the last refresh, and its analysis
        self._last: tuple[tuple[tuple[str, int, int, int, int], ...], Analysis] | None = None

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
        found = discover_inputs(self.roots)
        stamps = _stamps(found)
        if self._last is not None and stamps == self._last[0]:
            # no file changed (size, inode, modification or change time), none came or went
            return Refresh(self._last[1], 0, False)
        reason = None if self._backend is None else self._why_reload(found)
        if self._backend is None or reason is not None:
            refresh = Refresh(self._compute_with(self._load_all(found)), self._total(found), True, reason)
        else:
            read = self._append(found)
            refresh = Refresh(self._compute_with(self._inputs), read, False)
        self._last = (stamps, refresh.analysis)
        return refresh

    # -- deciding --------------------------------------------------------------------------------

    def _why_reload(self, found: Inputs) -> str | None:
        present = {f.path for f in found.files}
        gone = [path for path in self._ids if path not in present]
        if gone:
            return f"{gone[0]} is gone"
        trajectories = any(self._kind(path) is FileKind.TRAJECTORY for path in self._ids)
        for f in found.files:
            size = os.stat(f.path).st_size
            if f.path not in self._ids:
                if f.kind in GROWING and f.path.endswith(".gz"):
                    return f"{f.path} is a new gzip file"
                if f.kind is FileKind.TRAJECTORY and not trajectories:
                    return f"{f.path} is the run's first trajectory file"
            elif _appendable(f):
                if size < self._read[f.path] or file_marks(f.path, self._read[f.path]) != self._seen[f.path]:
                    return f"{f.path} was rewritten"
            elif f.kind in GROWING and size != self._sizes[f.path]:
                return f"{f.path} changed"
        return None

    def _kind(self, path: str) -> FileKind | None:
        return next((f.kind for f in self._inputs.files if f.path == path), None)

    # -- reading ---------------------------------------------------------------------------------

    def _load_all(self, found: Inputs) -> Inputs:
        if self._backend is not None:
            self._backend.close()
        spill = self._work / "spill"
        shutil.rmtree(spill, ignore_errors=True)
        spill.mkdir()
        self._backend = DuckDBBackend(None, spill, self.options.memory_limit, self.options.threads)
        self._rows = self._backend.load_rows(found)
        self._ids = {f.path: f.file_id for f in found.files}
        self._read, self._sizes, self._seen = {}, {}, {}
        for f in found.files:
            self._sizes[f.path] = os.stat(f.path).st_size
            if _appendable(f):
                self._read[f.path] = _complete_bytes(f.path, self._sizes[f.path])
                self._seen[f.path] = file_marks(f.path, self._read[f.path])
        self._inputs = found
        return found

    def _total(self, found: Inputs) -> int:
        return sum(self._sizes.get(f.path, 0) for f in found.files)

    def _append(self, found: Inputs) -> int:
        """Read the new complete lines and the new files; returns how many bytes that was."""
        assert self._backend is not None
        next_id = max(self._ids.values(), default=-1) + 1
        files: list[SourceFile] = []
        new_files: list[SourceFile] = []
        tails: list[SourceFile] = []
        starts: dict[str, tuple[str, int]] = {}  # a tail copy -> its file and the offset it starts at
        read = 0
        for f in found.files:
            if f.path not in self._ids:
                self._ids[f.path], next_id = next_id, next_id + 1
                new_files.append(replace(f, file_id=self._ids[f.path]))
            own = replace(f, file_id=self._ids[f.path])
            files.append(own)
            size = self._sizes[f.path] = os.stat(f.path).st_size
            if not _appendable(f):
                continue
            start, end = self._read.get(f.path, 0), _complete_bytes(f.path, size)
            if end > start:
                copy = self._work / f"appended-{own.file_id}-{end}{Path(f.path).suffix}"
                _copy_range(f.path, start, end, copy)
                tails.append(replace(own, path=str(copy)))
                starts[str(copy)] = (f.path, start)
                read += end - start
            self._read[f.path] = max(start, end)
            self._seen[f.path] = file_marks(f.path, self._read[f.path])
        if tails or new_files:
            appended = self._backend.append(tuple(new_files), tuple(tails))
            self._rows = merged(self._rows, _renamed(appended, starts))
            for tail in tails:
                Path(tail.path).unlink(missing_ok=True)
        ids = {f.file_id: self._ids[f.path] for f in found.files}
        torn = tuple(replace(t, file_id=ids[t.file_id]) for t in found.torn)
        self._inputs = Inputs(tuple(files), torn, found.skipped)
        return read

    def _compute_with(self, inputs: Inputs) -> Analysis:
        assert self._backend is not None
        torn = torn_report(inputs)
        report = merged(self._rows, torn)
        selection = select_run(self._backend, inputs, self.options.run)
        return compute(self._backend, selection, report, self.options, self._progress)


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


def _lines_before(path: str, offset: int) -> int:
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


def _renamed(report: LoadReport, starts: dict[str, tuple[str, int]]) -> LoadReport:
    """The report of the appended lines as a load of the whole files gives it: each tail copy's
    name replaced by its file's, and its line numbers counted from the file's first line."""
    names = {tail: original for tail, (original, _) in starts.items()}
    before: dict[str, int] = {}

    def rename(text: str) -> str:
        for tail, (original, start) in starts.items():
            if not text.startswith(tail):
                continue
            rest = text[len(tail) :]
            if rest.startswith(":"):
                number, _, after = rest[1:].partition(" ")
                if number.isdigit():
                    if tail not in before:
                        before[tail] = _lines_before(original, start)
                    return f"{original}:{int(number) + before[tail]}" + (f" {after}" if after else "")
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
