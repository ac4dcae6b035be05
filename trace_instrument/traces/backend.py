"""What an engine must do, and the named SQL files it runs.

The views are plain SQL files under ``sql/`` (one per view), shared by every
engine; what differs between engines (quantiles, top-k, regular expressions,
window null handling, reading the raw files) is a macro the engine's
:class:`Dialect` expands: ``{{quantiles(x, 0.5, 0.9)}}``. ``{{name}}`` without
arguments is a parameter of the query (or a dialect constant).
"""

from __future__ import annotations

import functools
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, Future
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from typing import Any, ParamSpec, TypeVar

from trace_instrument.formats import CONTENT_KEYS, SAMPLE_COLUMNS
from trace_instrument.traces.discover import Inputs, TornTail
from trace_instrument.traces.events import ORDER_KEY_SQL, TIMESTAMP_LIMIT, Event, event_codes_in, event_of
from trace_instrument.traces.model import FileKind, Skipped, SourceFile

_PIPE = "'|'"
# The sample-flow CSV's columns as every engine names them: the format's, two of them shorter.
CSV_COLUMNS = tuple({"sample_status": "status", "timestamp": "ts"}.get(c, c) for c in SAMPLE_COLUMNS)
# The content field's keys, in the order the runtime writes them (``from=A|to=B|stage=S...``).
_FROM, _TO, _STAGE, _STEP, _DETAIL = (f"{key}=" for key in CONTENT_KEYS)
# What the runtime writes as a uid when the batch has none: the templates' default ('unknown'),
# format() of a missing value ('None', 'nan'), the trajectory placeholder ('N/A') and nothing at all.
# Rows under such an id come from unrelated samples, so they never form a sample of their own.
PLACEHOLDER_UIDS = ("unknown", "None", "nan", "N/A", "")
# The stop reason of a trajectory that records neither an agent-loop reason nor a finish reason.
UNKNOWN_STOP_REASON = "unknown"
# Finish reasons of a generate call the server aborted (verl's TokenOutput.stop_reason, sglang's
# and vLLM's spellings): the agent loop then stops for want of a tool call, so the abort is the
# reason, not the loop's decision (verl keeps aborted samples apart: response_length_non_aborted/*).
ABORTED_FINISH_REASONS = ("aborted", "abort")
# A trajectory line's turn fields (trace_data_formats.md) and the ``turns_all`` column each becomes,
# on every engine.
TURN_FIELDS = (
    ("turn_index", "turn_index"),
    ("prompt_token_count", "prompt_tokens"),
    ("completion_token_count", "completion_tokens"),
    ("finish_reason", "finish_reason"),
    ("completion_time_ms", "completion_ms"),
    ("observation_time_ms", "observation_ms"),
    ("sglang_time_ms", "sglang_total_ms"),
    ("sglang_queue_time_ms", "sglang_queue_ms"),
    ("sglang_ttft_ms", "sglang_ttft_ms"),
    ("sglang_prefill_ms", "sglang_prefill_ms"),
    ("sglang_decode_time_ms", "sglang_decode_ms"),
)
# The sglang timing fields of a turn the analysis reads (views.SglangBreakdown's names), each with
# its ``turns_all`` column; a field's number in ``sglang_values`` is its place here.
SGLANG_FIELDS = (
    ("queue", "sglang_queue_ms"),
    ("ttft", "sglang_ttft_ms"),
    ("prefill", "sglang_prefill_ms"),
    ("decode", "sglang_decode_ms"),
    ("total", "sglang_total_ms"),
)
# The quantiles the latencies, tool times and sglang times report (Dialect.quantile_points): name, point.
COUNTED_QUANTILES = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))
# The bucket of a value above every finite one (+inf, and NaN, which both engines sort above +inf),
# and of -inf (see Dialect.value_bucket).
TOP_BUCKET = 1_000_000
_MACRO = re.compile(r"\{\{\s*(\w+)\s*(?:\((.*?)\))?\s*\}\}", re.DOTALL)


def split_args(text: str) -> list[str]:
    """Split macro arguments at top-level commas."""
    args: list[str] = []
    depth = 0
    current = ""
    for char in text:
        if char == "," and depth == 0:
            args.append(current.strip())
            current = ""
            continue
        depth += char in "(["
        depth -= char in ")]"
        current += char
    if current.strip():
        args.append(current.strip())
    return args


class Dialect:
    """SQL fragments that differ between engines. Subclasses override what their engine spells differently."""

    name = "sql"

    def quantiles(self, expr: str, *points: str) -> str:
        raise NotImplementedError

    def exact_mean(self, expr: str) -> str:
        """The mean of a floating-point column, the same whatever order the rows are added up in.

        A float sum depends on that order in its last bits, and an engine's threads add up in an
        order of their own: the same trace gave JSON documents that differed from run to run. The
        values are taken to 9 decimals as exact DECIMALs, whose sum is exact, when every one is
        finite and below 10^18 in size (so the sum of up to 10^11 of them fits); otherwise (inf,
        NaN, a huge value) the engine's float mean, as before. The sums of parts of the rows
        (``exact_sum``) add up to the sum of the whole, so a mean kept up to date part by part
        (``mean_of_parts``, the sglang times) is this one."""
        small = self._small(expr)
        return self.mean_of_parts(
            f"count({expr})", f"count(CASE WHEN {small} THEN 1 END)", self.exact_sum(expr), f"avg({expr})"
        )

    def _small(self, expr: str) -> str:
        return f"abs({expr}) < 1e18"  # false for NaN and inf

    def exact_sum(self, expr: str) -> str:
        """The exact sum of the values of ``expr`` that are finite and below 10^18 (see ``exact_mean``)."""
        return f"sum(CASE WHEN {self._small(expr)} THEN CAST({expr} AS DECIMAL(38, 9)) END)"

    def mean_of_parts(self, n: str, n_small: str, exact_sum: str, fallback: str) -> str:
        """The mean of ``n`` values of which ``n_small`` are finite and below 10^18 and sum to
        ``exact_sum`` (``exact_sum``): that sum over ``n`` when they are all of them, else ``fallback``."""
        return f"CASE WHEN {n} = {n_small} THEN CAST({exact_sum} AS DOUBLE) / {n} ELSE {fallback} END"

    def value_bucket(self, expr: str) -> str:
        """The bucket of a floating-point value: 64 a doubling of 1 + its size, negative below zero.
        A larger value's bucket is never smaller, so the k-th smallest value of a column is found
        by counting buckets and sorting one (sglang.sql), which the buckets' own bounds check;
        +inf and NaN share TOP_BUCKET, -inf its negative."""
        return (
            f"CASE WHEN isnan({expr}) OR {expr} > 1.7e308 THEN {TOP_BUCKET} "
            f"WHEN {expr} < -1.7e308 THEN -{TOP_BUCKET} "
            f"ELSE CAST(sign({expr}) * floor(log2(1 + abs({expr})) * 64) AS BIGINT) END"
        )

    def sglang_value(self, field: str) -> str:
        """The ``turns_all`` column of sglang field number ``field`` (SGLANG_FIELDS), of a row joined with it."""
        cases = " ".join(f"WHEN {i} THEN {column}" for i, (_, column) in enumerate(SGLANG_FIELDS))
        return f"CASE {field} {cases} END"

    def sglang_field_numbers(self) -> str:
        """A relation of the sglang field numbers (``field``)."""
        return " UNION ALL ".join(f"SELECT {i} AS field" for i in range(len(SGLANG_FIELDS)))

    def sglang_buckets_of(self, values: str) -> str:
        """The per-bucket summary of sglang values (sglang_values.sql): how many, their bounds and
        their exact sum; what a load builds, ``--follow`` merges, and a selection's view computes."""
        return (
            f"SELECT field, bucket, count(*) AS n, min(value) AS lo, max(value) AS hi, "
            f"count(CASE WHEN {self._small('value')} THEN 1 END) AS n_small, {self.exact_sum('value')} AS sum_small "
            f"FROM {values} GROUP BY field, bucket"
        )

    def top_ids(self, id_expr: str, value: str, k: str) -> str:
        raise NotImplementedError

    def event_of(self, stage: str, detail: str) -> str:
        """The code of the event a row's ``stage`` and ``detail`` name, as the runtime's format tells them."""
        return event_of(stage, detail)

    def content_parts(self, column: str) -> str:
        """What ``content_struct`` reads its fields from: the content itself here (see DuckDB's override)."""
        return column

    def content_struct(self, column: str, parts: str) -> str:
        """``from=A|to=B|stage=S[|global_step=N][|detail=D]`` as a struct (stage, step, detail).

        Split at ``|`` rather than matched with a regular expression (a fifth of the cost); the events
        query parses each distinct content once. ``stage`` is '' when the content does not have that
        shape; the detail is everything after ``|detail=`` (it may itself hold a ``|``). ``parts`` is
        ``content_parts(column)``, computed once by the caller.
        """
        c = column
        field = [self.field(c, parts, n) for n in (1, 2, 3, 4)]
        valid = (
            f"{self.starts_with(field[0], _FROM)} AND {self.starts_with(field[1], _TO)} "
            f"AND {self.starts_with(field[2], _STAGE)}"
        )
        detail_at = self.position(c, "|" + _DETAIL)
        return self.struct(
            stage=f"CASE WHEN {valid} THEN substr({field[2]}, {len(_STAGE) + 1}) ELSE '' END",
            step=f"CASE WHEN {self.starts_with(field[3], _STEP)} THEN substr({field[3]}, {len(_STEP) + 1}) ELSE '' END",
            detail=f"CASE WHEN {detail_at} > 0 THEN substr({c}, {detail_at} + {len(_DETAIL) + 1}) ELSE '' END",
        )

    def field(self, column: str, parts: str, n: int) -> str:
        """The ``n``-th ``|``-separated field of the content ('' or NULL when there are fewer)."""
        return f"split_part({column}, {_PIPE}, {n})"

    def starts_with(self, expr: str, prefix: str) -> str:
        return f"starts_with({expr}, '{prefix}')"

    def position(self, expr: str, needle: str) -> str:
        return f"strpos({expr}, '{needle}')"

    def struct(self, **fields: str) -> str:
        raise NotImplementedError

    def tuple_of(self, *exprs: str) -> str:
        """An unnamed struct of ``exprs``, which compares field by field (an aggregate's ordering key)."""
        return f"struct({', '.join(exprs)})"

    def uid_of(self, column: str) -> str:
        """The uid of the sample id ``column``: what comes before its last slash ('' without one)."""
        raise NotImplementedError

    def traj_of(self, column: str) -> str:
        """The trajectory part of the sample id ``column``: what follows its last slash ('' without one)."""
        raise NotImplementedError

    def last_ignore_nulls(self, expr: str) -> str:
        raise NotImplementedError

    def hash_of(self, expr: str) -> str:
        """A 64-bit hash of ``expr``."""
        return f"hash({expr})"

    def sample_keys(self, column: str) -> tuple[str, ...]:
        """Candidate keys standing for a sample id, cheapest first; the first that is unique in a run is used.

        Sorting and joining on a 64-bit hash costs a third less than on the id's text; the text
        itself is the fallback for the run where two ids share a hash.
        """
        return (self.hash_of(column), column)

    def constants(self) -> dict[str, str]:
        return {"order_key": ORDER_KEY_SQL}

    def plain_timestamp(self, text: str) -> str:
        """``text`` as a BIGINT when it is a timestamp written as digits (spaces around) from 0 to
        events.TIMESTAMP_LIMIT, else NULL: the engines' casts also take ``1e3``, ``+5`` or ``0x10``,
        which salvage.py refuses, so a file holding such a row is read through salvage and both
        engines count the same rows."""
        plain = f"trim({text})"
        number = f"TRY_CAST({plain} AS BIGINT)"
        return (
            f"CASE WHEN CAST({number} AS {self.text_type}) = {plain} AND {number} >= 0 "
            f"AND {number} < {TIMESTAMP_LIMIT} THEN {number} END"
        )

    text_type = "VARCHAR"

    def stop_bucket(self, agent_reason: str, finish_reason: str) -> str:
        """A trajectory's stop reason: an aborted last turn's finish reason, else the agent loop's
        reason, else the last turn's finish reason, else unknown."""
        aborted = ", ".join(f"'{r}'" for r in ABORTED_FINISH_REASONS)
        return (
            f"CASE WHEN {finish_reason} IN ({aborted}) THEN {finish_reason} "
            f"ELSE coalesce(NULLIF({agent_reason}, ''), NULLIF({finish_reason}, ''), '{UNKNOWN_STOP_REASON}') END"
        )

    def is_placeholder(self, column: str) -> str:
        """Whether the sample id ``column`` has a placeholder uid (PLACEHOLDER_UIDS).

        The uid is what comes before the id's last slash (``uid_of``), so the id has a placeholder
        uid exactly when it starts with that placeholder and a slash and has no slash after it.
        Plain string tests: this runs on every CSV row, and the engines evaluate both sides of an
        AND, so a regular expression behind a cheap test still ran on every row (0.4 s per scan of
        a 2-million-row run)."""
        return "(" + " OR ".join(self.is_placeholder_of(column, str(n)) for n in range(len(PLACEHOLDER_UIDS))) + ")"

    def is_placeholder_of(self, column: str, which: str) -> str:
        """Whether the sample id ``column`` has the placeholder uid ``PLACEHOLDER_UIDS[which]``."""
        prefix = PLACEHOLDER_UIDS[int(which)] + "/"
        rest = f"substr({column}, {len(prefix) + 1})"
        return f"(left({column}, {len(prefix)}) = {sql_string(prefix)} AND {self.position(rest, '/')} = 0)"

    def event_counts_of(self, events: str) -> str:
        """The query of ``events``' rows and time span per sample file, job id and content: the
        event summary a load builds (event_summaries.sql) and a step selection's view computes."""
        return (
            "SELECT file_id, job_id, cid, count(*) AS n, min(ts) AS first_ts, max(ts) AS last_ts "
            f"FROM {events} GROUP BY file_id, job_id, cid"
        )

    # The transition summaries (transition_summaries.sql): what the views that would otherwise scan
    # every transition read, counts of rows by their keys. Counts of parts add up to the count of
    # the whole (``analyze --follow`` adds a refresh's new transitions, takes away those they replace).

    def latency_counts_of(self, transitions: str) -> str:
        """How many transitions of each kind (prev_code -> code) took each latency ``dt``, duplicate
        rows left out: a run's millions of transitions take a few thousand distinct milliseconds."""
        return (
            f"SELECT prev_code, code, dt, count(*) AS k FROM {transitions} WHERE NOT dup GROUP BY prev_code, code, dt"
        )

    def tool_counts_of(self, transitions: str) -> str:
        """How many tool rows of each content (its tool name) took each tool time ``tool_dt`` (the
        last generate response to the tool row), duplicate rows left out."""
        return (
            f"SELECT cid, tool_dt, count(*) AS k FROM {transitions} "
            f"WHERE code = {int(Event.TOOL_EXECUTED)} AND tool_dt IS NOT NULL AND NOT dup GROUP BY cid, tool_dt"
        )

    def file_pairs_of(self, transitions: str) -> str:
        """How many transitions go from each sample file to each, duplicates apart; the latency
        ``dt`` kept for those that cross from one file to another (the clock skew's), NULL within one."""
        cross = "CASE WHEN prev_file <> file_id THEN dt END"
        return (
            f"SELECT prev_file, file_id, {cross} AS dt, dup, count(*) AS k FROM {transitions} "
            f"GROUP BY prev_file, file_id, {cross}, dup"
        )

    def count_quantiles(self, counts: str, *keys: str) -> str:
        """Common table expressions of the p50, p90 and p99 of the values ``dt`` counted ``k`` times
        in ``counts`` per ``keys``: ``ranked`` (each value with ``upto``, how many are at or below
        it, and ``timed``, how many in all), ``positions``, ``bounds`` and ``quantiles``.

        A quantile is the linear interpolation quantile_cont and Spark's percentile define: with
        h = (n - 1) q, the values lo and hi at the 0-based positions floor(h) and ceil(h) in
        ascending order, lo + (hi - lo) (h - floor(h)), in doubles, the same arithmetic on both
        engines (quantile_cont itself may round its last bit otherwise). The value at position i is
        the smallest whose cumulative count exceeds i."""
        group = ", ".join(keys)
        same_keys = " AND ".join(f"r.{k} IS NOT DISTINCT FROM p.{k}" for k in keys)
        g = ", ".join(f"g.{k}" for k in keys)
        p = ", ".join(f"p.{k}" for k in keys)
        return f"""ranked AS (
    SELECT {group}, dt, k,
           sum(k) OVER (PARTITION BY {group} ORDER BY dt ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS upto,
           sum(k) OVER (PARTITION BY {group}) AS timed
    FROM {counts} AS counted
    WHERE dt IS NOT NULL
),
positions AS (
    SELECT {group}, q, h, CAST(floor(h) AS BIGINT) AS lo_at, CAST(ceil(h) AS BIGINT) AS hi_at
    FROM (SELECT {g}, w.q, CAST(g.timed - 1 AS DOUBLE) * w.p AS h
          FROM (SELECT DISTINCT {group}, timed FROM ranked) AS g
          CROSS JOIN ({self.quantile_points()}) AS w) AS wanted
),
bounds AS (
    SELECT {p}, p.q, p.h, p.lo_at,
           CAST(min(CASE WHEN r.upto > p.lo_at THEN r.dt END) AS DOUBLE) AS lo,
           CAST(min(CASE WHEN r.upto > p.hi_at THEN r.dt END) AS DOUBLE) AS hi
    FROM positions AS p
    JOIN ranked AS r ON {same_keys}
    GROUP BY {p}, p.q, p.h, p.lo_at
),
quantiles AS (
    SELECT {group}, {self.interpolated_quantiles("q", "lo", "hi", "h", "lo_at")}
    FROM bounds
    GROUP BY {group}
)"""

    def quantile_points(self) -> str:
        """A relation of the quantiles COUNTED_QUANTILES names: ``q`` (1, 2, ...) and its point ``p``."""
        return " UNION ALL ".join(
            f"SELECT {q} AS q, CAST({point} AS DOUBLE) AS p" for q, (_, point) in enumerate(COUNTED_QUANTILES, 1)
        )

    def interpolated_quantiles(self, q: str, lo: str, hi: str, h: str, lo_at: str) -> str:
        """Aggregate columns named as COUNTED_QUANTILES, of rows holding quantile number ``q`` at
        ``h`` = (n - 1) p between the values ``lo`` (at position ``lo_at`` = floor(h)) and ``hi``
        (at ceil(h)): lo + (hi - lo) (h - floor(h)), the linear interpolation of count_quantiles."""
        return ", ".join(
            f"max(CASE WHEN {q} = {i} THEN {lo} + ({hi} - {lo}) * ({h} - {lo_at}) END) AS {name}"
            for i, (name, _) in enumerate(COUNTED_QUANTILES, 1)
        )

    def third_largest(self) -> str:
        """Per group of ``ranked`` (Dialect.count_quantiles): the largest latency at or above which at
        least three transitions lie (the smallest, with fewer), where the slowest three are found."""
        return "coalesce(max(CASE WHEN timed - upto + k >= 3 THEN dt END), min(dt))"

    def slow_thresholds_of(self, latency_counts: str) -> str:
        """Each kind's ``third_largest`` latency, from the latency counts ``latency_counts``."""
        return (
            f"WITH {self.count_quantiles(latency_counts, 'prev_code', 'code')} "
            f"SELECT prev_code, code, {self.third_largest()} AS dt FROM ranked GROUP BY prev_code, code"
        )

    def turn_columns(self, turn: str) -> str:
        """The columns of ``turns_all`` from a trajectory line's turn struct ``turn`` (TURN_FIELDS)."""
        return ", ".join(f"{turn}.{field} AS {column}" for field, column in TURN_FIELDS)

    def is_placeholder_uid(self, expr: str) -> str:
        """Whether the uid ``expr`` is a placeholder (PLACEHOLDER_UIDS)."""
        listed = ", ".join(sql_string(uid) for uid in PLACEHOLDER_UIDS)
        return f"({expr} IN ({listed}))"

    def render(self, sql: str, params: dict[str, Any]) -> str:
        """Expand macros and parameters of ``sql``."""
        constants = self.constants()

        def expand(match: re.Match[str]) -> str:
            name, args = match.group(1), match.group(2)
            if args is None:
                if name in params:
                    return str(params[name])
                if name in constants:
                    return constants[name]
                raise KeyError(f"SQL parameter {name!r} not given")
            macro: Callable[..., str] = getattr(self, name)
            return macro(*[_expand_nested(a, expand) for a in split_args(args)])

        return _MACRO.sub(expand, event_codes_in(sql))


def _expand_nested(text: str, expand: Callable[[re.Match[str]], str]) -> str:
    return _MACRO.sub(expand, text)


@functools.cache  # package files: read once a process (a refresh of --follow reads fifty)
def sql_text(name: str, dialect: str | None = None) -> str:
    """The SQL file ``name`` (``sql/{dialect}/{name}.sql`` first when the engine has its own)."""
    package = resources.files("trace_instrument.traces") / "sql"
    if dialect:
        own = package / dialect / f"{name}.sql"
        if own.is_file():
            return own.read_text(encoding="utf-8")
    return (package / f"{name}.sql").read_text(encoding="utf-8")


@dataclass(frozen=True)
class LoadReport:
    """What loading the raw files left out; ``rejected_per_file`` splits ``rows_rejected`` by file path."""

    skipped: tuple[Skipped, ...]
    rows_rejected: int
    rejected_per_file: tuple[tuple[str, int], ...] = ()

    def of_files(self, paths: set[str]) -> LoadReport:
        """The report of these files alone (entries about the inputs as a whole are kept)."""
        skipped = []
        for s in self.skipped:
            if not s.per_file:
                skipped.append(s)
                continue
            mine = tuple((path, n) for path, n in s.per_file if path in paths)
            count = sum(n for _, n in mine)
            if count:
                examples = tuple(e for e in s.examples if any(_names(e, path) for path, _ in mine))
                skipped.append(Skipped(s.reason, count, examples, mine))
        rejected = tuple((path, n) for path, n in self.rejected_per_file if path in paths)
        return LoadReport(tuple(skipped), sum(n for _, n in rejected), rejected)

    def shown(self) -> LoadReport:
        """The report with SHOWN_EXAMPLES examples per reason (loading keeps that many of each file, so
        that a run among several still has its own)."""
        skipped = tuple(
            Skipped(s.reason, s.count, tuple(sorted(s.examples, key=_example_key))[:SHOWN_EXAMPLES], s.per_file)
            for s in self.skipped
        )
        return LoadReport(skipped, self.rows_rejected, self.rejected_per_file)


SHOWN_EXAMPLES = 3
_AT_LINE = re.compile(r"^(.*?):(\d+)(?: \(.*)?$")


def _example_key(example: str) -> tuple[str, int]:
    """Examples in file order, then line order (whatever order the files were read in)."""
    match = _AT_LINE.match(example)
    return (match.group(1), int(match.group(2))) if match else (example, 0)


def _names(example: str, path: str) -> bool:
    """Whether an example (``path``, ``path:line``, ``path (what)``) is about the file ``path``."""
    return example == path or example.startswith((path + ":", path + " "))


def torn_report(inputs: Inputs) -> LoadReport:
    """The torn last lines of the sample and trajectory files (a run still being written): skipped,
    and the CSV ones counted as rejected rows."""
    kinds = {f.file_id: f.kind for f in inputs.files}
    by_id = {f.file_id: f for f in inputs.files}
    torn_samples = [t for t in inputs.torn if kinds.get(t.file_id) is FileKind.SAMPLE]
    torn_traj = [t for t in inputs.torn if kinds.get(t.file_id) is FileKind.TRAJECTORY]
    skipped = []
    if torn_samples:
        skipped.append(_torn_skip("torn last CSV row (run still being written)", torn_samples, by_id))
    if torn_traj:
        skipped.append(_torn_skip("torn last trajectory line (run still being written)", torn_traj, by_id))
    rejected = per_file([by_id[t.file_id].path for t in torn_samples])
    return LoadReport(tuple(skipped), len(torn_samples), rejected)


def _torn_skip(reason: str, tails: list[TornTail], by_id: dict[int, SourceFile]) -> Skipped:
    examples = tuple(f"{by_id[t.file_id].path} (last line: {t.text[:60]!r})" for t in tails)
    return Skipped(reason, len(tails), examples, per_file([by_id[t.file_id].path for t in tails]))


def sql_string(text: str) -> str:
    """``text`` as a SQL string literal (DuckDB's and standard SQL's quoting)."""
    return "'" + text.replace("'", "''") + "'"


def per_file(paths: Sequence[str]) -> tuple[tuple[str, int], ...]:
    """Counts by path of a list with one path per counted item."""
    counts: dict[str, int] = {}
    for path in paths:
        counts[path] = counts.get(path, 0) + 1
    return tuple(sorted(counts.items()))


def merged(first: LoadReport, more: LoadReport) -> LoadReport:
    """Both reports' skipped rows, summed by reason, and their rejected rows."""
    by_reason: dict[str, Skipped] = {s.reason: s for s in first.skipped}
    for s in more.skipped:
        old = by_reason.get(s.reason)
        if old is None:
            by_reason[s.reason] = s
            continue
        files = dict(old.per_file)
        for path, n in s.per_file:
            files[path] = files.get(path, 0) + n
        examples = old.examples + s.examples
        by_reason[s.reason] = Skipped(s.reason, old.count + s.count, examples, tuple(sorted(files.items())))
    rejected = dict(first.rejected_per_file)
    for path, n in more.rejected_per_file:
        rejected[path] = rejected.get(path, 0) + n
    return LoadReport(
        tuple(by_reason.values()), first.rows_rejected + more.rows_rejected, tuple(sorted(rejected.items()))
    )


_P = ParamSpec("_P")
_T = TypeVar("_T")


class InOrder(Executor):
    """Runs each task as it is submitted, on the submitting thread: queries one after another. A
    task's error is raised by ``submit`` (a pool's future raises it from ``result``)."""

    def submit(self, fn: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs) -> Future[_T]:
        future: Future[_T] = Future()
        future.set_result(fn(*args, **kwargs))
        return future


class Backend(ABC):
    """An engine holding the normalised tables (events, entities, transitions, trajectories, turns)."""

    name = "engine"
    dialect: Dialect

    @abstractmethod
    def load(self, inputs: Inputs) -> LoadReport:
        """Read the raw files into the normalised tables."""

    @abstractmethod
    def run(self, sql: str) -> list[tuple[Any, ...]]:
        """Run one rendered statement and return its rows."""

    def rows(self, view: str, **params: Any) -> list[tuple[Any, ...]]:
        """Rows of the named view (``sql/{view}.sql``)."""
        return self.run(self.dialect.render(sql_text(view, self.dialect.name), params))

    def script(self, name: str, **params: Any) -> None:
        """Run every statement of the named SQL file."""
        for statement in self.statements(name, **params):
            self.run(statement)

    def statements(self, name: str, **params: Any) -> Sequence[str]:
        """The statements of the named SQL file, rendered."""
        return _statements(self.dialect.render(sql_text(name, self.dialect.name), params))

    def build_samples(self) -> None:
        """``entities_all`` (one row per sample) and ``transitions_all``, both keyed by ``skey``.

        ``skey`` is the first of the dialect's sample keys that no two sample ids share in this run.
        """
        *hashes, text = self.dialect.sample_keys("sample_id")
        every = {"target": "entities_all", "events": "events_all"}
        for key in hashes:
            self.script("entities", sample_key=key, **every)
            (shared,) = self.run("SELECT count(*) - count(DISTINCT skey) FROM entities_all")[0]
            if not shared:
                break
            self.drop_table("entities_all")
        else:
            key = text
            self.script("entities", sample_key=key, **every)
        self.sample_key = key
        self.script("transitions", sample_key=key, target="transitions_all", events="events_all", only_bridges="TRUE")
        self.script("transition_summaries", source="transitions_all", suffix="_all")
        self.script("slow_candidates")

    def summarize_events(self) -> None:
        """``event_counts_all`` and ``placeholder_events_all`` from ``events_all`` (event_summaries.sql)."""
        self.script(
            "event_summaries", source="events_all", counts="event_counts_all", placeholders="placeholder_events_all"
        )

    def build_sglang_values(self) -> None:
        """``sglang_values_all`` and ``sglang_buckets_all`` from ``turns_all`` (sglang_values.sql)."""
        self.script("sglang_values", values="sglang_values_all", buckets="sglang_buckets_all", first_traj=0)

    sample_key: str | None = None  # the key build_samples chose

    @abstractmethod
    def drop_table(self, name: str) -> None:
        """Drop a table of the pipeline."""

    run_files: tuple[int, ...] | None = None  # the files of the run the views show (None: every file)

    def select_run(self, file_ids: tuple[int, ...] | None) -> None:
        """Show only the rows of these files (one run's, see runs.py) from the next ``select_steps`` on."""
        self.run_files = file_ids

    # the (steps, files) the views were last pointed at: they are made again only for another selection
    # (a view is bound when a query reads it, so tables built again since need no new views)
    _views_shown: tuple[tuple[int, int] | None, tuple[int, ...] | None] | None = None

    # the statements that made the views as they are shown (side_by_side makes them on each cursor)
    view_statements: tuple[str, ...] = ()

    def select_steps(self, steps: tuple[int, int] | None) -> None:
        """Point the views at the whole run, or at the samples generated in the inclusive step range."""
        if self._views_shown == (steps, self.run_files):
            return
        lo, hi = steps if steps else (0, 0)
        files = self.run_files
        if steps is None and files is None:
            # each view its table as it is: a filter that is always true still costs DuckDB a
            # subquery on every scan (50 ms of each query over a 2-million-row run's events)
            statements = [
                f"CREATE OR REPLACE TEMP VIEW {view} AS SELECT * FROM {table}" for view, table in whole_views()
            ]
        else:
            statements = list(
                self.statements(
                    "views",
                    all="FALSE" if steps else "TRUE",
                    lo=lo,
                    hi=hi,
                    every_file="TRUE" if files is None else "FALSE",
                    run_files=", ".join(str(f) for f in files or ()) or "-1",
                )
            )
        for statement in statements:
            self.run(statement)
        self.view_statements = tuple(statements)
        self._views_shown = (steps, files)

    @contextmanager
    def side_by_side(self) -> Iterator[Executor]:
        """An executor for queries of the views that may run at the same time: while it is open the
        views stay as they are (no ``select_steps``) and no task changes a table. Each task runs
        every query it makes on one connection. This engine runs the tasks one after another."""
        yield InOrder()

    def retry_in_order(self, error: Exception) -> bool:
        """Whether queries that failed with ``error`` side by side may pass one after another
        (from now on they run so); never, on an engine that runs them in order."""
        return False

    @abstractmethod
    def export_parquet(self, table: str, path: str) -> None:
        """Write one normalised table as Parquet."""

    def close(self) -> None:
        """Release the engine."""


def whole_views() -> list[tuple[str, str]]:
    """(view, table) of each view ``views.sql`` defines: what it shows when nothing is selected."""
    return re.findall(r"CREATE OR REPLACE TEMP VIEW (\w+) AS\s+SELECT \* FROM (\w+)", sql_text("views"))


def _statements(sql: str) -> Sequence[str]:
    parts = [p.strip() for p in re.split(r";\s*(?:\n|$)", sql)]
    return [p for p in parts if p and not all(line.strip().startswith("--") for line in p.splitlines())]
