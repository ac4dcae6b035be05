"""Reading a damaged sample-flow CSV file row by row: every good row kept, every bad one counted at its line.

The engines read all sample files in one scan, which is what makes a large run fast; a damaged
file (a bare LF inside a CRLF file, a stray quote, random bytes, a row cut short) makes that scan
fail or refuse rows, and each engine describes that in its own terms. The loader then passes the
damaged files through :func:`salvage_csv`: one pass in Python that writes the good rows to a clean
copy, which the engine reads in place of the original, and counts each bad row at its line in the
original file. Both engines send the same files here, so they count the same rows the same way.
"""

from __future__ import annotations

import csv
import gzip
import io
import re
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from trace_instrument.formats import SAMPLE_COLUMNS
from trace_instrument.traces.backend import per_file
from trace_instrument.traces.events import TIMESTAMP_LIMIT
from trace_instrument.traces.gunzip import gunzip
from trace_instrument.traces.model import Skipped, SourceFile

COLUMNS = len(SAMPLE_COLUMNS)
TIMESTAMP = SAMPLE_COLUMNS.index("timestamp")
# A quoted field may hold line breaks; a quote never closed would otherwise swallow the rest of
# the file, so a record is given up after this many lines and read again from its next line.
MAX_RECORD_LINES = 64
EXAMPLES = 3
LINE_COUNT_THREADS = 4
LINE_COUNT_BLOCK = 4 * 2**20
NUL_TAIL_BYTES = 1 << 16
_INTEGER = re.compile(r"^-?[0-9]+$")  # ASCII digits: \d would take other scripts' digits, which no engine reads
_TIMESTAMPS = range(TIMESTAMP_LIMIT)  # what the order key keeps in order (events.TIMESTAMP_LIMIT)


def _is_timestamp(text: str) -> bool:
    return bool(_INTEGER.match(text)) and int(text) in _TIMESTAMPS


class RowProblem(str, Enum):
    """Why a CSV row was left out; the value is how the report names it."""

    TOO_FEW_COLUMNS = "CSV row with too few columns"
    TOO_MANY_COLUMNS = "CSV row with too many columns"
    NOT_UTF8 = "CSV row with bytes that are not UTF-8"
    NUL_BYTES = "CSV row with NUL bytes (a file cut by a crash or a full disk)"
    BAD_TIMESTAMP = "CSV row whose timestamp is not milliseconds since 1970 (digits, below 10^14)"
    BAD_QUOTING = "CSV row with a quote out of place"
    UNREADABLE_FILE = "sample file that cannot be read to its end (the rows before the damage are kept)"


# A gzip trajectory file that does not decompress to its end: its lines before the damage are read.
DAMAGED_TRAJECTORY_FILE = "trajectory file that cannot be read to its end (the lines before the damage are kept)"
# A trajectory line that does not parse as JSON (both engines and ``--follow`` name it so).
NOT_JSON_LINE = "trajectory line that is not JSON"


# what is wrong with a row's bytes, whatever its quotes
_BYTE_PROBLEMS = (RowProblem.NOT_UTF8, RowProblem.NUL_BYTES)


@dataclass
class Salvage:
    """What reading one damaged file found: the clean copy, and each problem's line numbers."""

    source: str
    clean_path: Path
    rows: int = 0
    lines: int = 0  # the lines of ``source`` read
    problems: dict[RowProblem, list[int]] = field(default_factory=dict)

    def add(self, problem: RowProblem, line: int) -> None:
        self.problems.setdefault(problem, []).append(line)


def read_paths(files: list[SourceFile], salvaged: dict[int, Salvage]) -> dict[int, str]:
    """The path each file is read from: a damaged file's clean copy in its place."""
    return {f.file_id: str(salvaged[f.file_id].clean_path) if f.file_id in salvaged else f.path for f in files}


def salvage_csv(source: str, clean_path: Path, torn_tail: str | None) -> Salvage:
    """Copy the good rows of ``source`` to ``clean_path`` (LF, minimal quoting) and count the bad ones.

    ``torn_tail`` is the file's last line when it does not end with a newline (the loader reports
    it as torn; it is neither copied nor counted here).
    """
    result = Salvage(source, clean_path)
    with open(clean_path, "w", encoding="utf-8", newline="") as out:
        writer = csv.writer(out, lineterminator="\n")
        try:
            plain, whole = _plain(source, clean_path)
            for fields in _good_rows(plain, result, torn_tail is not None):
                writer.writerow(fields)
                result.rows += 1
        except (OSError, EOFError, gzip.BadGzipFile):
            result.add(RowProblem.UNREADABLE_FILE, 0)
        else:
            if not whole:  # the damage is where the lines read end: the last of them is the last good one
                result.add(RowProblem.UNREADABLE_FILE, result.lines)
    Path(str(clean_path) + ".plain").unlink(missing_ok=True)
    return result


def byte_problem(line: bytes) -> RowProblem:
    """Why a CSV line holding NUL bytes is left out, as :func:`salvage_csv` names it: bytes that
    are not UTF-8 first, else the NUL bytes (``--follow`` reports a last line so without reading it)."""
    problem = _fields(line)
    return problem if problem in _BYTE_PROBLEMS else RowProblem.NUL_BYTES


def nul_tail(path: str) -> bool:
    """Whether the last line of a plain file holds NUL bytes (what a crash or a full disk leaves):
    Spark's CSV reader passes over such a line without a word, so it is read row by row."""
    if path.endswith(".gz"):
        return False
    with open(path, "rb") as f:
        f.seek(0, 2)
        f.seek(max(0, f.tell() - NUL_TAIL_BYTES))
        tail = f.read()
    return b"\0" in tail[tail.rstrip(b"\r\n").rfind(b"\n") + 1 :]


def _plain(source: str, clean_path: Path) -> tuple[str, bool]:
    """The file to read ``source``'s lines from, and whether it is whole: a gzip file decompressed
    as far as it goes, its cut last line left out (Python's gzip module drops the last block it
    read at a cut)."""
    if not source.endswith(".gz"):
        return source, True
    plain = Path(str(clean_path) + ".plain")
    whole = gunzip(source, plain).complete
    if not whole:
        _cut_at_last_newline(plain)
    return str(plain), whole


def _cut_at_last_newline(path: Path) -> int:
    """Cut ``path`` after its last newline (a damaged file's cut line is not a line); its lines."""
    data = path.read_bytes()
    kept = data[: data.rfind(b"\n") + 1]
    path.write_bytes(kept)
    return kept.count(b"\n")


def unpacked_trajectories(files: list[SourceFile], work: Path) -> tuple[dict[int, str], list[Skipped]]:
    """The path to read each trajectory file from (a ``.gz`` one decompressed into ``work``), and the
    files that do not decompress to their end: their lines before the damage are read, and each is
    counted once, at its last good line. Both engines read the same lines so."""
    read: dict[int, str] = {}
    damaged: list[str] = []
    for f in files:
        if not f.path.endswith(".gz"):
            read[f.file_id] = f.path
            continue
        plain = work / f"{f.file_id}.jsonl"
        if not gunzip(f.path, plain).complete:
            damaged.append(f"{f.path}:{_cut_at_last_newline(plain)} (the last line that decompressed)")
        read[f.file_id] = str(plain)
    if not damaged:
        return read, []
    paths = [example.rsplit(":", 1)[0] for example in damaged]
    return read, [Skipped(DAMAGED_TRAJECTORY_FILE, len(damaged), tuple(damaged), per_file(paths))]


def ended_lines(paths: list[str]) -> list[int | None]:
    """How many line feeds each file holds (a gzip file's, decompressed), or None for a file that
    cannot be read to its end: what a scan that reads every complete line has rows and refused
    lines for, together. Files are counted on a few threads (reading releases the interpreter)."""
    with ThreadPoolExecutor(min(LINE_COUNT_THREADS, max(len(paths), 1))) as pool:
        return list(pool.map(_ended_lines, paths))


def _ended_lines(path: str) -> int | None:
    opener = gzip.open if path.endswith(".gz") else open
    count = 0
    try:
        with opener(path, "rb") as f:
            while block := f.read(LINE_COUNT_BLOCK):
                count += block.count(b"\n")
    except (OSError, EOFError):  # a cut or corrupt gzip file: salvage.py reads what it can
        return None
    return count


def _physical_lines(source: str, result: Salvage) -> Iterator[tuple[int, bytes, bool]]:
    """(line number, bytes without the line break, whether it is the file's unterminated last line)."""
    opener = gzip.open if source.endswith(".gz") else open
    with opener(source, "rb") as f:
        for number, raw in enumerate(f, 1):
            result.lines = number
            ended = raw.endswith(b"\n")
            body = raw[:-1] if ended else raw
            yield number, body[:-1] if body.endswith(b"\r") else body, not ended


def _good_rows(source: str, result: Salvage, torn: bool) -> Iterator[list[str]]:
    """The fields of each good row; each bad line counted at its number.

    Lines are joined while a quoted field is open (at most MAX_RECORD_LINES). A joined record that
    does not make a good row costs its first line only: that line is judged alone, and the lines
    after it are read again, each as the start of a record.
    """
    lines = _physical_lines(source, result)
    again: deque[tuple[int, bytes, bool]] = deque()
    pending: list[tuple[int, bytes, bool]] = []
    while True:
        item = again.popleft() if again else next(lines, None)
        if item is None and not pending:
            return
        if item is not None:
            if item[2] and torn:
                continue  # the torn last line: reported by the loader, neither kept nor counted here
            pending.append(item)
            record = b"\n".join(body for _, body, _ in pending)
            if record.count(b'"') % 2 and len(pending) < MAX_RECORD_LINES:
                continue
            if record.count(b'"') % 2 == 0:
                fields = _fields(record)
                if isinstance(fields, list):
                    yield fields
                    pending = []
                    continue
                if fields is None or len(pending) == 1:
                    if fields is not None:
                        result.add(fields, pending[0][0])
                    pending = []
                    continue
        # the first line alone has an odd number of quotes: a row the runtime never writes
        first = pending[0]
        result.add(problem if (problem := _fields(first[1])) in _BYTE_PROBLEMS else RowProblem.BAD_QUOTING, first[0])
        again.extendleft(reversed(pending[1:]))
        pending = []


def _fields(record: bytes) -> list[str] | RowProblem | None:
    """The six fields of a good row, the problem of a bad one, None for a blank line."""
    if not record.strip():
        return None
    try:
        text = record.decode("utf-8")
    except UnicodeDecodeError:
        return RowProblem.NOT_UTF8
    if "\0" in text:
        return RowProblem.NUL_BYTES
    try:
        fields = next(csv.reader(io.StringIO(text), strict=True))
    except (csv.Error, StopIteration):
        return RowProblem.BAD_QUOTING
    if len(fields) < COLUMNS:
        return RowProblem.TOO_FEW_COLUMNS
    if len(fields) > COLUMNS:
        return RowProblem.TOO_MANY_COLUMNS
    if not _is_timestamp(fields[TIMESTAMP].strip()):
        return RowProblem.BAD_TIMESTAMP
    # written as the engines write the number (no leading zeros or spaces), which both read back alike
    fields[TIMESTAMP] = str(int(fields[TIMESTAMP].strip()))
    return fields


def skipped_rows(salvages: list[Salvage]) -> list[Skipped]:
    """The problems of every salvaged file, one entry per reason, examples as ``file:line``."""
    by_problem: dict[RowProblem, list[str]] = {}
    files: dict[RowProblem, list[str]] = {}  # one path per skipped row
    for s in sorted(salvages, key=lambda s: s.source):  # the order files were salvaged in varies by engine
        for problem, lines in s.problems.items():
            # the first examples of each file: a run among several shows its own (LoadReport.of_files)
            where = [_where(s, problem, line) for line in lines[:EXAMPLES]]
            by_problem.setdefault(problem, []).extend(where)
            files.setdefault(problem, []).extend([s.source] * len(lines))
    return [
        Skipped(problem.value, len(files[problem]), tuple(where), per_file(files[problem]))
        for problem, where in sorted(by_problem.items(), key=lambda item: item[0].value)
    ]


def _where(s: Salvage, problem: RowProblem, line: int) -> str:
    if problem is RowProblem.UNREADABLE_FILE:
        last = f"ends after line {line}" if line else "cannot be read"
        return f"{s.source}:{line} ({last}: {s.rows:,} rows read)" if line else f"{s.source} ({last})"
    return s.source if line == 0 else f"{s.source}:{line}"


def refused_per_file(salvages: list[Salvage]) -> tuple[tuple[str, int], ...]:
    """Rows left out, by file path (an unreadable rest of a file counts as one: its row count is not known)."""
    return tuple(sorted((s.source, n) for s in salvages if (n := sum(len(v) for v in s.problems.values()))))
