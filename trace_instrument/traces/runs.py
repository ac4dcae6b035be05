"""Which files belong to which training run, so that figures of two runs are never added up.

A trace folder reused by a second run, or two runs' folders given together, hold files of
different runs side by side, often with the same job id (outside DLC every run's is
``ENV_NOTFOUND_DLC_JOB_ID``). The rows themselves say what belongs together:

- sample files that hold rows of the same prompt (uid) are one run: a uid is a uuid4 drawn by the
  trainer, so two runs never share one (placeholder uids link nothing); the rows of a sample, and
  a prompt's rows and its trajectories', are chained in ``transitions_all``, so its file changes
  are the links;
- a trajectory file belongs to the run whose sample files hold its prompts;
- a run is a group that holds the trainer's rows (uids drawn, training stages); a group without
  them (a worker's files, whose prompts are linked only through the trainer's rows; a file that
  no uid links: placeholder ids only, or trajectories whose prompts no sample file holds) joins
  the one run whose time span overlaps its own and that has its job ids, and is left out, said
  so, when none or several do;
- with no trainer's rows among the inputs at all (a worker node's folder, trajectories only),
  the groups that overlap in time under the same job ids, or hold files of the same process,
  are one run;
- progress lines carry no time and no id: a progress file belongs to the run when it is the only
  one under that folder (else it is left out and said so), and the folder's lines are one run's
  (views.run_progress: a window line that goes back to an earlier step, or a banner that comes
  twice, leaves them out); a status file belongs to the run of the sample file of the same process.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from trace_instrument.traces.backend import Backend
from trace_instrument.traces.discover import Inputs
from trace_instrument.traces.model import FileKind, MultipleRunsError, Run, Skipped, SourceFile, TraceInputError


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
    trainer: bool = False  # holds rows only the trainer writes (uids drawn, training stages)
    processes: set[tuple[str, int]] = field(default_factory=set)  # (folder, pid) of its trajectory files
    starts: dict[int, int | None] = field(default_factory=dict)  # file -> its first row's time

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
    trainer: bool = False
    process: tuple[str, int] | None = None


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
    """Group the loaded files into runs (see the module's docstring for the rules).

    Raises TraceInputError when a sample file holds rows of two runs (see ``reused_files.sql``):
    its rows cannot be told apart, and any figure of it would add up both.
    """
    _refuse_reused_files(backend, inputs)
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
    owners = _trajectory_owners(backend, union)
    floating = [_alone(n) for n in samples.values() if n.file_id not in linked]
    for node in _trajectory_nodes(backend, inputs).values():
        owner_runs = sorted(owners.get(node.file_id, set()))
        if len(owner_runs) == 1:
            _join(groups[owner_runs[0]], node)
        elif owner_runs:
            reason = f"its prompts belong to {len(owner_runs)} different runs"
            left_out.append(_left_out(inputs, node.file_id, reason))
        else:
            floating.append(_alone(node))
    trainers = [g for g in groups.values() if g.trainer]
    floating += [g for g in groups.values() if not g.trainer]
    if trainers:
        left_out += _attach(inputs, trainers, floating)
        runs = trainers
    else:
        runs = _merge_overlapping(floating)
    return _with_side_files(inputs, _named_runs(inputs, runs), left_out)


def _refuse_reused_files(backend: Backend, inputs: Inputs) -> None:
    reused = backend.rows("reused_files")
    if not reused:
        return
    paths = {f.file_id: f.path for f in inputs.files}
    found = "; ".join(
        f"{paths[int(f)]}: uids for step {int(step)} were drawn again after those of step {int(later)}"
        for f, step, later in reused[:3]
    )
    raise TraceInputError(
        f"{len(reused)} sample file(s) hold rows of two runs ({found}): a second run appended to a file of "
        "the same host name and pid (a restarted container gets the same pids), and its rows cannot be told "
        "apart from the first run's; give a trace folder per run (VERL_TRACE_DIR)"
    )


def _alone(node: _Node) -> _Group:
    """A group of this one file."""
    return _Group(
        files={node.file_id},
        job_ids=set(node.job_ids),
        first_ms=node.first_ms,
        last_ms=node.last_ms,
        steps=set(node.steps),
        sample_rows=node.rows,
        trajectories=node.trajectories,
        trainer=node.trainer,
        processes={node.process} if node.process is not None else set(),
        starts={node.file_id: node.first_ms},
    )


def _attach(inputs: Inputs, trainers: list[_Group], floating: list[_Group]) -> list[Skipped]:
    """Files with no trainer of their own (a worker's, placeholder rows only, trajectories whose
    prompts no sample file holds) join the one run whose time span overlaps theirs and that has
    their job ids; otherwise they are left out, with the reason."""
    left_out: list[Skipped] = []
    # matched against the trainers' own spans, before anything joins them: the result never depends on
    # the order of the files
    candidates = [
        [t for t in trainers if t.overlaps(group.first_ms, group.last_ms) and group.job_ids <= t.job_ids]
        for group in floating
    ]
    for group, matches in zip(floating, candidates):
        if len(matches) == 1:
            _merge(matches[0], group)
            continue
        what = "no sample id links it to a training process"
        reason = (
            f"{what}, and the time spans of {len(matches)} runs overlap its own"
            if matches
            else f"{what}, and no run of its job id overlaps its time span"
        )
        left_out += [_left_out(inputs, f, reason) for f in sorted(group.files)]
    return left_out


def _merge_overlapping(floating: list[_Group]) -> list[_Group]:
    """With no training process among the inputs (a worker node's folder, trajectories only), the
    groups whose time spans overlap, or that hold files of the same process, are one run."""
    union = _UnionFind(range(len(floating)))
    for i, a in enumerate(floating):
        for j in range(i + 1, len(floating)):
            b = floating[j]
            if (a.overlaps(b.first_ms, b.last_ms) and a.job_ids == b.job_ids) or a.processes & b.processes:
                union.union(i, j)
    merged: dict[int, _Group] = {}
    for i, group in enumerate(floating):
        _merge(merged.setdefault(union.find(i), _Group()), group)
    return list(merged.values())


def _merge(target: _Group, group: _Group) -> None:
    target.files |= group.files
    target.job_ids |= group.job_ids
    target.add_span(group.first_ms, group.last_ms)
    target.steps |= group.steps
    target.sample_rows += group.sample_rows
    target.trajectories += group.trajectories
    target.trainer = target.trainer or group.trainer
    target.processes |= group.processes
    target.starts.update(group.starts)


def _sample_nodes(backend: Backend) -> dict[int, _Node]:
    nodes: dict[int, _Node] = {}
    for file_id, job_id, first, last, lo, hi, rows, trainer in backend.rows("run_nodes"):
        node = nodes.setdefault(int(file_id), _Node(int(file_id), set(), None, None, set(), 0))
        node.trainer = node.trainer or bool(trainer)
        node.job_ids.add(str(job_id))
        node.first_ms = _min(node.first_ms, first)
        node.last_ms = _max(node.last_ms, last)
        node.steps |= {int(s) for s in (lo, hi) if s is not None}
        node.rows += int(rows)
    return nodes


def _trajectory_nodes(backend: Backend, inputs: Inputs) -> dict[int, _Node]:
    files = {f.file_id: f for f in inputs.files}
    nodes = {}
    for f, first, last, lo, hi, n in backend.rows("run_trajectory_spans"):
        source = files[int(f)]
        steps = {int(s) for s in (lo, hi) if s is not None}
        process = (source.root, source.pid) if source.pid is not None else None
        nodes[int(f)] = _Node(int(f), set(), _int(first), _int(last), steps, 0, int(n), process=process)
    return nodes


def _trajectory_owners(backend: Backend, union: _UnionFind) -> dict[int, set[int]]:
    """Trajectory file -> the runs (their root sample files) that hold rows of its prompts."""
    owners: dict[int, set[int]] = {}
    for trajectory_file, sample_file in backend.rows("run_trajectory_links"):
        owners.setdefault(int(trajectory_file), set()).add(union.find(int(sample_file)))
    return owners


def _join(group: _Group, node: _Node) -> None:
    _merge(group, _alone(node))


def _named_runs(inputs: Inputs, groups: list[_Group]) -> list[tuple[Run, _Group]]:
    """Each group as a Run, named; the order (and the suffix of two equal names) follows the files'
    start times and paths, never the order the folders were given in."""
    files = {f.file_id: f for f in inputs.files}
    named: list[tuple[Run, _Group]] = []
    seen: dict[str, int] = {}

    def order(g: _Group) -> tuple[bool, int, list[str]]:
        return (g.first_ms is None, g.first_ms or 0, sorted(files[f].path for f in g.files))

    for group in sorted(groups, key=order):
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
    """The UTC start of the run and the process of its earliest file (sample files first; ties by path)."""
    samples = [f for f in group.files if files[f].kind is FileKind.SAMPLE] or sorted(group.files)

    def start(file_id: int) -> tuple[bool, int, str]:
        first = group.starts.get(file_id)
        return (first is None, first or 0, files[file_id].path)

    lead = files[min(samples, key=start)]
    stamp = "unknown-time"
    if group.first_ms is not None:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(group.first_ms / 1000))
    who = f"{lead.host}-pid{lead.pid}" if lead.host else f"pid{lead.pid}" if lead.pid else Path(lead.path).stem
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
    runs = tuple(replace(run, file_ids=tuple(sorted((*run.file_ids, *extra[run.run_id])))) for run, _ in named)
    return RunPartition(runs, tuple(_merge_skipped(left_out)))


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


def _merge_skipped(left_out: list[Skipped]) -> list[Skipped]:
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
    everything = run is None or set(run.file_ids) == {f.file_id for f in inputs.files}
    backend.select_run(None if everything or run is None else run.file_ids)
    return RunSelection(run, restrict(inputs, run), partition.left_out, len(partition.runs))
