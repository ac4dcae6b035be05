"""Which files belong to which training run, so that figures of two runs are never added up.

A trace folder reused by a second run, or two runs' folders given together, hold files of
different runs side by side, often with the same job id (outside DLC every run's is
``ENV_NOTFOUND_DLC_JOB_ID``). The rows themselves say what belongs together:

- sample files that hold rows of the same prompt (uid) are one run: a uid is a uuid4 drawn by the
  trainer, so two runs never share one (placeholder uids link nothing); the rows of a sample, and
  a prompt's rows and its trajectories', are chained in ``transitions_all``, so its file changes
  are the links;
- a trajectory file belongs to the run whose sample files hold its prompts;
- a file that no uid links (only placeholder ids, or trajectories whose prompts no sample file
  holds) joins the one run whose time span overlaps its own (and, for a sample file, that has its
  job id); when none does, such files that overlap each other make a run of their own; when
  several do, the file is left out and said so;
- progress lines carry no time and no id: a progress file belongs to the run when it is the only
  one under that folder (else it is left out and said so); a status file belongs to the run of the
  sample file of the same process.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from trace_instrument.traces.backend import Backend
from trace_instrument.traces.discover import Inputs
from trace_instrument.traces.model import FileKind, MultipleRunsError, Run, Skipped, SourceFile


@dataclass(frozen=True)
class RunPartition:
    """The runs found, and the files that could be given to none of them (with the reason)."""

    runs: tuple[Run, ...]
    left_out: tuple[Skipped, ...]


@dataclass
class _Group:
    """A run being assembled: its files and what its rows say."""

    files: set[int] = field(default_factory=set)
    job_ids: set[str] = field(default_factory=set)
    first_ms: int | None = None
    last_ms: int | None = None
    steps: set[int] = field(default_factory=set)
    sample_rows: int = 0
    trajectories: int = 0

    def add_span(self, first: int | None, last: int | None) -> None:
        if first is not None:
            self.first_ms = first if self.first_ms is None else min(self.first_ms, first)
        if last is not None:
            self.last_ms = last if self.last_ms is None else max(self.last_ms, last)

    def overlaps(self, first: int | None, last: int | None) -> bool:
        if None in (first, last, self.first_ms, self.last_ms):
            return False
        assert first is not None and last is not None and self.first_ms is not None and self.last_ms is not None
        return first <= self.last_ms and self.first_ms <= last


@dataclass
class _Node:
    """One sample or trajectory file with its span."""

    file_id: int
    job_ids: set[str]
    first_ms: int | None
    last_ms: int | None
    steps: set[int]
    rows: int
    trajectories: int = 0


class _UnionFind:
    def __init__(self, items: Iterable[int]) -> None:
        self.parent = {i: i for i in items}

    def find(self, item: int) -> int:
        root = item
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[item] != root:
            self.parent[item], item = root, self.parent[item]
        return root

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def partition_runs(backend: Backend, inputs: Inputs) -> RunPartition:
    """Group the loaded files into runs (see the module's docstring for the rules)."""
    samples = _sample_nodes(backend)
    linked = {int(f) for (f,) in backend.rows("linked_files")}
    union = _UnionFind(samples)
    for prev_file, file_id in backend.rows("run_links"):
        union.union(int(prev_file), int(file_id))
    groups: dict[int, _Group] = {}
    for node in samples.values():
        if node.file_id in linked:
            _join(groups.setdefault(union.find(node.file_id), _Group()), node)
    left_out: list[Skipped] = []
    trajectories = _trajectory_nodes(backend)
    owners = _trajectory_owners(backend, union)
    orphans: list[_Node] = [n for n in samples.values() if n.file_id not in linked]
    for node in trajectories.values():
        owner_runs = sorted(owners.get(node.file_id, set()))
        if len(owner_runs) == 1:
            _join(groups[owner_runs[0]], node)
        elif owner_runs:
            reason = f"its prompts belong to {len(owner_runs)} different runs"
            left_out.append(_left_out(inputs, node.file_id, reason))
        else:
            orphans.append(node)
    left_out += _place_orphans(inputs, groups, orphans, set(samples))
    return _with_side_files(inputs, _named_runs(inputs, groups), left_out)


def _sample_nodes(backend: Backend) -> dict[int, _Node]:
    nodes: dict[int, _Node] = {}
    for file_id, job_id, first, last, lo, hi, rows in backend.rows("run_nodes"):
        node = nodes.setdefault(int(file_id), _Node(int(file_id), set(), None, None, set(), 0))
        node.job_ids.add(str(job_id))
        node.first_ms = _min(node.first_ms, first)
        node.last_ms = _max(node.last_ms, last)
        node.steps |= {int(s) for s in (lo, hi) if s is not None}
        node.rows += int(rows)
    return nodes


def _trajectory_nodes(backend: Backend) -> dict[int, _Node]:
    return {
        int(f): _Node(int(f), set(), _int(first), _int(last), {int(s) for s in (lo, hi) if s is not None}, 0, int(n))
        for f, first, last, lo, hi, n in backend.rows("run_trajectory_spans")
    }


def _trajectory_owners(backend: Backend, union: _UnionFind) -> dict[int, set[int]]:
    """Trajectory file -> the runs (their root sample files) that hold rows of its prompts."""
    owners: dict[int, set[int]] = {}
    for trajectory_file, sample_file in backend.rows("run_trajectory_links"):
        owners.setdefault(int(trajectory_file), set()).add(union.find(int(sample_file)))
    return owners


def _join(group: _Group, node: _Node) -> None:
    group.files.add(node.file_id)
    group.job_ids |= node.job_ids
    group.add_span(node.first_ms, node.last_ms)
    group.steps |= node.steps
    group.sample_rows += node.rows
    group.trajectories += node.trajectories


def _place_orphans(
    inputs: Inputs, groups: dict[int, _Group], orphans: list[_Node], sample_files: set[int]
) -> list[Skipped]:
    """Files no uid links: into the one overlapping run, else runs of their own, else left out."""
    left_out: list[Skipped] = []
    linked_runs = list(groups.values())
    alone: list[_Node] = []
    for node in sorted(orphans, key=lambda n: (n.first_ms is None, n.first_ms or 0, n.file_id)):
        is_sample = node.file_id in sample_files
        matches = [
            g
            for g in linked_runs
            if g.overlaps(node.first_ms, node.last_ms) and (not is_sample or node.job_ids <= g.job_ids)
        ]
        if len(matches) == 1:
            _join(matches[0], node)
        elif matches:
            reason = f"no sample id links it to a run, and the time spans of {len(matches)} runs overlap its own"
            left_out.append(_left_out(inputs, node.file_id, reason))
        else:
            alone.append(node)
    for node in alone:
        match = next((g for key, g in groups.items() if key < 0 and g.overlaps(node.first_ms, node.last_ms)), None)
        if match is None:
            match = groups.setdefault(-1 - node.file_id, _Group())
        _join(match, node)
    return left_out


def _named_runs(inputs: Inputs, groups: dict[int, _Group]) -> list[tuple[Run, _Group]]:
    files = {f.file_id: f for f in inputs.files}
    named: list[tuple[Run, _Group]] = []
    seen: dict[str, int] = {}
    for group in sorted(groups.values(), key=lambda g: (g.first_ms is None, g.first_ms or 0, min(g.files))):
        run_id = _run_id(group, files)
        seen[run_id] = seen.get(run_id, 0) + 1
        if seen[run_id] > 1:
            run_id = f"{run_id}-{seen[run_id]}"
        hosts = sorted({host for f in group.files if (host := files[f].host)})
        steps = (min(group.steps), max(group.steps)) if group.steps else None
        run = Run(
            run_id,
            tuple(sorted(group.job_ids)),
            group.first_ms,
            group.last_ms,
            tuple(hosts),
            steps,
            tuple(sorted(group.files)),
            group.sample_rows,
            group.trajectories,
        )
        named.append((run, group))
    return named


def _run_id(group: _Group, files: dict[int, SourceFile]) -> str:
    members = sorted(group.files)
    samples = [f for f in members if files[f].kind is FileKind.SAMPLE]
    first = files[(samples or members)[0]]
    stamp = "unknown-time"
    if group.first_ms is not None:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(group.first_ms / 1000))
    who = f"{first.host}-pid{first.pid}" if first.host else f"pid{first.pid}" if first.pid else Path(first.path).stem
    return f"{stamp}-{who}"


def _with_side_files(inputs: Inputs, named: list[tuple[Run, _Group]], left_out: list[Skipped]) -> RunPartition:
    """Progress and status files given to the run they can be proved to belong to."""
    by_file = {f: run.run_id for run, group in named for f in group.files}
    extra: dict[str, list[int]] = {run.run_id: [] for run, _ in named}
    files = {f.file_id: f for f in inputs.files}
    for source in inputs.files:
        if source.kind not in (FileKind.PROGRESS, FileKind.STATUS):
            continue
        owner = _side_owner(source, named, by_file, files)
        if isinstance(owner, str):
            extra[owner].append(source.file_id)
        elif owner is not None:
            left_out.append(owner)
    runs = tuple(
        Run(**{**run.__dict__, "file_ids": tuple(sorted((*run.file_ids, *extra[run.run_id])))}) for run, _ in named
    )
    return RunPartition(runs, tuple(_merge(left_out)))


def _side_owner(
    source: SourceFile, named: list[tuple[Run, _Group]], by_file: dict[int, str], files: dict[int, SourceFile]
) -> str | Skipped | None:
    if len(named) == 1:
        return named[0][0].run_id
    if not named:
        return None
    if source.kind is FileKind.STATUS:
        for file_id, run_id in by_file.items():
            other = files[file_id]
            if other.kind is FileKind.SAMPLE and (other.root, other.host, other.pid) == (
                source.root,
                source.host,
                source.pid,
            ):
                return run_id
    under = {by_file[f.file_id] for f in files.values() if f.root == source.root and f.file_id in by_file}
    if len(under) == 1:
        return under.pop()
    what = "progress lines carry no time" if source.kind is FileKind.PROGRESS else "no sample file of its process"
    return _left_out_source(source, f"its folder holds {len(under)} runs and {what}")


def _left_out(inputs: Inputs, file_id: int, reason: str) -> Skipped:
    source = next(f for f in inputs.files if f.file_id == file_id)
    return _left_out_source(source, reason)


def _left_out_source(source: SourceFile, reason: str) -> Skipped:
    return Skipped(f"{source.kind.value} file in no run: {reason}", 1, (source.path,))


def _merge(left_out: list[Skipped]) -> list[Skipped]:
    merged: dict[str, Skipped] = {}
    for item in left_out:
        old = merged.get(item.reason)
        merged[item.reason] = (
            item if old is None else Skipped(item.reason, old.count + item.count, (old.examples + item.examples)[:3])
        )
    return list(merged.values())


def choose_run(partition: RunPartition, chosen: str | None) -> Run | None:
    """The run to analyse: the only one, or the one ``chosen`` names by run id or job id.

    Raises MultipleRunsError when the inputs hold several runs and ``chosen`` picks none of them.
    """
    runs = partition.runs
    if chosen is None:
        if len(runs) > 1:
            raise MultipleRunsError(runs)
        return runs[0] if runs else None
    by_id = [r for r in runs if r.run_id == chosen]
    by_job = [r for r in runs if chosen in r.job_ids]
    if len(by_id) == 1:
        return by_id[0]
    if len(by_job) == 1:
        return by_job[0]
    raise MultipleRunsError(runs, chosen)


def restrict(inputs: Inputs, run: Run | None) -> Inputs:
    """The inputs of one run only (all of them when there is no run to name)."""
    if run is None:
        return inputs
    keep = set(run.file_ids)
    return Inputs(tuple(f for f in inputs.files if f.file_id in keep), inputs.torn, inputs.skipped)


def _int(value: object) -> int | None:
    return None if value is None else int(value)  # type: ignore[call-overload]


def _min(a: int | None, b: object) -> int | None:
    value = _int(b)
    return value if a is None else a if value is None else min(a, value)


def _max(a: int | None, b: object) -> int | None:
    value = _int(b)
    return value if a is None else a if value is None else max(a, value)


@dataclass(frozen=True)
class RunSelection:
    """The run chosen among the inputs: its files, and what could be given to no run."""

    run: Run | None
    inputs: Inputs
    left_out: tuple[Skipped, ...]
    runs_found: int


def select_run(backend: Backend, inputs: Inputs, chosen: str | None) -> RunSelection:
    """Partition the loaded inputs into runs, pick one (``chosen``: a run id or job id) and point the views at it.

    Raises MultipleRunsError when there are several runs and ``chosen`` names none of them.
    """
    partition = partition_runs(backend, inputs)
    run = choose_run(partition, chosen)
    backend.select_run(run.file_ids if run is not None and len(partition.runs) > 1 else None)
    return RunSelection(run, restrict(inputs, run), partition.left_out, len(partition.runs))
