"""The views of one loaded run, each a query of the engine turned into the model's types."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from trace_instrument.traces.backend import COUNTED_QUANTILES, SGLANG_FIELDS, Backend, LoadReport
from trace_instrument.traces.discover import Inputs, locate_line
from trace_instrument.traces.events import EVENT_NAMES, MILESTONES, STAGE_KEYS, event_name, in_flight_state
from trace_instrument.traces.model import (
    Analysis,
    ClipBasis,
    ClockSkew,
    Distribution,
    FileKind,
    FunnelRow,
    Header,
    Histogram,
    InFlight,
    InFlightGroup,
    Latency,
    ResponseLength,
    Rollouts,
    SglangBreakdown,
    Skipped,
    SlowTrajectory,
    SourceFile,
    StageTime,
    StalenessRow,
    StepBasis,
    StepRollouts,
    StepThroughput,
    StepWindow,
    StopReason,
    ToolTime,
    TraceInputError,
    WorkerThroughput,
)
from trace_instrument.traces.options import Options
from trace_instrument.traces.progress import ProgressInfo, ProgressReader, parse_status, repeated_step_line
from trace_instrument.traces.runs import RunSelection

SLOWEST = 10
OLDEST = 20


def compute(
    backend: Backend,
    selection: RunSelection,
    report: LoadReport,
    options: Options,
    progress_reader: ProgressReader | None = None,
) -> Analysis:
    """Run the views on a loaded engine, for the selected run (runs.select_run has pointed the views at it).

    ``progress_reader`` is one kept across refreshes (``analyze --follow``): it reads only what the
    progress files gained.

    The step windows and step throughput are computed over the whole run and then filtered: a
    step's own figures (its overlap with rollouts, its idle gap, what it trained) never depend on
    which other steps are shown.
    """
    inputs = selection.inputs
    if selection.runs_found > 1:
        # one run among several: what loading skipped in its own files only
        report = report.of_files({f.path for f in inputs.files})
    report = report.shown()
    run_lines = run_progress(progress_reader or ProgressReader(), inputs)
    status = parse_status(inputs.of_kind(FileKind.STATUS))
    try:
        return _figures(backend, selection, report, options, run_lines, status)
    except Exception as error:
        if not backend.retry_in_order(error):
            raise
        return _figures(backend, selection, report, options, run_lines, status)


def _figures(
    backend: Backend,
    selection: RunSelection,
    report: LoadReport,
    options: Options,
    run_lines: RunProgress,
    status: tuple[dict[str, dict[str, int]] | None, list[str]],
) -> Analysis:
    """compute's queries, some side by side (Backend.side_by_side), and the Analysis from them."""
    inputs = selection.inputs
    files = {f.file_id: f for f in inputs.files}
    progress, mixed_progress = run_lines.info, run_lines.left_out
    lost, bad_status = status
    backend.select_steps(None)
    # each figure of a shown step is the whole run's: these read the views showing all of it
    (v1,) = backend.rows("v1_trainer")[0]
    with backend.side_by_side() as pool:
        step_rows_task = pool.submit(_step_rows, backend)
        stage_rows_task = pool.submit(backend.rows, "step_stages")
        score_rows_task = pool.submit(_step_scores, backend)
        throughput_task = pool.submit(backend.rows, "throughput_steps")
        staleness_task = pool.submit(_staleness, backend, options.steps)
        trajectory_steps_task = pool.submit(backend.rows, "trajectory_steps")
        # meanwhile, the longest of them on this thread's own connection
        step_rollouts_by, step_rollouts = _step_rollouts(backend, options.steps, bool(v1))
    step_rows = step_rows_task.result()
    trajectory_steps = {int(s) for (s,) in trajectory_steps_task.result()}
    _check_steps(options.steps, set(step_rows) | trajectory_steps | {line.step for line in progress.step_lines})
    backend.select_steps(options.steps)
    steps = _with_step_rows(
        _step_windows(step_rows, progress, options.steps), stage_rows_task.result(), score_rows_task.result()
    )
    with backend.side_by_side() as pool:
        sglang_task = pool.submit(_sglang_fields, backend)
        rollouts_task = pool.submit(_rollouts, backend, progress, bool(v1))
        latency_task = pool.submit(_latency_views, backend)
        slowest_task = pool.submit(backend.rows, "slowest", limit=SLOWEST)
        funnel_task = pool.submit(_funnel, backend)
        workers_task = pool.submit(_worker_throughput, backend, inputs)
        # meanwhile, on this thread's own connection
        header = _header(backend, inputs, report, progress, lost, bad_status, set(step_rows), steps, files)
        groups, oldest, by_step = _in_flight(backend, files, header.last_ms)
    sglang = sglang_task.result()  # its error too when there are no rollouts to show (as in order)
    rollouts = rollouts_task.result()
    if rollouts is not None:
        rollouts = replace(rollouts, sglang=_sglang_breakdown(sglang, rollouts.sglang.turns))
    header = replace(
        header,
        trajectories_read=rollouts.trajectories if rollouts else 0,
        run_id=selection.run.run_id if selection.run else None,
        skipped=header.skipped + selection.left_out + mixed_progress,
    )
    refuse_if_nothing_usable(header.rows_read, header.trajectories_read, progress.lines, header.skipped)
    latencies, latency_histograms = latency_task.result()
    return Analysis(
        header=header,
        steps=steps,
        latencies=latencies,
        latency_histograms=latency_histograms,
        slowest=tuple(
            SlowTrajectory(str(sid), int(rollout), _int(waiting), int(total))
            for sid, rollout, waiting, total in slowest_task.result()
        ),
        funnel=funnel_task.result(),
        in_flight=groups,
        in_flight_oldest=oldest,
        in_flight_by_step=by_step,
        rollouts=rollouts,
        staleness=staleness_task.result(),
        step_throughput=_step_throughput(throughput_task.result(), progress, options.steps),
        worker_throughput=workers_task.result(),
        engine=backend.name,
        notes=_notes(rollouts, latencies, progress, header) + _run_notes(selection, report),
        step_rollouts=step_rollouts,
        step_rollouts_by=step_rollouts_by,
    )


@dataclass(frozen=True)
class RunProgress:
    """The run's progress lines, and the progress files left out as the lines of several runs."""

    info: ProgressInfo
    left_out: tuple[Skipped, ...]
    paths_left_out: frozenset[str]


def run_progress(reader: ProgressReader, inputs: Inputs) -> RunProgress:
    """The progress lines of the run, without the folders whose lines are of more than one run
    (their lines carry no time or id to tell the runs apart). Each folder is checked, and then
    the folders kept, together: a run's lines copied into a second folder, or another run's
    progress folder given beside it, add up to lines that go back."""
    by_folder: dict[str, list[SourceFile]] = {}
    for f in inputs.of_kind(FileKind.PROGRESS):
        by_folder.setdefault(f.root, []).append(f)
    kept: dict[str, list[SourceFile]] = {}
    left_out: list[tuple[str, list[SourceFile]]] = []
    info = ProgressInfo()  # the lines of the folders kept
    for folder in sorted(by_folder):
        lines = reader.read(by_folder[folder])
        repeated = repeated_step_line(lines)
        if repeated is None:
            kept[folder], info = by_folder[folder], lines
        else:
            left_out.append((f"its folder's progress lines are of more than one run ({repeated})", by_folder[folder]))
    if len(kept) > 1:
        together = [f for files in kept.values() for f in files]
        info = reader.read(together)
        repeated = repeated_step_line(info)
        if repeated is not None:
            reason = f"the progress lines of {len(kept)} folders together are of more than one run ({repeated})"
            left_out.append((reason, together))
            info = ProgressInfo()
    skipped = tuple(
        Skipped(f"progress file in no run: {reason}", len(files), tuple(sorted(f.path for f in files))[:3])
        for reason, files in left_out
    )
    paths = frozenset(f.path for _, files in left_out for f in files)
    return RunProgress(info, skipped, paths)


def prepare_export(
    backend: Backend, selection: RunSelection, report: LoadReport
) -> tuple[RunProgress, tuple[Skipped, ...]]:
    """What an export of the selected run (views pointed at its steps) reads of the progress lines,
    and everything left out of it: files (duplicates, given to no run, progress of several runs)
    and rows skipped at load. Refused, as ``analyze`` refuses, when nothing is left to read."""
    inputs = selection.inputs
    if selection.runs_found > 1:
        report = report.of_files({f.path for f in inputs.files})
    progress = run_progress(ProgressReader(), inputs)
    left_out = inputs.skipped + report.shown().skipped + selection.left_out + progress.left_out
    rows = int(backend.rows("header")[0][0] or 0)
    trajectories = int(backend.rows("turn_counts")[0][0] or 0)
    refuse_if_nothing_usable(rows, trajectories, progress.info.lines, left_out)
    return progress, left_out


def refuse_if_nothing_usable(rows: int, trajectories: int, progress_lines: int, skipped: tuple[Skipped, ...]) -> None:
    """Inputs without a CSV row, a trajectory or a progress line to read are refused, with what was left out."""
    if rows == 0 and trajectories == 0 and progress_lines == 0:
        raise TraceInputError("no usable rows in the trace files: " + _skipped_summary(skipped))


def _check_steps(selected: tuple[int, int] | None, steps: set[int]) -> None:
    """Refuse a step range that holds none of the run's steps (rather than show empty tables)."""
    if selected is None or any(selected[0] <= s <= selected[1] for s in steps):
        return
    lo, hi = selected
    asked = str(lo) if lo == hi else f"{lo}-{hi}"
    have = f"steps {min(steps)}-{max(steps)}" if steps else "no step numbers"
    raise TraceInputError(
        f"--steps {asked} holds none of this run's steps: its rows, trajectories and progress lines carry {have}"
    )


def _skipped_summary(skipped: tuple[Skipped, ...]) -> str:
    if not skipped:
        return "nothing was recognised"
    return "; ".join(f"{s.count} {s.reason}" for s in skipped)


def _dist(count: Any, mean: Any, lo: Any, hi: Any, q: Any, names: tuple[str, ...]) -> Distribution:
    quantiles = {name: float(v) for name, v in zip(names, q or ()) if v is not None}
    return Distribution(
        int(count or 0),
        None if mean is None else float(mean),
        None if lo is None else float(lo),
        None if hi is None else float(hi),
        quantiles,
    )


# -- step windows ----------------------------------------------------------------------------------


def _union_overlap(start: int, end: int, windows: list[tuple[int, int]]) -> int:
    """Length of [start, end] covered by the union of ``windows``."""
    covered = 0
    cursor = start
    for lo, hi in sorted(windows):
        lo, hi = max(lo, cursor), min(hi, end)
        if hi > lo:
            covered += hi - lo
            cursor = hi
    return covered


def _with_step_rows(
    windows: tuple[StepWindow, ...], stage_rows: list[tuple[Any, ...]], score_rows: list[tuple[Any, ...]]
) -> tuple[StepWindow, ...]:
    """The windows with their stage times (model.StageTime: each stage from the row of the stage
    before it in the same step; a stage whose row comes before that row, clock skew, is left out)
    and their reward scores."""
    marks: dict[int, list[tuple[int, int]]] = {}
    for step, code, ts in stage_rows:
        marks.setdefault(int(step), []).append((int(code), int(ts)))
    scores = {int(r[0]): r[1:] for r in score_rows}
    return tuple(
        replace(w, stages=_stage_times(sorted(marks.get(w.step, ()))), score=_score(scores.get(w.step)))
        for w in windows
    )


def _stage_times(marks: list[tuple[int, int]]) -> tuple[StageTime, ...]:
    times = []
    for (_, before), (code, ts) in itertools.pairwise(marks):
        if ts >= before:
            times.append(StageTime(STAGE_KEYS[code], ts - before))
    return tuple(times)


def _step_scores(backend: Backend) -> list[tuple[Any, ...]]:
    """Per step, its reward scores: by the step that trained each sample when the rows say so for any."""
    (trained_samples,) = backend.rows("trained_samples")[0]
    return backend.rows("step_scores", by_train="TRUE" if trained_samples else "FALSE")


def _step_rows(backend: Backend) -> dict[int, tuple[Any, ...]]:
    """The steps query's rows by step: every step a (selected) coded row carries."""
    return {int(r[0]): r for r in backend.rows("steps")}


def selected_steps(
    backend: Backend, progress: ProgressInfo, selected: tuple[int, int] | None
) -> tuple[StepWindow, ...]:
    """The selected steps' windows, computed over the whole run; the views are left on ``selected``."""
    backend.select_steps(None)
    rows = _step_rows(backend)
    backend.select_steps(selected)
    return _step_windows(rows, progress, selected)


def _step_windows(
    rows: dict[int, tuple[Any, ...]], progress: ProgressInfo, selected: tuple[int, int] | None
) -> tuple[StepWindow, ...]:
    lines: dict[int, dict[tuple[str, str], int]] = {}
    for line in progress.step_lines:
        lines.setdefault(line.step, {}).setdefault((line.phase, line.boundary), line.seq)
    all_steps = sorted(set(rows) | set(lines))
    rollouts = [(int(r[2]), int(r[3])) for r in rows.values() if r[2] is not None and r[3] is not None]
    windows: list[StepWindow] = []
    previous: tuple[Any, ...] | None = None
    for step in all_steps:
        r = rows.get(step, (step, None, None, None, None, None, None, 0, 0))
        _, data_ts, r_start, r_end, t_start, t_end, sync_ts, completed, trained = r
        known = t_start is not None and t_end is not None and bool(rollouts)
        overlap = _union_overlap(t_start, t_end, rollouts) if known else None
        idle = gap = None
        if previous is not None:
            prev_end = previous[6] if previous[6] is not None else previous[5]
            if t_start is not None and prev_end is not None:
                idle = int(t_start - prev_end)
            if r_start is not None and previous[3] is not None:
                gap = int(r_start - previous[3])
        seen = lines.get(step, {})
        if step in rows:
            previous = rows[step]
        if selected and not selected[0] <= step <= selected[1]:
            continue
        windows.append(
            StepWindow(
                step=step,
                data_ms=_int(data_ts),
                rollout_start_ms=_int(r_start),
                rollout_end_ms=_int(r_end),
                train_start_ms=_int(t_start),
                train_end_ms=_int(t_end),
                sync_ms=_int(sync_ts),
                rollouts_completed=int(completed or 0),
                samples_trained=int(trained or 0),
                overlap_ms=_int(overlap),
                trainer_idle_ms=idle,
                rollout_gap_ms=gap,
                progress="complete" if len(seen) == 4 else "partial" if seen else "absent",
                progress_order_ok=_progress_order_ok(seen, r_start, t_start),
                gen_throughput=progress.throughput.get(step),
            )
        )
    return tuple(windows)


def _progress_order_ok(seen: dict[tuple[str, str], int], rollout_start: Any, train_start: Any) -> bool | None:
    order = [("rollout", "started"), ("rollout", "finished"), ("train", "started"), ("train", "finished")]
    seqs = [seen[key] for key in order if key in seen]
    if len(seqs) < 2:
        return None
    lines_ok = seqs == sorted(seqs)
    csv_ok = rollout_start is None or train_start is None or rollout_start <= train_start
    return lines_ok and csv_ok


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


# -- latencies -------------------------------------------------------------------------------------


def _latency_views(backend: Backend) -> tuple[tuple[Latency, ...], dict[str, Histogram]]:
    """The stage latencies and their histograms, both from the counts of each latency
    (``latency_counts``: Dialect.latency_counts_of)."""
    latencies = _latencies(backend)
    return latencies, _latency_histograms(backend, latencies)


def _latencies(backend: Backend) -> tuple[Latency, ...]:
    result = []
    for prev, code, n, p50, p90, p99, max_dt, negative, slowest in backend.rows("latencies"):
        result.append(
            Latency(
                from_event=event_name(prev),
                to_event=event_name(code),
                count=int(n),
                p50=float(p50 or 0.0),
                p90=float(p90 or 0.0),
                p99=float(p99 or 0.0),
                max=int(max_dt),
                negative=int(negative),
                slowest=tuple(str(s) for s in (slowest or ())),
            )
        )
    order = {name: code for code, name in EVENT_NAMES.items()}
    return tuple(sorted(result, key=lambda x: (order.get(x.from_event, 99), order.get(x.to_event, 99))))


def _latency_histograms(backend: Backend, latencies: tuple[Latency, ...]) -> dict[str, Histogram]:
    bins: dict[str, dict[int, int]] = {}
    for prev, code, b, n in backend.rows("latency_histogram"):
        bins.setdefault(f"{event_name(prev)} -> {event_name(code)}", {})[int(b)] = int(n)
    result = {}
    for lat in latencies:
        key = f"{lat.from_event} -> {lat.to_event}"
        if key not in bins:
            continue
        lo, hi = min(bins[key]), max(bins[key])
        edges = tuple(0.0 if b == 0 else 10 ** (b / 10) for b in range(lo, hi + 2))
        result[key] = Histogram(edges, tuple(bins[key].get(b, 0) for b in range(lo, hi + 1)))
    return result


# -- funnel, in flight -----------------------------------------------------------------------------


def _funnel(backend: Backend) -> tuple[FunnelRow, ...]:
    counts = {row[0]: row[1:] for row in backend.rows("funnel")}
    prompts = counts.get("prompts", (0,) * 6)
    trajectories = counts.get("trajectories", (0,) * 6)
    return tuple(FunnelRow(m, int(p), int(t)) for m, p, t in zip(MILESTONES, prompts, trajectories))


def _host(files: dict[int, SourceFile], file_id: Any) -> str | None:
    source = files.get(int(file_id)) if file_id is not None else None
    if source is None:
        return None
    return f"{source.host}-pid{source.pid}" if source.host else Path(source.path).name


def _in_flight(
    backend: Backend, files: dict[int, SourceFile], end_ts: int | None
) -> tuple[tuple[InFlightGroup, ...], tuple[InFlight, ...], tuple[tuple[int, int], ...]]:
    """Never-trained samples, their ages measured to ``end_ts``, the last row of the (selected) run:
    by last event, the oldest, and the count by generation step (samples without one left out)."""
    end = "NULL" if end_ts is None else str(int(end_ts))
    by_code: dict[int, tuple[int, int]] = {}
    by_step: dict[int, int] = {}
    for c, step, n, age in backend.rows("inflight", end_ts=end):
        count, older = by_code.get(int(c), (0, int(age)))
        by_code[int(c)] = (count + int(n), max(older, int(age)))
        if step is not None:
            by_step[int(step)] = by_step.get(int(step), 0) + int(n)
    groups = tuple(
        sorted(
            (InFlightGroup(event_name(c), in_flight_state(c), n, age) for c, (n, age) in by_code.items()),
            key=lambda g: (-g.count, g.last_event),
        )
    )
    oldest = tuple(
        InFlight(str(sid), event_name(c), in_flight_state(c), int(ts), int(age), _host(files, fid))
        for sid, c, ts, age, fid in backend.rows("inflight_oldest", limit=OLDEST, end_ts=end)
    )
    return groups, oldest, tuple(sorted(by_step.items()))


# -- rollouts --------------------------------------------------------------------------------------

TURN_QUANTILES = ("p50", "p90", "p95", "p99")
COUNTED_NAMES = tuple(name for name, _ in COUNTED_QUANTILES)  # the columns of sglang.sql's quantiles


def _nice_width(span: float, bins: int = 20) -> int:
    raw = max(span / bins, 1.0)
    magnitude = 10 ** math.floor(math.log10(raw))
    for step in (1, 2, 5, 10):
        if raw <= step * magnitude:
            return int(step * magnitude)
    return int(10 * magnitude)


def _rollouts(backend: Backend, progress: ProgressInfo, v1: bool) -> Rollouts | None:
    """The run's rollouts, their sglang times left empty (the caller puts _sglang_fields' in)."""
    (n, mean, lo, hi, q, turns) = backend.rows("turn_counts")[0]
    tools = tuple(
        ToolTime(str(name), int(c), float(p50), float(p90), float(p99), int(mx), int(total))
        for name, c, p50, p90, p99, mx, total in backend.rows("tools")
    )
    if not n and not tools:
        return None
    stops = backend.rows("stop_reasons")
    total = sum(int(c) for _, c in stops)
    turn_hist = {int(k): int(c) for k, c in backend.rows("turn_histogram") if k is not None}
    t_lo, t_hi = (min(turn_hist), max(turn_hist)) if turn_hist else (0, 0)
    rl = backend.rows("completion_tokens")[0]
    width = _nice_width(float(rl[3] or 0))
    rl_bins = {int(b): int(c) for b, c in backend.rows("completion_histogram", width=width)}
    b_hi = max(rl_bins) if rl_bins else 0
    formats = {str(fmt): int(c) for fmt, c in backend.rows("trajectory_formats")}
    return Rollouts(
        trajectories=int(n or 0),
        formats=formats,
        stop_reasons=tuple(StopReason(str(r), int(c), int(c) / total if total else 0.0) for r, c in stops),
        turns=_dist(n, mean, lo, hi, q, TURN_QUANTILES),
        turns_histogram=Histogram(
            tuple(float(k) for k in range(t_lo, t_hi + 2)), tuple(turn_hist.get(k, 0) for k in range(t_lo, t_hi + 1))
        ),
        completion_tokens=_dist(rl[0], rl[1], rl[2], rl[3], rl[4], TURN_QUANTILES),
        completion_tokens_histogram=Histogram(
            tuple(float(b * width) for b in range(b_hi + 2)), tuple(rl_bins.get(b, 0) for b in range(b_hi + 1))
        ),
        response_length=_run_response_length(backend, v1),
        tools=tools,
        sglang=_sglang_breakdown({}, int(turns)),
        completed_lines=progress.completed,
    )


def _response_length(
    n: Any, mean: Any, lo: Any, hi: Any, compared: Any, clipped: Any, batch_max: bool
) -> ResponseLength:
    """verl's response_length figures: the count, mean, min and max, and ``clipped`` of ``compared``
    at the length verl compares with (the step's longest when ``batch_max``, else the budget)."""
    return ResponseLength(
        trajectories=int(n or 0),
        mean=None if mean is None else float(mean),
        min=None if lo is None else float(lo),
        max=None if hi is None else float(hi),
        clip_ratio=int(clipped) / int(compared) if compared else None,
        clip_basis=(ClipBasis.BATCH_MAX if batch_max else ClipBasis.BUDGET) if compared else None,
    )


def _staleness(backend: Backend, selected: tuple[int, int] | None) -> tuple[StalenessRow, ...]:
    """Staleness by train step over the whole run (a shown step's figures never depend on the
    filter), for the train steps ``selected``."""
    rows = (StalenessRow(int(a), int(b), int(n)) for a, b, n in backend.rows("staleness"))
    return tuple(r for r in rows if not selected or selected[0] <= r.train_step <= selected[1])


def _run_response_length(backend: Backend, v1: bool) -> ResponseLength:
    """Run-wide response lengths; the clip ratio only against the budget: verl's v1 trainer compares
    each step with its own longest response, which no run-wide figure of verl's pools."""
    n, mean, lo, hi, budgeted, clipped = backend.rows("response_length")[0]
    return _response_length(n, mean, lo, hi, 0 if v1 else budgeted, clipped, False)


def _score(row: tuple[Any, ...] | None) -> Distribution:
    """The count, mean, min and max of a step's reward scores (none: an empty distribution)."""
    n, mean, lo, hi = row if row is not None else (0, None, None, None)
    return _dist(n, mean, lo, hi, (), ())


def _step_rollouts(
    backend: Backend, selected: tuple[int, int] | None, v1: bool
) -> tuple[StepBasis | None, tuple[StepRollouts, ...]]:
    """Per step, over the whole run (the views must show all of it): stop reasons, turns, completion tokens.

    A trajectory counts in the step that trained it when the CSV rows say so for any trajectory of
    the run; otherwise in its own global_step. Only the ``selected`` steps are returned.
    """
    (trained,) = backend.rows("trained_trajectories")[0]
    by_train = bool(trained)
    backend.script("step_trajectories", by_train="TRUE" if by_train else "FALSE")
    reasons: dict[int, list[tuple[str, int]]] = {}
    for step, reason, n in backend.rows("step_stop_reasons"):
        reasons.setdefault(int(step), []).append((str(reason), int(n)))
    result = []
    # verl's v1 trainer pads a step's batch to its longest response: its clip ratio is the share at that
    batch_max = v1 and by_train
    for row in backend.rows("step_rollouts"):
        step, n, t_mean, t_lo, t_hi, t_q, c_n, c_mean, c_lo, c_hi = row[:10]
        r_n, r_mean, r_lo, r_hi, budgeted, at_budget, at_batch_max, versioned, spanning = row[10:]
        step, n = int(step), int(n)
        if selected and not selected[0] <= step <= selected[1]:
            continue
        result.append(
            StepRollouts(
                step=step,
                trajectories=n,
                stop_reasons=tuple(StopReason(r, c, c / n) for r, c in reasons.get(step, [])),
                turns=_dist(n, t_mean, t_lo, t_hi, t_q, TURN_QUANTILES),
                completion_tokens=_dist(c_n, c_mean, c_lo, c_hi, (), ()),
                response_length=_response_length(
                    r_n, r_mean, r_lo, r_hi, *((r_n, at_batch_max) if batch_max else (budgeted, at_budget)), batch_max
                ),
                versioned=int(versioned),
                spanning=int(spanning),
            )
        )
    if not result and not reasons:
        return None, ()
    return (StepBasis.TRAIN_STEP if by_train else StepBasis.GLOBAL_STEP), tuple(result)


def _sglang_fields(backend: Backend) -> dict[str, Distribution]:
    """Each sglang field's times, in SGLANG_FIELDS' order (only the fields reported)."""
    rows = backend.rows("sglang", values="sglang_values", buckets="sglang_buckets")
    if not all(ordered for *_, ordered in rows):
        # a bucket with a value below one of an earlier bucket (log2 rounding the wrong way; never
        # seen): each field's values as one bucket, sorted whole
        whole = "(SELECT traj_id, field, 0 AS bucket, value FROM sglang_values)"
        rows = backend.rows("sglang", values=whole, buckets=f"({backend.dialect.sglang_buckets_of(whole + ' AS v')})")
    inexact = [int(row[0]) for row in rows if row[1] != row[3]]
    float_means = dict(backend.rows("sglang_float_means", fields=", ".join(map(str, inexact)))) if inexact else {}
    fields = {}
    for field, count, mean, _, lo, hi, p50, p90, p99, _ in rows:
        name = SGLANG_FIELDS[int(field)][0]
        fields[name] = _dist(count, float_means.get(field, mean), lo, hi, (p50, p90, p99), COUNTED_NAMES)
    return {name: fields[name] for name, _ in SGLANG_FIELDS if name in fields}


def _sglang_breakdown(fields: dict[str, Distribution], turns: int) -> SglangBreakdown:
    """The sglang times of ``turns`` turns: the turns with timing are those of the ``total`` field."""
    with_timing = fields["total"].count if "total" in fields else 0
    return SglangBreakdown(collected=with_timing > 0, turns=turns, turns_with_timing=with_timing, fields=fields)


# -- throughput ------------------------------------------------------------------------------------


def _step_throughput(
    step_rows: list[tuple[Any, ...]], progress: ProgressInfo, selected: tuple[int, int] | None
) -> tuple[StepThroughput, ...]:
    """Per step, from the whole run's ``throughput_steps`` rows; only the selected steps are returned."""
    rows = {int(r[0]): r for r in step_rows}
    steps = sorted(set(rows) | set(progress.throughput))
    if selected:
        steps = [s for s in steps if selected[0] <= s <= selected[1]]
    result = []
    for step in steps:
        _, n, tokens, first, last = rows.get(step, (step, 0, 0, None, None))
        seconds = float(last - first) if first is not None and last is not None else None
        tps = float(tokens) / seconds if seconds and tokens is not None else None
        result.append(StepThroughput(step, int(n), int(tokens or 0), seconds, tps, progress.throughput.get(step)))
    return tuple(result)


def _worker_labels(inputs: Inputs) -> dict[int, str]:
    """Each file's worker: the host-pid of the sample file of its process, else its pid (and its
    folder, when there are several)."""
    hosts: dict[tuple[str, int | None], str] = {}
    for f in inputs.of_kind(FileKind.SAMPLE):
        hosts.setdefault((f.root, f.pid), f"{f.host}-pid{f.pid}")
    several_roots = len({f.root for f in inputs.files}) > 1
    return {
        f.file_id: hosts.get((f.root, f.pid)) or (f"{f.root}:pid{f.pid}" if several_roots else f"pid{f.pid}")
        for f in inputs.files
    }


def _worker_throughput(backend: Backend, inputs: Inputs) -> tuple[WorkerThroughput, ...]:
    labels = _worker_labels(inputs)
    acc: dict[str, list[float]] = {}
    for file_id, _step, n, tokens, first, last in backend.rows("throughput_workers"):
        label = labels[int(file_id)]
        entry = acc.setdefault(label, [0, 0, 0.0])
        entry[0] += int(n)
        entry[1] += int(tokens or 0)
        if first is not None and last is not None:
            entry[2] += float(last - first)
    return tuple(
        WorkerThroughput(label, int(n), int(tok), sec or None, tok / sec if sec else None)
        for label, (n, tok, sec) in sorted(acc.items())
    )


# -- header ----------------------------------------------------------------------------------------


def _header(
    backend: Backend,
    inputs: Inputs,
    report: LoadReport,
    progress: ProgressInfo,
    lost: dict[str, dict[str, int]] | None,
    bad_status: list[str],
    event_steps: set[int],
    steps: tuple[StepWindow, ...],
    files: dict[int, SourceFile],
) -> Header:
    """The run's header; ``trajectories_read`` is left 0 (the rollouts view counts them)."""
    n, first, last, unknown, bad_content = backend.rows("header")[0]
    (duplicates,) = backend.rows("duplicates")[0]
    skipped = list(inputs.skipped) + list(report.skipped)
    if unknown:
        skipped.append(Skipped("row with an unknown stage or detail", int(unknown), _examples(backend, files, True)))
    if bad_content:
        skipped.append(Skipped("row whose content does not parse", int(bad_content), _examples(backend, files, False)))
    if duplicates:
        skipped.append(Skipped("duplicate row (left out of the latencies)", int(duplicates)))
    placeholders = _placeholder_rows(backend, files)
    if placeholders is not None:
        skipped.append(placeholders)
    if bad_status:
        skipped.append(Skipped("status file that is not valid JSON", len(bad_status), tuple(bad_status[:3])))
    if progress.undecodable:
        skipped.append(Skipped("progress line with bytes that are not UTF-8", progress.undecodable))
    processes = {
        (f.host or f.root, f.pid) for f in inputs.files if f.kind in (FileKind.SAMPLE, FileKind.STATUS) and f.pid
    }
    processes |= {(f.root, f.pid) for f in inputs.files if f.kind is FileKind.TRAJECTORY and f.pid} - {
        (f.root, f.pid) for f in inputs.of_kind(FileKind.SAMPLE)
    }
    hosts = sorted({f.host for f in inputs.files if f.host})
    step_numbers = event_steps | {s.step for s in steps}
    step_numbers |= set(progress.banner_steps)
    kinds: dict[str, int] = {}
    for f in inputs.files:
        kinds[f.kind.value] = kinds.get(f.kind.value, 0) + 1
    rejected = report.rows_rejected + int(unknown or 0) + int(bad_content or 0) + int(duplicates or 0)
    return Header(
        job_ids=tuple(str(j) for j, _ in backend.rows("job_ids")),
        hosts=tuple(hosts),
        processes=len(processes),
        steps=tuple(sorted(step_numbers)),
        first_ms=_int(first),
        last_ms=_int(last),
        rows_read=int(n or 0),
        rows_rejected=rejected,
        trajectories_read=0,
        progress_lines=progress.lines,
        files=kinds,
        trainer_mode=("separate_async" if progress.disagg else "colocated") if progress.lines else None,
        total_training_steps=progress.total_training_steps,
        config=dict(progress.config),
        lost=lost,
        skipped=tuple(skipped),
        clock_skew=_clock_skew(backend, files),
        unattributable_rows=placeholders.count if placeholders else 0,
    )


UNATTRIBUTABLE = "unattributable row: its sample id has a placeholder uid (left out of the per-sample views)"


def _placeholder_rows(backend: Backend, files: dict[int, SourceFile]) -> Skipped | None:
    """The rows whose sample id names no sample (``unknown/sample``): counted and shown, never joined."""
    rows = backend.rows("placeholder_rows")
    if not rows:
        return None
    count = int(rows[0][3])  # each row carries the count of them all
    examples = []
    for file_id, sample_id, ts, _n in rows:
        path = files[int(file_id)].path
        line = _row_line(path, sample_id, ts)
        examples.append(f"{path}:{line} ({sample_id})" if line else f"{path} ({sample_id})")
    return Skipped(UNATTRIBUTABLE, count, tuple(examples))


def _row_line(path: str, sample_id: str, ts: int) -> int | None:
    """The line of the CSV row of ``sample_id`` at ``ts`` (either status), for examples."""
    return locate_line(path, f"{sample_id},RUNNING,{ts},") or locate_line(path, f"{sample_id},COMPLETE,{ts},")


def _examples(backend: Backend, files: dict[int, SourceFile], unknown: bool) -> tuple[str, ...]:
    which = "bad_content IS NULL" if unknown else "bad_content IS NOT NULL"
    examples = []
    for file_id, sample_id, ts, stage, detail, content in backend.rows("unknown_examples", which=which):
        path = files[int(file_id)].path
        line = _row_line(path, sample_id, ts)
        what = f"stage={stage} detail={detail}" if unknown else repr((content or "")[:60])
        examples.append(f"{path}:{line} ({what})" if line else f"{path} ({what})")
    return tuple(examples)


def _clock_skew(backend: Backend, files: dict[int, SourceFile]) -> tuple[ClockSkew, ...]:
    trainer = backend.rows("trainer_file")
    if not trainer:
        return ()
    reference = files[int(trainer[0][0])].host
    mins: dict[tuple[str, str], int] = {}
    for prev_file, file_id, min_dt, _n in backend.rows("skew"):
        a, b = files[int(prev_file)].host, files[int(file_id)].host
        if a and b and a != b:
            key = (a, b)
            mins[key] = min(mins.get(key, int(min_dt)), int(min_dt))
    result = []
    for host in sorted({h for pair in mins for h in pair} - {reference}):
        forward, backward = mins.get((reference or "", host)), mins.get((host, reference or ""))
        if forward is None or backward is None or reference is None:
            continue
        result.append(ClockSkew(host, reference, -backward, forward))
    return tuple(result)


def _run_notes(selection: RunSelection, report: LoadReport) -> tuple[str, ...]:
    """What a reader of one run among several must know about the figures shown."""
    whole = [s.reason for s in report.skipped if not s.per_file]
    if selection.runs_found <= 1 or not whole:
        return ()
    note = (
        f"the inputs hold {selection.runs_found} runs: these skipped inputs are counted over all of them, "
        "not this run's alone: " + ", ".join(whole)
    )
    return (note,)


def _notes(
    rollouts: Rollouts | None, latencies: tuple[Latency, ...], progress: ProgressInfo, header: Header
) -> tuple[str, ...]:
    notes = []
    negative = sum(lat.negative for lat in latencies)
    if negative:
        notes.append(
            f"{negative} transitions have a negative time: the hosts' clocks differ (see the clock skew estimates)"
        )
    if rollouts is not None and not rollouts.sglang.collected:
        notes.append("sglang queue/prefill/decode timing was not collected (the sglang-timing extra is off)")
    if progress.lines and not progress.step_lines:
        notes.append("the progress logs have no `Step N rollout|train started|finished` lines")
    if header.unattributable_rows:
        notes.append(
            f"{header.unattributable_rows} rows carry a placeholder sample id (the runtime had no uid): they are counted in the "
            "step windows but belong to no sample, so the latencies, funnel and in-flight views leave them out"
        )
    if header.lost is None:
        notes.append("no status files: the runtime's own drop counts are not known")
    return tuple(notes)
