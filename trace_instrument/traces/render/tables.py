"""The report as titled tables of strings, shared by the terminal and markdown output."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

from trace_instrument.traces.events import STAGE_KEYS
from trace_instrument.traces.model import Analysis, Header, ResponseLength, Run, StepBasis
from trace_instrument.traces.render.metrics import staleness_by_step


@dataclass(frozen=True)
class Section:
    """One table of the report; `key` names it for the page (its section's id), `title` is for people."""

    key: str
    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    note: str = ""


QUANTILE_COLUMNS = ("p50", "p90", "p99", "max")
SECONDS_FROM_MS = 10_000  # a column of durations reads in seconds once one of them is this long


def timed(
    key: str,
    title: str,
    columns: tuple[str, ...],
    rows: Iterable[tuple[str | float | None, ...]],
    durations: Iterable[str],
    note: str = "",
) -> Section:
    """A table whose `durations` columns hold milliseconds (floats, None for none): each such column
    in one unit, ms or s as its longest value asks, named in its header ("rollout (s)"), never
    `15.7 s` above `9,919 ms`."""
    body = [tuple(row) for row in rows]
    timed_columns = set(durations)
    units = [_unit([row[i] for row in body]) if c in timed_columns else "" for i, c in enumerate(columns)]
    headers = tuple(f"{c} ({unit})" if unit else c for c, unit in zip(columns, units))
    cells = tuple(
        tuple(_in_unit(cell, unit, [r[i] for r in body]) for i, (cell, unit) in enumerate(zip(row, units)))
        for row in body
    )
    return Section(key, title, headers, cells, note)


def _unit(values: list[str | float | None]) -> str:
    longest = max((abs(float(v)) for v in values if isinstance(v, (int, float))), default=0.0)
    return "s" if longest >= SECONDS_FROM_MS else "ms"


def _in_unit(cell: str | float | None, unit: str, column: list[str | float | None]) -> str:
    if not unit or isinstance(cell, str):
        return str(cell)
    if cell is None:
        return "-"
    if unit == "ms":
        return f"{cell:,.0f}" if float(cell).is_integer() else f"{cell:,.1f}"
    # seconds: a tenth, or a thousandth when the column holds durations a tenth would show as 0.0
    shortest = min((abs(float(v)) for v in column if isinstance(v, (int, float)) and v), default=SECONDS_FROM_MS)
    return f"{cell / 1000:,.{1 if shortest >= 100 else 3}f}"


def ms(value: float | None) -> str:
    if value is None:
        return "-"
    if abs(value) >= 10_000:
        return f"{value / 1000:,.1f} s"
    return f"{value:,.0f} ms" if float(value).is_integer() else f"{value:,.1f} ms"


def num(value: float | None, digits: int = 1) -> str:
    if value is None:
        return "-"
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.{digits}f}"


def clock(epoch_ms: int | None) -> str:
    if epoch_ms is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(epoch_ms / 1000)) + f".{epoch_ms % 1000:03d}Z"


def rel(epoch_ms: int | None, origin: int | None) -> str:
    """Seconds since `origin`, for a column whose header says "(s)"."""
    if epoch_ms is None or origin is None:
        return "-"
    return f"+{(epoch_ms - origin) / 1000:,.3f}"


def _short(event: str) -> str:
    """``received_generate_response`` for ``LLM_GENERATE:received_generate_response`` (tables stay narrow)."""
    return event.split(":", 1)[-1]


def runs_section(runs: tuple[Run, ...]) -> Section:
    """The runs found among the inputs, for the refusal that asks which one to analyse."""
    rows = tuple(
        (
            r.run_id,
            ", ".join(r.job_ids) or "-",
            clock(r.first_ms),
            clock(r.last_ms),
            ", ".join(r.hosts) or "-",
            f"{r.steps[0]}-{r.steps[1]}" if r.steps else "-",
            f"{len(r.file_ids):,}",
            f"{r.sample_rows:,}",
            f"{r.trajectories:,}",
        )
        for r in runs
    )
    columns = ("run", "job id", "first row", "last row", "hosts", "steps", "files", "rows", "trajectories")
    return Section("runs", "Runs found", columns, rows)


def header_lines(h: Header) -> list[str]:
    steps = f"{h.steps[0]}-{h.steps[-1]} ({len(h.steps)})" if h.steps else "-"
    lines = [
        *([f"run {h.run_id}"] if h.run_id else []),
        f"job {', '.join(h.job_ids) or '-'} | hosts {', '.join(h.hosts) or '-'} | {h.processes} processes | steps {steps}",
        (
            f"{clock(h.first_ms)} -> {clock(h.last_ms)} | rows read {h.rows_read:,} | rejected {h.rows_rejected:,} | "
            f"trajectories {h.trajectories_read:,} | progress lines {h.progress_lines:,}"
        ),
        "files: " + ", ".join(f"{n} {kind}" for kind, n in sorted(h.files.items())),
    ]
    if h.trainer_mode:
        lines.append(
            f"trainer: {h.trainer_mode}; total training steps {h.total_training_steps or '-'}; "
            + ", ".join(f"{k}={v}" for k, v in sorted(h.config.items()))
        )
    if h.lost is None:
        lines.append("dropped by the runtime: not reported (no status files)")
    else:
        parts = [
            f"{out} {sum(r.values()):,}" + (f" ({', '.join(f'{k}: {v}' for k, v in sorted(r.items()))})" if r else "")
            for out, r in sorted(h.lost.items())
        ]
        lines.append("dropped by the runtime: " + "; ".join(parts))
    for skew in h.clock_skew:
        lines.append(f"clock: {skew.host} minus {skew.reference} is within [{skew.low_ms:+,}, {skew.high_ms:+,}] ms")
    for s in h.skipped:
        lines.append(f"skipped {s.count:,} {s.reason}" + (": " + "; ".join(s.examples) if s.examples else ""))
    return lines


def _clip(length: ResponseLength) -> str:
    return "-" if length.clip_ratio is None else f"{length.clip_ratio:.1%}"


def _response_length_section(length: ResponseLength) -> Section:
    return Section(
        "response-length",
        "Response length (verl's response_length: response tokens the trainer sees, tool observations included)",
        ("trajectories", "mean", "min", "max", "clip ratio"),
        ((num(length.trajectories), num(length.mean), num(length.min), num(length.max), _clip(length)),)
        if length.trajectories
        else (),
    )


def _step_rollouts_section(a: Analysis) -> Section:
    basis = "the step that trained them" if a.step_rollouts_by is StepBasis.TRAIN_STEP else "their own global_step"
    return Section(
        "rollouts-per-step",
        f"Rollouts per step (trajectories counted in {basis})",
        (
            "step",
            "trajectories",
            "stop reasons",
            "turns mean",
            "p50",
            "p90",
            "p99",
            "max",
            "completion tokens mean",
            "response length mean",
            "clip ratio",
        ),
        tuple(
            (
                str(r.step),
                num(r.trajectories),
                ", ".join(f"{s.reason} {s.frac:.0%}" for s in r.stop_reasons),
                num(r.turns.mean, 2),
                num(r.turns.quantiles.get("p50")),
                num(r.turns.quantiles.get("p90")),
                num(r.turns.quantiles.get("p99")),
                num(r.turns.max),
                num(r.completion_tokens.mean),
                num(r.response_length.mean),
                _clip(r.response_length),
            )
            for r in a.step_rollouts
        ),
    )


def _stage_columns(a: Analysis) -> list[str]:
    """The stages any shown step timed, in pipeline order."""
    order = list(STAGE_KEYS.values())
    return sorted({t.stage for w in a.steps for t in w.stages}, key=order.index)


def _training_section(a: Analysis) -> Section:
    spanning = {r.step: r for r in a.step_rollouts}
    stale = staleness_by_step(a)
    stages = _stage_columns(a)
    rows: list[tuple[str | float | None, ...]] = []
    for w in a.steps:
        score = w.score
        lag = stale.get(w.step)
        versions = spanning.get(w.step)
        times = {t.stage: t.ms for t in w.stages}
        rows.append(
            (
                str(w.step),
                num(score.mean, 3) if score.count else "-",
                num(score.min, 3) if score.count else "-",
                num(score.max, 3) if score.count else "-",
                "-" if lag is None else f"{lag.min} / {num(lag.mean, 2)} / {lag.max}",
                f"{versions.spanning} of {versions.versioned}" if versions and versions.versioned else "-",
                *(times.get(stage) for stage in stages),
            )
        )
    return timed(
        "training-per-step",
        "Training per step: reward score, staleness (min / mean / max), rollouts spanning weight versions, "
        "stage times (row to row)",
        ("step", "score mean", "min", "max", "staleness", "spanning", *stages),
        rows,
        durations=stages,
    )


def sections(a: Analysis) -> list[Section]:
    """Every view, in the order of the report."""
    origin = a.header.first_ms
    out = [
        timed(
            "step-windows",
            "Step windows (from the CSV rows; progress lines for order)",
            (
                "step",
                "rollout start (s)",
                "rollout",
                "train start (s)",
                "train",
                "overlap",
                "trainer idle",
                "rollout gap",
                "done",
                "trained",
                "progress",
                "gen tok/s",
            ),
            (
                (
                    str(s.step),
                    rel(s.rollout_start_ms, origin),
                    s.rollout_ms,
                    rel(s.train_start_ms, origin),
                    s.train_ms,
                    s.overlap_ms,
                    s.trainer_idle_ms,
                    s.rollout_gap_ms,
                    num(s.rollouts_completed),
                    num(s.samples_trained),
                    s.progress + ("" if s.progress_order_ok in (None, True) else " (order!)"),
                    num(s.gen_throughput),
                )
                for s in a.steps
            ),
            durations=("rollout", "train", "overlap", "trainer idle", "rollout gap"),
        ),
        timed(
            "stage-latencies",
            "Stage latencies (consecutive stages of a sample)",
            ("from", "to", "count", "p50", "p90", "p99", "max", "neg", "slowest"),
            (
                (
                    _short(lat.from_event),
                    _short(lat.to_event),
                    num(lat.count),
                    lat.p50,
                    lat.p90,
                    lat.p99,
                    lat.max,
                    num(lat.negative),
                    lat.slowest[0] if lat.slowest else "",
                )
                for lat in a.latencies
            ),
            durations=QUANTILE_COLUMNS,
        ),
        timed(
            "slowest-trajectories",
            "Slowest rollouts (agent loop started to completed; then waiting for training)",
            ("sample id", "rollout", "waiting for training", "first to last row"),
            ((t.sample_id, t.rollout_ms, t.waiting_ms, t.total_ms) for t in a.slowest),
            durations=("rollout", "waiting for training", "first to last row"),
        ),
        Section(
            "funnel",
            "Funnel",
            ("milestone", "prompts", "trajectories"),
            tuple((f.milestone, num(f.prompts), num(f.trajectories)) for f in a.funnel),
        ),
        timed(
            "never-trained",
            "Never trained (stuck or in flight), by last stage",
            ("last stage", "state", "count", "oldest"),
            ((g.last_event, g.state, num(g.count), g.oldest_age_ms) for g in a.in_flight),
            durations=("oldest",),
        ),
        timed(
            "oldest-never-trained",
            "Oldest never-trained samples",
            ("sample id", "last stage", "ago", "process"),
            ((x.sample_id, x.last_event, x.age_ms, x.host or "-") for x in a.in_flight_oldest[:10]),
            durations=("ago",),
        ),
    ]
    r = a.rollouts
    if r is not None:
        out.append(
            Section(
                "stop-reasons",
                "Stop reasons",
                ("reason", "count", "fraction"),
                tuple((s.reason, num(s.count), f"{s.frac:.1%}") for s in r.stop_reasons),
            )
        )
        dist_rows = []
        for name, d in (("turns per trajectory", r.turns), ("completion tokens", r.completion_tokens)):
            dist_rows.append(
                (
                    name,
                    num(d.count),
                    num(d.mean),
                    num(d.min),
                    *(num(d.quantiles.get(k)) for k in ("p50", "p90", "p95", "p99")),
                    num(d.max),
                )
            )
        out.append(
            Section(
                "rollouts",
                "Rollouts",
                ("quantity", "count", "mean", "min", "p50", "p90", "p95", "p99", "max"),
                tuple(dist_rows),
            )
        )
        out.append(_response_length_section(r.response_length))
        out.append(
            timed(
                "tool-time",
                "Tool time by tool (generate response -> tool executed)",
                ("tool", "calls", "p50", "p90", "p99", "max", "total"),
                ((t.tool, num(t.count), t.p50, t.p90, t.p99, t.max, t.total_ms) for t in r.tools),
                durations=(*QUANTILE_COLUMNS, "total"),
            )
        )
        if r.sglang.collected:
            out.append(
                timed(
                    "sglang-timing",
                    f"sglang timing ({r.sglang.turns_with_timing:,} of {r.sglang.turns:,} turns)",
                    ("part", "mean", "p50", "p90", "p99", "max"),
                    (
                        (
                            name,
                            d.mean,
                            d.quantiles.get("p50"),
                            d.quantiles.get("p90"),
                            d.quantiles.get("p99"),
                            d.max,
                        )
                        for name, d in r.sglang.fields.items()
                    ),
                    durations=("mean", *QUANTILE_COLUMNS),
                )
            )
        else:
            out.append(
                Section(
                    "sglang-timing",
                    "sglang timing",
                    ("part", "value"),
                    (("queue / prefill / decode", "not collected"),),
                )
            )
    stale: dict[int, dict[int, int]] = {}
    for row in a.staleness:
        stale.setdefault(row.train_step, {})[row.staleness] = row.count
    values = sorted({row.staleness for row in a.staleness})
    if a.step_rollouts:
        out.append(_step_rollouts_section(a))
    out.append(_training_section(a))
    out.append(
        Section(
            "staleness",
            "Staleness (train step - generation step), samples per step",
            ("train step", *(f"+{v}" for v in values)),
            tuple((str(step), *(num(c.get(v, 0)) for v in values)) for step, c in sorted(stale.items())),
        )
    )
    out.append(
        timed(
            "throughput-per-step",
            "Generation throughput per step",
            ("step", "trajectories", "tokens", "span", "tok/s", "progress tok/s"),
            (
                (
                    str(t.step),
                    num(t.trajectories),
                    num(t.tokens),
                    None if t.seconds is None else t.seconds * 1000,
                    num(t.tokens_per_s),
                    num(t.progress_tokens_per_s),
                )
                for t in a.step_throughput
            ),
            durations=("span",),
        )
    )
    out.append(
        timed(
            "throughput-per-worker",
            "Generation throughput per worker",
            ("worker", "trajectories", "tokens", "busy", "tok/s"),
            (
                (
                    w.worker,
                    num(w.trajectories),
                    num(w.tokens),
                    None if w.seconds is None else w.seconds * 1000,
                    num(w.tokens_per_s),
                )
                for w in a.worker_throughput
            ),
            durations=("busy",),
        )
    )
    return out
