"""``analyze --trajectory ID``: one trajectory opened, turn by turn (no printing, no exiting).

The engine finds its CSV rows and the file of its JSONL line; the line itself (turn texts, tool
output) is read from that file, since the tables keep no texts.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from trace_instrument.traces.backend import Backend, sql_string
from trace_instrument.traces.events import event_name
from trace_instrument.traces.model import FlowRow, TraceInputError, TrajectoryDetail, TurnDetail
from trace_instrument.traces.options import DEFAULT_OPTIONS, Options
from trace_instrument.traces.runs import select_run
from trace_instrument.traces.store import open_engine, trace_folders


def open_trajectories(
    roots: list[Path], sample_ids: Sequence[str], options: Options = DEFAULT_OPTIONS
) -> tuple[TrajectoryDetail, ...]:
    """The trajectories ``sample_ids`` (``uid/N``) of the run under ``roots``, in the order asked.

    Raises TraceInputError for an id that is not a trajectory of the run (naming the trajectories
    of its prompt, when the id is a prompt's) and for one whose JSONL line is in two places.
    """
    with open_engine(trace_folders(roots), options) as (backend, inputs, _, _):
        select_run(backend, inputs, options.run)
        backend.select_steps(None)
        return tuple(_detail(backend, sample_id) for sample_id in sample_ids)


def load_details(backend: Backend, sample_ids: Sequence[str]) -> tuple[TrajectoryDetail, ...]:
    """The details of ``sample_ids`` that are trajectories of the selected run (others are left out)."""
    out = []
    for sample_id in sample_ids:
        try:
            out.append(_detail(backend, sample_id))
        except TraceInputError:
            continue
    return tuple(out)


def _detail(backend: Backend, sample_id: str) -> TrajectoryDetail:
    uid, _, index = sample_id.rpartition("/")
    if not uid or index == "sample":
        raise TraceInputError(_not_a_trajectory(backend, sample_id, uid or sample_id))
    ids = f"{sql_string(sample_id)}, {sql_string(uid + '/sample')}"
    rows = tuple(
        FlowRow(str(sid), int(ts), event_name(code), None if step is None else int(step), param, str(path))
        for sid, ts, code, step, param, path in backend.rows("sample_rows", ids=ids)
    )
    records = backend.rows("sample_trajectories", ids=sql_string(sample_id))
    own_rows = [r for r in rows if r.sample_id == sample_id]
    if not records and not own_rows:
        raise TraceInputError(_not_a_trajectory(backend, sample_id, uid))
    if len(records) > 1:
        places = ", ".join(str(r[1]) for r in records)
        raise TraceInputError(
            f"trajectory {sample_id} was written {len(records)} times ({places}); give one run's folders"
        )
    return _with_record(sample_id, records[0] if records else None, rows)


def _not_a_trajectory(backend: Backend, sample_id: str, uid: str) -> str:
    siblings = [str(s) for (s,) in backend.rows("prompt_trajectories", uid=sql_string(uid))]
    if siblings:
        return f"{sample_id} is not a trajectory of this run; its prompt's are: " + ", ".join(siblings)
    return f"no trajectory {sample_id} in this run (an id is `uid/N`, as the tables list them)"


def _with_record(sample_id: str, record: tuple[Any, ...] | None, rows: tuple[FlowRow, ...]) -> TrajectoryDetail:
    if record is None:
        return TrajectoryDetail(sample_id, None, None, None, None, None, None, None, None, None, None, None, (), rows)
    _, path, step, stop, agent, finish, length, budget, created, completed, total = record
    line_no, payload = _find_line(Path(path), sample_id)
    turns = tuple(_turn(t) for t in payload.get("turns") or () if isinstance(t, dict))
    return TrajectoryDetail(
        sample_id=sample_id,
        file=f"{path}:{line_no}" if line_no else str(path),
        global_step=step,
        stop_reason=stop,
        agent_stop_reason=agent,
        finish_reason=finish,
        response_length=length,
        max_response_length=budget,
        created_at_ts=created,
        completed_at_ts=completed,
        total_time_ms=total,
        initial_prompt_text=_text(payload.get("initial_prompt_text")),
        turns=turns,
        rows=rows,
    )


def _lines(path: Path) -> Iterator[bytes]:
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rb") as handle:
            yield from handle
    except (OSError, EOFError):  # a cut gzip file: the lines before the cut were read
        return


def _find_line(path: Path, sample_id: str) -> tuple[int | None, dict[str, Any]]:
    """(line number, payload) of the JSONL line of ``sample_id`` in ``path``; (None, {}) when it is gone."""
    uid, _, request_id = sample_id.rpartition("/")
    # the uid as the line may spell it: as it is, or JSON-escaped (quotes, backslashes, control or
    # non-ASCII characters), once in the line's prompt_uid and twice inside its raw_message
    once = {json.dumps(uid, ensure_ascii=ascii)[1:-1] for ascii in (False, True)}
    twice = {json.dumps(text, ensure_ascii=False)[1:-1] for text in once}
    needles = [text.encode("utf-8") for text in {uid, *once, *twice}]
    for number, line in enumerate(_lines(path), start=1):
        if not any(needle in line for needle in needles):  # most lines are another trajectory's: skip them unparsed
            continue
        payload = _payload(line)
        if payload is not None and payload.get("prompt_uid") == uid and str(payload.get("request_id")) == request_id:
            return number, payload
    return None, {}


def _payload(line: bytes) -> dict[str, Any] | None:
    try:
        top = json.loads(line)
        if not isinstance(top, dict):
            return None
        payload = json.loads(top["raw_message"]) if isinstance(top.get("raw_message"), str) else dict(top)
    except (ValueError, TypeError):
        return None
    if not isinstance(payload, dict):
        return None
    payload.setdefault("prompt_uid", top.get("prompt_uid"))
    return payload


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _count(value: Any) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _turn(turn: dict[str, Any]) -> TurnDetail:
    return TurnDetail(
        turn_index=_count(turn.get("turn_index")),
        prompt_tokens=_count(turn.get("prompt_token_count")),
        completion_tokens=_count(turn.get("completion_token_count")),
        finish_reason=_text(turn.get("finish_reason")),
        start_ts=_number(turn.get("start_ts")),
        end_ts=_number(turn.get("end_ts")),
        completion_ms=_number(turn.get("completion_time_ms")),
        observation_ms=_number(turn.get("observation_time_ms")),
        sglang_total_ms=_number(turn.get("sglang_time_ms")),
        template_overhead_tokens=_count(turn.get("template_overhead_tokens")),
        completion_text=_text(turn.get("completion_text")),
        observation_text=_text(turn.get("observation_text")),
    )
