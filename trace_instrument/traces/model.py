"""Typed results of reading a trace folder: what ``analyze`` computes, view by view.

Times are milliseconds since the epoch (``*_ms`` fields) or durations in
milliseconds unless the name says seconds. ``None`` means "not in the traces",
never zero.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

DEFAULT_MEMORY_LIMIT = "1GB"  # DuckDB's memory limit unless --memory-limit says otherwise


class TraceInputError(Exception):
    """Nothing usable was found in the given folders (the CLI exits 2)."""


@dataclass(frozen=True)
class Run:
    """One training run among the inputs: the files that are linked to each other (see traces/runs.py).

    ``run_id`` is ``YYYYMMDDTHHMMSSZ-{host}-pid{pid}``: the UTC start of its earliest sample file and
    that file's process (a trajectory-only run names its first trajectory file's process).
    """

    run_id: str
    job_ids: tuple[str, ...]
    first_ms: int | None
    last_ms: int | None
    hosts: tuple[str, ...]
    steps: tuple[int, int] | None  # the lowest and highest global step its rows carry
    file_ids: tuple[int, ...]
    sample_rows: int
    trajectories: int


class MultipleRunsError(TraceInputError):
    """The inputs hold more than one run and none was chosen (or the choice names none of them)."""

    def __init__(self, runs: tuple[Run, ...], chosen: str | None = None) -> None:
        self.runs = runs
        self.chosen = chosen
        # how many runs the choice names (by run id or job id): none, or more than one
        self.named = sum(1 for r in runs if chosen in (r.run_id, *r.job_ids)) if chosen else 0
        what = f"--run {chosen} names {self.named or 'none'} of the" if chosen else "the inputs hold"
        super().__init__(f"{what} {len(runs)} runs: " + ", ".join(r.run_id for r in runs))


@dataclass(frozen=True)
class Skipped:
    """Input left out, by reason, with the first examples (``file:line`` where known)."""

    reason: str
    count: int
    examples: tuple[str, ...] = ()
    # the count by input file (its path), when the entry is about rows of files: a run among several
    # shows its own files' share (empty: about the inputs as a whole, e.g. a duplicate file)
    per_file: tuple[tuple[str, int], ...] = ()


class StepBasis(str, Enum):
    """Which step a trajectory's rollout figures count in (the value is the JSON's text)."""

    TRAIN_STEP = "train_step"  # the step that trained it (its sample's TRAIN_UPDATE row), as verl logs them
    GLOBAL_STEP = "global_step"  # its own global_step: the run's CSV rows train none


class FileKind(str, Enum):
    """What an input file holds; the value is the folder the runtime writes such files into."""

    SAMPLE = "sample"  # the per-sample flow CSV (trace_flow)
    PROGRESS = "progress"  # the training-progress log (log_progress)
    TRAJECTORY = "trajectory"  # the per-trajectory JSONL (TrajectoryStore)
    STATUS = "status"  # a process's counts of what it wrote and lost


@dataclass(frozen=True)
class SourceFile:
    """One input file and what it holds."""

    file_id: int
    path: str
    kind: FileKind
    root: str  # the TRACE_DIR argument it was found under
    host: str | None = None
    pid: int | None = None


@dataclass(frozen=True)
class ClockSkew:
    """Bounds on ``host``'s clock minus ``reference``'s, from causal cross-host transitions.

    A row on ``reference`` followed by one on ``host`` took at least 0 ms, so the offset is at
    most the smallest such gap; the other direction bounds it from below.
    """

    host: str
    reference: str
    low_ms: int
    high_ms: int


@dataclass(frozen=True)
class Header:
    """Names the run and says how much of it was read."""

    job_ids: tuple[str, ...]
    hosts: tuple[str, ...]
    processes: int
    steps: tuple[int, ...]
    first_ms: int | None
    last_ms: int | None
    rows_read: int
    rows_rejected: int
    trajectories_read: int
    progress_lines: int
    files: dict[str, int]
    trainer_mode: str | None
    total_training_steps: int | None
    config: dict[str, int]
    lost: dict[str, dict[str, int]] | None  # output -> reason -> count, from status files (None: none found)
    skipped: tuple[Skipped, ...]
    clock_skew: tuple[ClockSkew, ...]
    unattributable_rows: int = 0  # rows under a placeholder sample id (also one of ``skipped``)
    run_id: str | None = None  # the run analysed (traces/runs.py); None when no file names one


@dataclass(frozen=True)
class StageTime:
    """One training stage of a step, row to row: from the last row of the stage before it in the
    step (for the weight sync: the last TRAIN_UPDATE row) to this stage's last row (the sync's first).
    verl's ``timing_s/{stage}`` times the stage's own block; this also holds the trainer's work
    between two blocks, and the step's first stage has no row before it to time from."""

    stage: str  # events.STAGE_KEYS: reward, old_log_prob, ref, adv, update_actor, update_weights, ...
    ms: int


@dataclass(frozen=True)
class StepWindow:
    """One global step: its rollout and training windows as seen by the CSV rows, and the progress lines."""

    step: int
    data_ms: int | None  # first DATA_PREPROCESS / DATA_DISPATCH row
    rollout_start_ms: int | None  # first AGENT_LOOP row of the step
    rollout_end_ms: int | None  # last AGENT_LOOP row of the step
    train_start_ms: int | None  # first TRAIN_* row
    train_end_ms: int | None  # last TRAIN_* row (TRAIN_UPDATE)
    sync_ms: int | None  # SYNC_PARAMS
    rollouts_completed: int
    samples_trained: int
    overlap_ms: int | None  # training of this step while any rollout ran (None: no training or rollout rows)
    trainer_idle_ms: int | None  # previous step's train end (or sync) -> this train start
    rollout_gap_ms: int | None  # previous step's rollout end -> this rollout start
    progress: str  # "complete", "partial" or "absent": the 4 `Step N ...` lines
    progress_order_ok: bool | None  # the lines' order agrees with the CSV windows
    gen_throughput: float | None  # the `gen throughput (token/s)` line of this step
    stages: tuple[StageTime, ...] = ()  # in pipeline order
    # verl's critic/score: the reward score of the samples this step trained (ROLLOUT_REWARD rows), or,
    # when the run trains none, of those it generated
    score: Distribution = field(default_factory=lambda: Distribution(0, None, None, None, {}))

    @property
    def rollout_ms(self) -> int | None:
        if self.rollout_start_ms is None or self.rollout_end_ms is None:
            return None
        return self.rollout_end_ms - self.rollout_start_ms

    @property
    def train_ms(self) -> int | None:
        if self.train_start_ms is None or self.train_end_ms is None:
            return None
        return self.train_end_ms - self.train_start_ms


@dataclass(frozen=True)
class Latency:
    """Time between two consecutive stages of a sample (``from_event`` -> ``to_event``)."""

    from_event: str
    to_event: str
    count: int
    p50: float
    p90: float
    p99: float
    max: int
    negative: int  # transitions with a negative time (clock skew between hosts)
    slowest: tuple[str, ...]  # sample ids, slowest first


@dataclass(frozen=True)
class FunnelRow:
    milestone: str
    prompts: int
    trajectories: int


@dataclass(frozen=True)
class InFlight:
    """A sample (trajectory, or a prompt that never got one) that was never trained."""

    sample_id: str
    last_event: str
    state: str  # "in rollout", "awaiting training", "in training", "before rollout"
    last_ms: int
    age_ms: int  # until the last row of the whole run
    host: str | None


@dataclass(frozen=True)
class InFlightGroup:
    last_event: str
    state: str
    count: int
    oldest_age_ms: int


@dataclass(frozen=True)
class Distribution:
    """Count and quantiles (linear interpolation, as numpy's default) of one quantity."""

    count: int
    mean: float | None
    min: float | None
    max: float | None
    quantiles: dict[str, float]  # "p50" -> value


@dataclass(frozen=True)
class Histogram:
    """Equal-width bins: ``counts[i]`` values fall in [edges[i], edges[i+1])."""

    edges: tuple[float, ...]
    counts: tuple[int, ...]


@dataclass(frozen=True)
class StopReason:
    reason: str
    count: int
    frac: float  # of the trajectories counted, so the fractions sum to 1


@dataclass(frozen=True)
class ToolTime:
    """Tool time (generate response -> tool executed) by tool name, from the CSV."""

    tool: str
    count: int
    p50: float
    p90: float
    p99: float
    max: int
    total_ms: int


@dataclass(frozen=True)
class SglangBreakdown:
    """Server-side timing of turns; ``collected`` is False when no turn carried it."""

    collected: bool
    turns: int
    turns_with_timing: int
    fields: dict[str, Distribution]  # "queue", "ttft", "prefill", "decode", "total"


class ClipBasis(str, Enum):
    """What verl's response_length/clip_ratio compares a response's length with."""

    BUDGET = "budget"  # rollout.response_length: the legacy trainer pads every batch to it
    BATCH_MAX = "batch_max"  # the longest response of the step's batch: the v1 trainer pads to it


@dataclass(frozen=True)
class ResponseLength:
    """verl's ``response_length/*``: the response tokens the trainer sees (``len(response_ids)``:
    completions and tool observations, cut at ``rollout.response_length``), over the trajectories
    that recorded it (an addition to the seed's trajectory format; older traces have none)."""

    trajectories: int
    mean: float | None
    min: float | None
    max: float | None
    clip_ratio: float | None  # share at clip_basis's length; None when it is not known
    clip_basis: ClipBasis | None = None


@dataclass(frozen=True)
class Rollouts:
    trajectories: int
    formats: dict[str, int]  # "raw_message" / "flat" lines
    stop_reasons: tuple[StopReason, ...]  # the agent loop's reason, else the last finish reason, else unknown
    turns: Distribution
    turns_histogram: Histogram
    completion_tokens: Distribution  # the sum of a trajectory's completion tokens (no tool observations)
    completion_tokens_histogram: Histogram
    response_length: ResponseLength
    tools: tuple[ToolTime, ...]
    sglang: SglangBreakdown
    completed_lines: int  # `Task ... is completed` progress lines


@dataclass(frozen=True)
class StepRollouts:
    """The rollout figures of one step's trajectories (verl's ``stop_reason/*`` and ``num_turns/*``)."""

    step: int
    trajectories: int
    stop_reasons: tuple[StopReason, ...]  # fractions of this step's trajectories, summing to 1
    turns: Distribution  # turns per trajectory, p50/p90/p95/p99
    completion_tokens: Distribution  # the sum of a trajectory's completion tokens (no tool observations)
    response_length: ResponseLength
    versioned: int = 0  # trajectories that recorded their weight versions (min/max_global_steps)
    spanning: int = 0  # of them, those generated with more than one weight version (max > min)


@dataclass(frozen=True)
class StalenessRow:
    train_step: int
    staleness: int
    count: int


@dataclass(frozen=True)
class StepThroughput:
    step: int
    trajectories: int
    tokens: int
    seconds: float | None
    tokens_per_s: float | None
    progress_tokens_per_s: float | None


@dataclass(frozen=True)
class WorkerThroughput:
    worker: str
    trajectories: int
    tokens: int
    seconds: float | None
    tokens_per_s: float | None


@dataclass(frozen=True)
class SlowTrajectory:
    """A trajectory among the slowest rollouts: ranked by its own rollout time, never by its queueing."""

    sample_id: str
    rollout_ms: int  # its agent loop: first agent_task_started/session_started row -> agent_run_completed
    waiting_ms: int | None  # agent_run_completed -> its first training row (None: not trained)
    total_ms: int  # its first row -> its last row


@dataclass(frozen=True)
class FlowRow:
    """One sample-flow CSV row of an opened trajectory (or of its prompt's sample-level rows)."""

    sample_id: str
    ts: int
    event: str  # events.EVENT_NAMES
    step: int | None
    value: str | None  # the detail's value: a tool name, a reward score
    file: str


@dataclass(frozen=True)
class TurnDetail:
    """One turn of an opened trajectory, as its JSONL line has it."""

    turn_index: int | None
    prompt_tokens: int | None
    completion_tokens: int | None
    finish_reason: str | None
    start_ts: float | None
    end_ts: float | None
    completion_ms: float | None
    observation_ms: float | None
    sglang_total_ms: float | None
    template_overhead_tokens: int | None
    completion_text: str | None
    observation_text: str | None  # the tool output; None when the turn called no tool


@dataclass(frozen=True)
class TrajectoryDetail:
    """One trajectory opened: its record (turns with texts) and its CSV rows."""

    sample_id: str
    file: str | None  # path:line of its JSONL line; None when only CSV rows were found
    global_step: int | None
    stop_reason: str | None  # the bucket: agent loop's reason, else last finish reason, else unknown
    agent_stop_reason: str | None
    finish_reason: str | None
    response_length: int | None
    max_response_length: int | None
    created_at_ts: float | None
    completed_at_ts: float | None
    total_time_ms: float | None
    initial_prompt_text: str | None
    turns: tuple[TurnDetail, ...]
    rows: tuple[FlowRow, ...]


@dataclass(frozen=True)
class Analysis:
    """Everything ``analyze`` shows, in the order of the report."""

    header: Header
    steps: tuple[StepWindow, ...]
    latencies: tuple[Latency, ...]
    latency_histograms: dict[str, Histogram]  # "FROM -> TO" -> histogram of ms (the busiest transitions)
    slowest: tuple[SlowTrajectory, ...]  # the slowest rollouts, slowest first
    funnel: tuple[FunnelRow, ...]
    in_flight: tuple[InFlightGroup, ...]
    in_flight_oldest: tuple[InFlight, ...]
    rollouts: Rollouts | None
    staleness: tuple[StalenessRow, ...]
    step_throughput: tuple[StepThroughput, ...]
    worker_throughput: tuple[WorkerThroughput, ...]
    engine: str = "duckdb"
    cached: bool = False
    notes: tuple[str, ...] = field(default_factory=tuple)
    step_rollouts: tuple[StepRollouts, ...] = ()  # over the whole run, the shown steps only
    # which step a trajectory counts in: "train_step" (the step whose training rows carry it, as verl
    # logs a batch's rollout metrics) or "global_step" (its own, when no CSV row says it was trained)
    step_rollouts_by: StepBasis | None = None
    slowest_details: tuple[TrajectoryDetail, ...] = ()  # the first Options.open_slowest of `slowest`, opened
    # (generation step, never-trained samples generated in it), steps with none absent; a sample
    # whose rows name no step is counted in `in_flight` only
    in_flight_by_step: tuple[tuple[int, int], ...] = ()
