"""Parse the progress logs (``progress/{YYYYMMDD-HH}.log``): bare lines without timestamps.

Order is all they carry: files are read in name order (the hour) under each
folder, lines in file order. The step-window lines (``Step N rollout|train
started|finished``) give each step's order; ``gen throughput (token/s): X``
belongs to the step whose ``rollout finished`` line came last before it.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from trace_instrument.traces.discover import file_marks
from trace_instrument.traces.model import SourceFile

_STEP_WINDOW = re.compile(r"^Step (\d+) (rollout|train) (started|finished)$")
_BANNER = re.compile(r"^=+ (?:Epoch (\d+), consumed (\d+) batches, )?Step (\d+) =+$")
_THROUGHPUT = re.compile(r"^gen throughput \(token/s\):\s*([\d.]+)$")
_COMPLETED = re.compile(r"^Task (.+)/([^/]*) is completed, score=(.*) status=Finished$")
_TOTAL = re.compile(r"^Total training steps: (\d+)$")
_CONFIG = re.compile(r"^'(\w+)': (\d+),?$")


@dataclass
class StepLine:
    seq: int
    step: int
    phase: str  # "rollout" or "train"
    boundary: str  # "started" or "finished"


@dataclass
class ProgressInfo:
    """What the progress lines say."""

    lines: int = 0
    total_training_steps: int | None = None
    config: dict[str, int] = field(default_factory=dict)
    disagg: bool = False
    banner_steps: list[int] = field(default_factory=list)
    step_lines: list[StepLine] = field(default_factory=list)
    throughput: dict[int, float] = field(default_factory=dict)
    completed: int = 0
    completed_scores: list[float] = field(default_factory=list)
    undecodable: int = 0


@dataclass
class _FileParse:
    """One file's complete lines parsed (seqs counted from its first line), and where they end."""

    info: ProgressInfo
    raw_lines: int  # lines counted in seq, undecodable ones included
    last_finished: int | None  # the step of the last `rollout finished` line (throughput goes to it)
    offset: int  # bytes up to and including the last newline
    marks: tuple[int, bytes, bytes]


class ProgressReader:
    """Parses progress files; kept across reads (``analyze --follow``), a file that only grew is read
    on from the end of its last complete line, and what it gives equals a parse of the whole file.

    A line without its newline yet is parsed on each read and never kept: it may still grow.
    """

    def __init__(self) -> None:
        self._parsed: dict[str, _FileParse] = {}

    def read(self, files: list[SourceFile]) -> ProgressInfo:
        info = ProgressInfo()
        seq = 0
        kept: dict[str, _FileParse] = {}  # a file not read this time keeps its parse for a later read
        for source in sorted(files, key=lambda f: (f.root, Path(f.path).name, f.path)):
            try:
                parse, tail = self._read_file(source.path)
            except OSError:
                self._parsed.pop(source.path, None)
                continue
            kept[source.path] = parse
            _merge(info, parse.info, seq)
            seq += parse.raw_lines
            last_finished = parse.last_finished
            for raw in tail.splitlines():
                seq += 1
                last_finished = _parse_raw(info, raw, seq, last_finished)
        self._parsed.update(kept)
        return info

    def _read_file(self, path: str) -> tuple[_FileParse, bytes]:
        """The file's parse brought up to date, and the bytes after its last newline."""
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            parse = self._parsed.get(path)
            if parse is None or size < parse.offset or file_marks(path, parse.offset) != parse.marks:
                parse = _FileParse(ProgressInfo(), 0, None, 0, file_marks(path, 0))
            handle.seek(parse.offset)
            data = handle.read()
        cut = data.rfind(b"\n") + 1
        complete, tail = data[:cut], data[cut:]
        if complete:
            for raw in complete.splitlines():
                parse.raw_lines += 1
                parse.last_finished = _parse_raw(parse.info, raw, parse.raw_lines, parse.last_finished)
            parse.offset += cut
            parse.marks = file_marks(path, parse.offset)
        return parse, tail


def repeated_step_line(info: ProgressInfo) -> str | None:
    """Why the progress lines of one folder are not one run's, or None.

    Within a run each kind of window line (`Step N rollout started`, ...) never goes back to an
    earlier step: it comes once a step, or several times in a row where a step repeats its inner
    loop (the v1 trainer's `_step_once`, `parameter_sync_step` times a step), and in the disagg
    mode each kind still goes up though the kinds interleave; each step's banner comes once. Two
    runs, or a run and its restart, logging into one folder go back: the lines cannot be told
    apart. (Two runs logging at the same time, step for step, are not caught.)"""
    last: dict[tuple[str, str], int] = {}
    for line in info.step_lines:
        key = (line.phase, line.boundary)
        before = last.get(key)
        if before is not None and line.step < before:
            return f"`Step {line.step} {line.phase} {line.boundary}` comes after `Step {before} {line.phase} {line.boundary}`"
        last[key] = line.step
    banners: set[int] = set()
    for step in info.banner_steps:
        if step in banners:
            return f"step {step}'s banner line comes twice"
        banners.add(step)
    return None


def _parse_raw(info: ProgressInfo, raw: bytes, seq: int, last_finished: int | None) -> int | None:
    try:
        line = raw.decode("utf-8").rstrip("\r")
    except UnicodeDecodeError:
        info.undecodable += 1
        return last_finished
    info.lines += 1
    return _parse_line(info, line, seq, last_finished)


def _merge(info: ProgressInfo, part: ProgressInfo, seq_base: int) -> None:
    """Add one file's parse to ``info`` as if its lines had been parsed into it in order, their seqs
    after ``seq_base``: counts add up, lists are appended, a later value of a setting wins."""
    info.lines += part.lines
    info.undecodable += part.undecodable
    info.completed += part.completed
    info.completed_scores.extend(part.completed_scores)
    if part.total_training_steps is not None:
        info.total_training_steps = part.total_training_steps
    info.config.update(part.config)
    info.disagg = info.disagg or part.disagg
    info.banner_steps.extend(part.banner_steps)
    info.step_lines.extend(
        StepLine(line.seq + seq_base, line.step, line.phase, line.boundary) for line in part.step_lines
    )
    info.throughput.update(part.throughput)


def _parse_line(info: ProgressInfo, line: str, seq: int, last_finished: int | None) -> int | None:
    if line.startswith("Task "):
        match = _COMPLETED.match(line)
        if match:
            info.completed += 1
            try:
                info.completed_scores.append(float(match.group(3)))
            except ValueError:
                pass
        return last_finished
    if line.startswith("disagg: "):
        info.disagg = True
        return last_finished
    if line.startswith("Step "):
        match = _STEP_WINDOW.match(line)
        if match:
            step, phase, boundary = int(match.group(1)), match.group(2), match.group(3)
            info.step_lines.append(StepLine(seq, step, phase, boundary))
            if phase == "rollout" and boundary == "finished":
                return step
        return last_finished
    if line.startswith("gen throughput"):
        match = _THROUGHPUT.match(line)
        if match and last_finished is not None:
            info.throughput[last_finished] = float(match.group(1))
        return last_finished
    if line.startswith("="):
        match = _BANNER.match(line)
        if match:
            info.banner_steps.append(int(match.group(3)))
            if match.group(1) is None:
                info.disagg = True
        return last_finished
    match = _TOTAL.match(line)
    if match:
        info.total_training_steps = int(match.group(1))
        return last_finished
    match = _CONFIG.match(line)
    if match:
        info.config[match.group(1)] = int(match.group(2))
    return last_finished


def parse_status(files: list[SourceFile]) -> tuple[dict[str, dict[str, int]] | None, list[str]]:
    """Sum the runtime's own loss counters over the status files; (None, []) when there are none.

    Returns the sums and the files that could not be read (for the skipped list).
    """
    if not files:
        return None, []
    lost: dict[str, dict[str, int]] = {"sample_flow": {}, "progress": {}, "trajectory": {}}
    bad: list[str] = []
    for source in files:
        try:
            data = json.loads(Path(source.path).read_text(encoding="utf-8"))
            counts = data["lost"]
            for output, reasons in counts.items():
                target = lost.setdefault(str(output), {})
                for reason, n in reasons.items():
                    target[str(reason)] = target.get(str(reason), 0) + int(n)
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            bad.append(source.path)
    return lost, bad
