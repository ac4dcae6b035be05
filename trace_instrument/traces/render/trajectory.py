"""One opened trajectory (``analyze --trajectory ID``) as text, markdown or JSON."""

from __future__ import annotations

import json
from dataclasses import asdict

from rich.console import Console
from rich.text import Text

from trace_instrument.traces.model import TrajectoryDetail
from trace_instrument.traces.render.metrics import finite
from trace_instrument.traces.render.tables import Section, ms, num, rel, timed
from trace_instrument.traces.render.text import print_section

TEXT_CHARS = 400  # of a turn's completion or tool output in the text view (the JSON has all of it)


def _clip(text: str | None, limit: int = TEXT_CHARS) -> str:
    if text is None:
        return "-"
    flat = text.replace("\r", "").replace("\n", " ⏎ ")
    return flat if len(flat) <= limit else flat[:limit] + f" … ({len(text):,} characters)"


def summary_lines(d: TrajectoryDetail) -> list[str]:
    """The lines above the tables: where it is, why it stopped, how long it was."""
    budget = f" of {d.max_response_length:,}" if d.max_response_length is not None else ""
    length = "-" if d.response_length is None else f"{d.response_length:,}{budget}"
    return [
        f"trajectory {d.sample_id}  ({d.file or 'no trajectory line: CSV rows only'})",
        (
            f"stop reason {d.stop_reason or '-'} (agent loop: {d.agent_stop_reason or '-'}, "
            f"last finish reason: {d.finish_reason or '-'})"
        ),
        (
            f"global step {d.global_step if d.global_step is not None else '-'} | turns {len(d.turns)} | "
            f"response length {length} | total {ms(d.total_time_ms)}"
        ),
    ]


def turns_section(d: TrajectoryDetail) -> Section:
    return timed(
        "trajectory-turns",
        "Turns",
        ("turn", "prompt tok", "completion tok", "finish", "generate", "tool", "completion", "tool output"),
        (
            (
                "-" if t.turn_index is None else str(t.turn_index),
                num(t.prompt_tokens),
                num(t.completion_tokens),
                t.finish_reason or "-",
                t.completion_ms,
                t.observation_ms,
                _clip(t.completion_text),
                _clip(t.observation_text),
            )
            for t in d.turns
        ),
        durations=("generate", "tool"),
    )


def rows_section(d: TrajectoryDetail) -> Section:
    origin = d.rows[0].ts if d.rows else 0
    return Section(
        "trajectory-rows",
        "Sample-flow rows (the prompt's, then the trajectory's)",
        ("sample", "time (s)", "event", "step", "value", "file"),
        tuple(
            (
                r.sample_id,
                rel(r.ts, origin),
                r.event,
                "-" if r.step is None else str(r.step),
                r.value or "",
                r.file,
            )
            for r in d.rows
        ),
    )


def print_trajectory(d: TrajectoryDetail, console: Console) -> None:
    for line in summary_lines(d):
        console.print(Text(line))
    for section in (turns_section(d), rows_section(d)):
        console.print()
        print_section(section, console)


def trajectories_json(details: tuple[TrajectoryDetail, ...]) -> str:
    """The ``--format json`` document of ``--trajectory``: every field, the texts whole."""
    document = {"schema": 1, "trajectories": [asdict(d) for d in details]}
    return json.dumps(finite(document), ensure_ascii=False, indent=2, allow_nan=False)
