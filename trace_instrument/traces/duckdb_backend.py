"""The default engine: embedded DuckDB, out of core under a memory limit, no server."""

from __future__ import annotations

import json
import os
import queue
import tempfile
import threading
from collections.abc import Iterator
from concurrent.futures import Executor, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb

from trace_instrument.traces.backend import (
    CSV_COLUMNS,
    Backend,
    Dialect,
    InOrder,
    LoadReport,
    merged,
    per_file,
    sql_string,
    torn_report,
)
from trace_instrument.traces.discover import Inputs, TornTail, locate_line
from trace_instrument.traces.model import FileKind, Skipped, SourceFile
from trace_instrument.traces.salvage import (
    NOT_JSON_LINE,
    Salvage,
    ended_lines,
    read_paths,
    refused_per_file,
    salvage_csv,
    skipped_rows,
    unpacked_trajectories,
)

# Only the turn fields a view or the export uses: converting JSON into this struct is the largest
# cost of reading trajectories, and it grows with every field.
_TURN_FIELDS = {
    "turn_index": "BIGINT",
    "prompt_token_count": "BIGINT",
    "completion_token_count": "BIGINT",
    "finish_reason": "VARCHAR",
    "completion_time_ms": "DOUBLE",
    "observation_time_ms": "DOUBLE",
    "sglang_time_ms": "DOUBLE",
    "sglang_queue_time_ms": "DOUBLE",
    "sglang_ttft_ms": "DOUBLE",
    "sglang_prefill_ms": "DOUBLE",
    "sglang_decode_time_ms": "DOUBLE",
}
PAYLOAD_SCHEMA = {
    "request_id": "VARCHAR",
    "n_samples": "BIGINT",
    "global_step": "BIGINT",
    "created_at_ts": "DOUBLE",
    "completed_at_ts": "DOUBLE",
    "total_time_ms": "DOUBLE",
    "turns": [_TURN_FIELDS],
    "agent_stop_reason": "VARCHAR",
    "response_length": "BIGINT",
    "max_response_length": "BIGINT",
    "min_global_steps": "BIGINT",
    "max_global_steps": "BIGINT",
}
TOP_SCHEMA = {"prompt_uid": "VARCHAR", "sample_index": "BIGINT", "raw_message": "VARCHAR"}
EXAMPLES = 3
# How every sample-flow CSV scan reads (raw_events, csv_probe): no header, six typed columns.
CSV_OPTIONS = (
    "columns = {" + ", ".join(f"'{column}': 'VARCHAR'" for column in CSV_COLUMNS) + "}, header = false, "
    "auto_detect = false, delim = ',', quote = '\"', escape = '\"', filename = true"
)
JSONL_MEMORY_LIMIT = "4GB"
# The optimizers that pick a join's build side from cardinality estimates (see _joins_as_written).
JOIN_ORDER_OPTIMIZERS = ("join_order", "build_side_probe_side")
# The tables transition_summaries.sql builds (suffixed _all, and _new, _old in --follow).
TRANSITION_SUMMARIES = ("latency_counts", "tool_counts", "file_pairs")
# The tables slow_candidates.sql builds.
SLOW_CANDIDATES = ("slow_thresholds_all", "slow_candidates_all")


class DuckDBDialect(Dialect):
    name = "duckdb"

    def quantiles(self, expr: str, *points: str) -> str:
        return f"quantile_cont({expr}, [{', '.join(points)}])"

    def top_ids(self, id_expr: str, value: str, k: str) -> str:
        # ties broken by the id (descending), as Spark's sort of (value, id) pairs does
        return f"max_by({id_expr}, struct_pack(v := {value}, i := {id_expr}), {k})"

    def struct(self, **fields: str) -> str:
        return "struct_pack(" + ", ".join(f"{name} := {expr}" for name, expr in fields.items()) + ")"

    def tuple_of(self, *exprs: str) -> str:
        return f"row({', '.join(exprs)})"

    def content_parts(self, column: str) -> str:
        # DuckDB's split_part builds the whole list of fields on every call: one split serves all four
        return f"string_split({column}, '|')"

    def field(self, column: str, parts: str, n: int) -> str:
        return f"{parts}[{n}]"

    def uid_of(self, column: str) -> str:
        # without a regular expression (2 µs an id: 0.13 s for a run's 67,000 samples, 4 s for the
        # 2 million rows of an events export): the fields between slashes but the last, joined again
        return f"array_to_string(string_split({column}, '/')[1:-2], '/')"

    def last_ignore_nulls(self, expr: str) -> str:
        return f"last_value({expr} IGNORE NULLS)"

    def traj_of(self, column: str) -> str:
        # what follows the last slash ('' without one), as uid_of without a regular expression
        return f"CASE WHEN strpos({column}, '/') = 0 THEN '' ELSE string_split({column}, '/')[-1] END"

    def constants(self) -> dict[str, str]:
        return {
            **super().constants(),
            "unit_sep": "\x1f",
            "top_schema": json.dumps(TOP_SCHEMA),
            "payload_schema": json.dumps(PAYLOAD_SCHEMA),
            "csv_options": CSV_OPTIONS,
        }


# the most connections side_by_side runs view queries on (no more than the cores, or --threads):
# two planned at once take most of what there is to take (more contend for DuckDB's own threads)
SIDE_BY_SIDE = 2


class DuckDBBackend(Backend):
    """Holds the normalised tables in a DuckDB database: the cache file, or memory (spilling to ``spill_dir``)."""

    name = "duckdb"

    def __init__(
        self, database: Path | None, spill_dir: Path, memory_limit: str = "1GB", threads: int | None = None
    ) -> None:
        self.dialect = DuckDBDialect()
        self.database = database
        # in memory, the tables skip the compression a database file needs (a third of the loading
        # time); above the memory limit DuckDB moves their blocks to the spill directory
        self.con = duckdb.connect(":memory:" if database is None else str(database))
        self.memory_limit = memory_limit
        self.con.execute(f"SET memory_limit = {sql_string(memory_limit)}")
        self.con.execute(f"SET temp_directory = {sql_string(str(spill_dir))}")
        self.con.execute("SET preserve_insertion_order = false")
        # DuckDB's progress bar would draw into the report's output during long reads
        self.con.execute("SET enable_progress_bar = false")
        if threads:
            self.con.execute(f"SET threads = {int(threads)}")
        self.side_by_side_workers = min(SIDE_BY_SIDE, threads or os.cpu_count() or 1)
        # a side_by_side worker's own connection (a cursor of this database), the cursors, and
        # the view statements each was last given
        self._worker = threading.local()
        self._cursors: list[duckdb.DuckDBPyConnection] = []
        self._cursor_views: dict[int, tuple[str, ...]] = {}

    def run(self, sql: str) -> list[tuple[Any, ...]]:
        con: duckdb.DuckDBPyConnection = getattr(self._worker, "con", self.con)
        return con.execute(sql).fetchall()

    @contextmanager
    def side_by_side(self) -> Iterator[Executor]:
        """Tasks on up to SIDE_BY_SIDE threads, each with a cursor of its own showing the same views
        (in order on this connection with one core or ``--threads 1``).

        Most view queries of a refresh are small, and DuckDB binds and plans a query on one
        thread: most of a small run's views, and 40 % of a 2-million-row run's, went into
        planning. Two connections plan (and run) two queries at once. The cursors are kept for
        the next tasks; their views are made again only when ``select_steps`` changed them.
        """
        if self.side_by_side_workers < 2:
            yield InOrder()
            return
        while len(self._cursors) < self.side_by_side_workers:
            self._cursors.append(self._new_cursor())
        free: queue.SimpleQueue[duckdb.DuckDBPyConnection] = queue.SimpleQueue()
        for cursor in self._cursors:
            self._show_views(cursor)
            free.put(cursor)

        def take_a_cursor() -> None:
            self._worker.con = free.get()

        pool = ThreadPoolExecutor(len(self._cursors), thread_name_prefix="trace-views", initializer=take_a_cursor)
        try:
            yield pool
        except BaseException:
            # Ctrl-C, or a failure on this thread: the queued tasks are dropped and the running
            # queries stopped, rather than waited for (a second signal would then find the
            # connections busy when they are closed)
            pool.shutdown(wait=False, cancel_futures=True)
            for cursor in self._cursors:
                cursor.interrupt()
            raise
        finally:
            pool.shutdown(wait=True)

    def retry_in_order(self, error: Exception) -> bool:
        """Out of memory side by side: the queries running at once share one memory limit, so those
        that fit it one at a time are run so, now and for the rest of this database's life."""
        if isinstance(error, duckdb.OutOfMemoryException) and self.side_by_side_workers > 1:
            self.side_by_side_workers = 1
            return True
        return False

    def _new_cursor(self) -> duckdb.DuckDBPyConnection:
        cursor = self.con.cursor()
        cursor.execute("SET enable_progress_bar = false")  # a setting of each connection
        return cursor

    def _show_views(self, cursor: duckdb.DuckDBPyConnection) -> None:
        """The views (temporary: each connection's own) on ``cursor`` as ``select_steps`` made them."""
        if self._cursor_views.get(id(cursor)) == self.view_statements:
            return
        for statement in self.view_statements:
            cursor.execute(statement)
        self._cursor_views[id(cursor)] = self.view_statements

    def close(self) -> None:
        try:
            for cursor in self._cursors:
                cursor.close()
        finally:
            self._cursors.clear()
            self.con.close()

    def drop_table(self, name: str) -> None:
        self.con.execute(f"DROP TABLE {name}")

    def export_parquet(self, table: str, path: str) -> None:
        self.con.execute(f"COPY {table} TO {sql_string(path)} (FORMAT parquet, COMPRESSION zstd)")

    # -- loading ---------------------------------------------------------------------------------

    def load(self, inputs: Inputs) -> LoadReport:
        return merged(self.load_rows(inputs), torn_report(inputs))

    def load_rows(self, inputs: Inputs) -> LoadReport:
        """Load every file; the report leaves out the torn last lines (``torn_report`` has them)."""
        self._files_table(inputs.files)
        samples = inputs.of_kind(FileKind.SAMPLE)
        torn = {t.file_id: t for t in inputs.torn}
        skipped, rejected = self._sample_rows(samples, torn) if samples else ([], ())
        if not samples:
            self.script("empty_events")
        self.summarize_events()
        self.build_samples()
        trajectories = inputs.of_kind(FileKind.TRAJECTORY)
        if trajectories:
            with tempfile.TemporaryDirectory(prefix="trace-gunzip-") as work:
                # a .gz file is decompressed first: DuckDB's gzip reader allocates sixteen times the
                # longest line it accepts (16 GiB for the 1 GiB a trajectory line may take)
                read, damaged = unpacked_trajectories(trajectories, Path(work))
                self._set_read_paths({f.file_id: read[f.file_id] for f in trajectories if read[f.file_id] != f.path})
                self._read_trajectory_lines(trajectories, read, _jsonl_torn_filter(trajectories, torn, read))
                skipped.extend(damaged)
                skipped.extend(self._jsonl_problems(trajectories, read))
            self.script("trajectory_tables", target="trajectories_all", first_line=0)
        else:
            self.script("empty_trajectories")
        self.build_sglang_values()
        self.select_steps(None)
        return LoadReport(tuple(skipped), sum(n for _, n in rejected), rejected)

    def append(self, new_files: tuple[SourceFile, ...], tails: tuple[SourceFile, ...]) -> LoadReport:
        """Add the lines appended to files already loaded, or in files new since (``analyze --follow``).

        ``tails`` are files holding only the new complete lines, each with the ``file_id`` of the
        file it continues; ``new_files`` join the files table. The new lines are read as a load
        reads them (salvage included), in a database of their own attached beside this one, then
        merged in; the tables built from the rows (samples, transitions, trajectories) are built again.
        The returned report covers the new lines only.
        """
        (main,) = self.run("SELECT current_database()")[0]
        self._insert_files(new_files)
        self.run("ATTACH ':memory:' AS delta")
        try:
            self.run("USE delta")
            try:
                report = self._load_tails(tails)
            finally:
                self.run(f"USE {main}")
            if any(t.kind is FileKind.SAMPLE for t in tails):
                self._append_events()
                self._update_samples()
            if any(t.kind is FileKind.TRAJECTORY for t in tails):
                self._append_trajectories()
        finally:
            self.run("DETACH DATABASE IF EXISTS delta")
        self.select_steps(None)
        return report

    def _append_events(self) -> None:
        """The appended rows (in ``delta``) join ``contents`` and ``events_all``, and their
        summaries the run's (event_summaries.sql)."""
        try:
            self.script("append_events")
            self.script(
                "event_summaries",
                source="appended_events",
                counts="event_counts_new",
                placeholders="placeholder_events_new",
            )
            self.script("merge_event_summaries")
        finally:
            for table in ("appended_events", "event_counts_new", "placeholder_events_new"):
                self.run(f"DROP TABLE IF EXISTS {table}")

    def _append_trajectories(self) -> None:
        """The appended trajectory lines (in ``delta.traj_lines``) join ``traj_lines``, and their rows
        ``trajectories_all``; the rows already there are kept."""
        (first_line,) = self.run("SELECT coalesce(max(rowid) + 1, 0) FROM traj_lines")[0]
        self.run("INSERT INTO traj_lines SELECT * FROM delta.traj_lines")
        try:
            self.script("trajectory_tables", target="trajectories_new", first_line=first_line)
            self.run("INSERT INTO trajectories_all SELECT * FROM trajectories_new")
            self.script(
                "sglang_values", values="sglang_values_new", buckets="sglang_buckets_new", first_traj=first_line
            )
            self.script("merge_sglang_values")
        finally:
            for table in ("trajectories_new", "sglang_values_new", "sglang_buckets_new"):
                self.run(f"DROP TABLE IF EXISTS {table}")

    def _update_samples(self) -> None:
        """``entities_all``, ``transitions_all`` and the transition summaries brought up to date with
        the rows appended (in ``delta.events_all``): the samples those rows belong to, and the
        bridges to the trajectories of their prompts, are built again, the rest is kept; the
        summaries gain the new transitions and lose those they replace. A sample key two ids now
        share builds everything again whole."""
        key = self.sample_key
        if key is None:
            self._rebuild_samples()
            return
        touched = "sample_id IN (SELECT sample_id FROM touched_samples)"
        try:
            self.run("CREATE TEMP TABLE touched_samples AS SELECT DISTINCT sample_id FROM delta.events_all")
            # one scan of the events for both tables: the rest of the work is on these rows alone
            self.run(
                f"CREATE TEMP TABLE touched_events AS SELECT * FROM events_all WHERE {self._since_touched()}{touched}"
            )
            self.run(
                f"CREATE TEMP TABLE touched_uids AS SELECT DISTINCT {self.dialect.uid_of('sample_id')} AS uid "
                "FROM touched_samples"
            )
            self.script("entities", sample_key=key, target="entities_new", events="touched_events")
            self.run(f"DELETE FROM entities_all WHERE {touched}")
            self.run("INSERT INTO entities_all SELECT * FROM entities_new")
            (shared,) = self.run(
                "SELECT count(*) FROM entities_new AS n JOIN entities_all AS e ON e.skey = n.skey AND e.sample_id <> n.sample_id"
            )[0]
            if shared:
                self._rebuild_samples()
                return
            self._replace_transitions(key)
        finally:
            for table in ("touched_samples", "touched_events", "touched_uids", "entities_new"):
                self.run(f"DROP TABLE IF EXISTS {table}")

    def _since_touched(self) -> str:
        """A condition on ``ts`` that every row the touched samples are built from meets (``AND``
        after it), or nothing: their rows as entities.sql reads them are no older than their
        samples' first rows, or, for a sample new in this refresh, than the appended rows. A scan
        then skips the blocks of events older than that."""
        (oldest,) = self.run(
            "SELECT min(ts) FROM (SELECT first_ts AS ts FROM entities_all "
            "WHERE sample_id IN (SELECT sample_id FROM touched_samples) "
            "UNION ALL SELECT min(ts) FROM delta.events_all) AS firsts"
        )[0]
        return "" if oldest is None else f"ts >= {int(oldest)} AND "

    def _replace_transitions(self, key: str) -> None:
        """The touched samples' transitions, and the bridges to the trajectories of their prompts,
        built again; the transition summaries gain the new ones and lose the old."""
        # a sample's own transitions carry its rows' content ids; the bridges from a prompt's
        # sample-level rows to its trajectories have none
        replaced = (
            "(cid IS NOT NULL AND skey IN (SELECT skey FROM entities_new)) OR (cid IS NULL AND skey IN "
            "(SELECT skey FROM entities_all WHERE is_traj AND uid IN (SELECT uid FROM touched_uids)))"
        )
        tables = ("transitions_old", "transitions_new") + tuple(
            f"{summary}_{part}" for summary in TRANSITION_SUMMARIES for part in ("old", "new")
        )
        try:
            self.run(
                f"CREATE TEMP TABLE transitions_old AS SELECT rowid AS replaced_row, * FROM transitions_all WHERE {replaced}"
            )
            self.run("DELETE FROM transitions_all WHERE rowid IN (SELECT replaced_row FROM transitions_old)")
            self.script(
                "transitions",
                sample_key=key,
                target="transitions_new",
                events="touched_events",
                only_bridges="t.uid IN (SELECT uid FROM touched_uids)",
            )
            self.run("INSERT INTO transitions_all SELECT * FROM transitions_new")
            self.script("transition_summaries", source="transitions_new", suffix="_new")
            self.script("transition_summaries", source="transitions_old", suffix="_old")
            self.script("merge_transition_summaries")
            self.script("merge_slow_candidates")
            if self.run("SELECT count(*) FROM slow_thresholds_lower")[0][0]:
                # a kind's third largest latency went down (its slowest were replaced by faster
                # ones): transitions below the old threshold may now be among the slowest
                for table in SLOW_CANDIDATES:
                    self.run(f"DROP TABLE {table}")
                self.script("slow_candidates")
        finally:
            for table in (*tables, "slow_thresholds_new", "slow_thresholds_lower"):
                self.run(f"DROP TABLE IF EXISTS {table}")

    def _rebuild_samples(self) -> None:
        derived = (*(f"{summary}_all" for summary in TRANSITION_SUMMARIES), *SLOW_CANDIDATES)
        for table in ("entities_all", "transitions_all", *derived):
            self.run(f"DROP TABLE IF EXISTS {table}")
        self.build_samples()

    def _load_tails(self, tails: tuple[SourceFile, ...]) -> LoadReport:
        """The rows of ``tails`` into the current (attached) database: raw tables only."""
        self._files_table(tails)
        samples = [t for t in tails if t.kind is FileKind.SAMPLE]
        skipped, rejected = self._sample_rows(samples, {}) if samples else ([], ())
        trajectories = [t for t in tails if t.kind is FileKind.TRAJECTORY]
        if trajectories:
            read = {t.file_id: t.path for t in trajectories}
            self._read_trajectory_lines(trajectories, read, "TRUE")
            skipped.extend(self._jsonl_problems(trajectories, read))
        return LoadReport(tuple(skipped), sum(n for _, n in rejected), rejected)

    def _read_trajectory_lines(self, files: list[SourceFile], read: dict[int, str], torn_filter: str) -> None:
        """``traj_lines`` from the trajectory files (read from ``read``, by file id), in the lines' order."""
        # a very long line (a 100 MB trajectory) needs a read buffer of a few times its size; the
        # limit is raised for this statement only (ordinary lines never allocate such buffers)
        self.run(f"SET memory_limit = {sql_string(JSONL_MEMORY_LIMIT)}")
        # the lines' order gives each trajectory its id and each bad line its place among the first
        # shown: without it, the threads' order, which changed from one read to the next
        self.run("SET preserve_insertion_order = true")
        try:
            self.script(
                "trajectories",
                paths=_paths(files, read),
                file_ids="[" + ", ".join(str(f.file_id) for f in files) + "]",
                torn_filter=torn_filter,
            )
        finally:
            self.run("SET preserve_insertion_order = false")
            self.run(f"SET memory_limit = {sql_string(self.memory_limit)}")

    def _sample_rows(
        self, samples: list[SourceFile], torn: dict[int, TornTail]
    ) -> tuple[list[Skipped], tuple[tuple[str, int], ...]]:
        """``contents`` and ``events_all`` from ``samples``: what was skipped, and the rows refused by file."""
        salvaged = self._read_events(samples, torn)
        return skipped_rows(salvaged), refused_per_file(salvaged)

    @contextmanager
    def _joins_as_written(self) -> Iterator[None]:
        """Run statements with each join's right side as its hash table, as the SQL is written.

        DuckDB guesses a few thousand rows for any CSV scan, before reading it. A run with more
        distinct contents than that (a long run: each step has its own) got its hash table built on
        the millions of CSV rows instead of the contents: three times slower, and spilling to disk.
        The events SQL puts the small side of each join on the right.
        """
        available = {name for (name,) in self.run("SELECT name FROM duckdb_optimizers()")}
        names = [name for name in JOIN_ORDER_OPTIMIZERS if name in available]
        self.run(f"SET disabled_optimizers = {sql_string(', '.join(names))}")
        try:
            yield
        finally:
            self.run("RESET disabled_optimizers")

    def _files_table(self, files: tuple[SourceFile, ...]) -> None:
        self.con.execute(
            "CREATE TABLE files (file_id INTEGER, path VARCHAR, kind VARCHAR, root VARCHAR, host VARCHAR, pid BIGINT, "
            "read_path VARCHAR)"
        )
        self._insert_files(files)

    def _insert_files(self, files: tuple[SourceFile, ...]) -> None:
        if files:
            # one statement: executemany runs one statement per file (50 ms for 64 files)
            rows = ", ".join(["(?, ?, ?, ?, ?, ?, ?)"] * len(files))
            values = [v for f in files for v in (f.file_id, f.path, f.kind, f.root, f.host, f.pid, f.path)]
            self.con.execute(f"INSERT INTO files VALUES {rows}", values)

    def _read_events(self, samples: list[SourceFile], torn: dict[int, TornTail]) -> list[Salvage]:
        """``contents`` and ``events_all`` from the sample files; damaged files are read through salvage.py.

        One scan reads every file. A file that stops the scan (DuckDB's parser gives up on it), or in
        which the scan refused rows, is copied row by row without its bad rows and the scan runs
        again on the copies: at most three scans, the last one on clean files only.
        """
        salvaged: dict[int, Salvage] = {}
        with tempfile.TemporaryDirectory(prefix="trace-salvage-") as work:
            for attempt in range(3):
                rejects = f"csv_rejects_{attempt}"
                try:
                    self.script(
                        "raw_events",
                        paths=_paths(samples, read_paths(samples, salvaged)),
                        torn_filter=_csv_torn_filter(samples, torn),
                        rejects=rejects,
                    )
                    with self._joins_as_written():
                        self.script("events")
                except duckdb.Error:
                    self._drop_events()
                    damaged = self._files_that_stop_a_scan(samples, salvaged)
                    if not damaged:
                        raise
                else:
                    damaged = self._files_with_rejects(samples, torn, rejects) + self._files_with_odd_timestamps(
                        samples
                    )
                    damaged += self._files_with_lost_lines(samples, salvaged, damaged)
                    if not damaged:
                        return list(salvaged.values())
                    self._drop_events()
                for f in damaged:
                    salvaged[f.file_id] = salvage_csv(
                        f.path, Path(work) / f"{f.file_id}.csv", torn[f.file_id].text if f.file_id in torn else None
                    )
                self._set_read_paths({file_id: str(s.clean_path) for file_id, s in salvaged.items()})
        raise duckdb.InvalidInputException("the sample files could not be read, even row by row")

    def _drop_events(self) -> None:
        for table in ("events_all", "contents"):
            self.run(f"DROP TABLE IF EXISTS {table}")

    def _files_that_stop_a_scan(self, samples: list[SourceFile], salvaged: dict[int, Salvage]) -> list[SourceFile]:
        damaged = []
        for f in samples:
            if f.file_id in salvaged:
                continue
            try:
                self.rows("csv_probe", paths=sql_string(f.path))
            except duckdb.Error:
                damaged.append(f)
        return damaged

    def _files_with_rejects(
        self, samples: list[SourceFile], torn: dict[int, TornTail], rejects: str
    ) -> list[SourceFile]:
        """The files with a refused line other than their torn last line (which is reported as torn)."""
        torn_lines = {(f.path, torn[f.file_id].text.rstrip("\r")) for f in samples if f.file_id in torn}
        paths = {
            path
            for path, _line, text in self.rows("rejects", rejects=rejects)
            if (path, (text or "").strip("\r\n")) not in torn_lines
        }
        return [f for f in samples if f.path in paths]

    def _files_with_lost_lines(
        self, samples: list[SourceFile], salvaged: dict[int, Salvage], damaged: list[SourceFile]
    ) -> list[SourceFile]:
        """The files read whole (not through salvage.py, not known damaged) whose rows are fewer or
        more than their complete lines. DuckDB 2.0's one scan of more files than it has threads
        drops the rest of a file after a quote that is never closed and records no refused line
        for it: the rows would be lost without a word. Every complete line of such a file is a row
        or a refused line (the torn last line has no line feed), so the count tells, whatever the
        cause; salvage.py then reads the file row by row."""
        known = {f.file_id for f in damaged} | set(salvaged)
        whole = [f for f in samples if f.file_id not in known]
        rows = {int(fid): int(n) for fid, n in self.run("SELECT file_id, count(*) FROM events_all GROUP BY file_id")}
        return [f for f, lines in zip(whole, ended_lines([f.path for f in whole])) if lines != rows.get(f.file_id, 0)]

    def _files_with_odd_timestamps(self, samples: list[SourceFile]) -> list[SourceFile]:
        """The files with a timestamp DuckDB would read but not as plain digits (``1e3``, ``+5``,
        ``0x10``: events.sql leaves such a ts NULL); salvage.py judges them as Spark does."""
        odd = {int(fid) for (fid,) in self.run("SELECT DISTINCT file_id FROM events_all WHERE ts IS NULL")}
        return [f for f in samples if f.file_id in odd]

    def _set_read_paths(self, copies: dict[int, str]) -> None:
        """Point ``files.read_path`` (what the scans' file names are joined on) at the copies read instead."""
        for file_id, path in copies.items():
            self.con.execute("UPDATE files SET read_path = ? WHERE file_id = ?", [path, file_id])

    def rename_files(self, paths: dict[int, str]) -> None:
        """Give files their names (``analyze --follow`` loads copies, and a file compressed in place
        is read on under its new name)."""
        for file_id, path in paths.items():
            self.con.execute("UPDATE files SET path = ? WHERE file_id = ?", [path, file_id])

    def _jsonl_problems(self, files: list[SourceFile], read: dict[int, str]) -> list[Skipped]:
        by_id = {f.file_id: f for f in files}
        problems: list[Skipped] = []
        # the first three of each file (a run among several shows its own), their total on every row
        bad = self.run(
            "SELECT file_id, bad_text, n FROM (SELECT file_id, bad_text, rowid AS line, count(*) OVER () AS n, "
            "row_number() OVER (PARTITION BY file_id ORDER BY rowid) AS k FROM traj_lines WHERE NOT is_json) "
            f"WHERE k <= {EXAMPLES} ORDER BY file_id, line"
        )
        if bad:
            examples = tuple(_where(by_id[fid].path, text) for fid, text, _ in bad)
            counts = self._per_file(by_id, "NOT is_json")
            problems.append(Skipped(NOT_JSON_LINE, int(bad[0][2]), examples, counts))
        odd_lines = "is_json AND (p IS NULL OR (p.request_id IS NULL AND p.turns IS NULL))"
        odd = self.run(
            "SELECT file_id, n FROM (SELECT file_id, rowid AS line, count(*) OVER () AS n, "
            f"row_number() OVER (PARTITION BY file_id ORDER BY rowid) AS k FROM traj_lines WHERE {odd_lines}) "
            f"WHERE k <= {EXAMPLES} ORDER BY file_id, line"
        )
        if odd:
            examples = tuple(by_id[fid].path for fid, _ in odd)
            counts = self._per_file(by_id, odd_lines)
            problems.append(Skipped("JSON line that is not a trajectory", int(odd[0][1]), examples, counts))
        rejects = self.run(
            "SELECT s.file_path, e.line, any_value(CAST(e.error_type AS VARCHAR)) FROM jsonl_rejects AS e "
            "JOIN jsonl_scans AS s ON s.scan_id = e.scan_id AND s.file_id = e.file_id "
            "GROUP BY s.file_path, e.line ORDER BY 1, 2"
        )
        if rejects:
            source = {read[f.file_id]: f.path for f in files}
            first: dict[str, int] = {}
            examples_list = []
            for path, line, error in rejects:  # the first three of each file
                first[path] = first.get(path, 0) + 1
                if first[path] <= EXAMPLES:
                    examples_list.append(f"{source.get(path, path)}:{line} ({error.lower()})")
            examples = tuple(examples_list)
            counts = per_file([source.get(path, path) for path, _, _ in rejects])
            problems.append(Skipped("trajectory line refused (bad bytes or too long)", len(rejects), examples, counts))
        return problems

    def _per_file(self, by_id: dict[int, SourceFile], where: str) -> tuple[tuple[str, int], ...]:
        """The traj_lines matching ``where``, counted by file path."""
        rows = self.run(f"SELECT file_id, count(*) FROM traj_lines WHERE {where} GROUP BY file_id")
        return tuple(sorted((by_id[fid].path, int(n)) for fid, n in rows))


def _paths(files: list[SourceFile], read: dict[int, str]) -> str:
    """The paths the files are read from (``read``, by file id), as a SQL list."""
    return "[" + ", ".join(sql_string(read[f.file_id]) for f in files) + "]"


def _csv_torn_filter(samples: list[SourceFile], torn: dict[int, TornTail]) -> str:
    clauses = []
    for f in samples:
        tail = torn.get(f.file_id)
        if tail is None or len(tail.fields) != 6:
            continue
        clauses.append(
            f"(f.file_id = {f.file_id} AND r.sample_id = {sql_string(tail.fields[2])} "
            f"AND r.ts = {sql_string(tail.fields[4])} AND r.content = {sql_string(tail.fields[5])})"
        )
    return "NOT (" + " OR ".join(clauses) + ")" if clauses else "TRUE"


def _jsonl_torn_filter(files: list[SourceFile], torn: dict[int, TornTail], read: dict[int, str]) -> str:
    clauses = [
        f"(filename = {sql_string(read[f.file_id])} AND line = {sql_string(torn[f.file_id].text)})"
        for f in files
        if f.file_id in torn
    ]
    return "NOT (" + " OR ".join(clauses) + ")" if clauses else "TRUE"


def _where(path: str, text: str | None) -> str:
    line = locate_line(path, (text or "")[:60]) if text else None
    return f"{path}:{line}" if line else path
