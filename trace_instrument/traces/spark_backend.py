"""``analyze --engine spark``: the same SQL files on Spark (the optional ``spark`` extra, pyspark).

Local mode by default (``local[2]``); ``--spark-master`` points it at a cluster. The raw files
are read with Spark's DataFrame readers (CSV with a fixed schema, JSONL as text), so the
trace folders must be visible to the executors under the same paths (a shared file
system); every view after that is the shared SQL. Tables are cached temp views.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from trace_instrument.traces.backend import CSV_COLUMNS, Backend, Dialect, LoadReport, merged, torn_report
from trace_instrument.traces.discover import Inputs, TornTail
from trace_instrument.traces.gunzip import gunzip
from trace_instrument.traces.model import FileKind, Skipped, SourceFile
from trace_instrument.traces.salvage import (
    NOT_JSON_LINE,
    Salvage,
    nul_tail,
    read_paths,
    refused_per_file,
    salvage_csv,
    skipped_rows,
    unpacked_trajectories,
)

_TURN = (
    "struct<turn_index:bigint,prompt_token_count:bigint,completion_token_count:bigint,finish_reason:string,"
    "completion_time_ms:double,observation_time_ms:double,sglang_time_ms:double,"
    "sglang_queue_time_ms:double,sglang_ttft_ms:double,sglang_prefill_ms:double,sglang_decode_time_ms:double>"
)
PAYLOAD_SCHEMA = (
    "struct<request_id:string,n_samples:bigint,global_step:bigint,created_at_ts:double,completed_at_ts:double,"
    f"total_time_ms:double,turns:array<{_TURN}>,agent_stop_reason:string,response_length:bigint,"
    "max_response_length:bigint,min_global_steps:bigint,max_global_steps:bigint>"
)
TOP_SCHEMA = "struct<prompt_uid:string,sample_index:bigint,raw_message:string>"
_CREATE_TABLE = re.compile(r"^\s*(?:--[^\n]*\n\s*)*CREATE (?:TEMP )?TABLE (\w+) AS", re.IGNORECASE)


def _lit(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


class SparkDialect(Dialect):
    name = "spark"
    text_type = "STRING"

    def quantiles(self, expr: str, *points: str) -> str:
        return f"percentile({expr}, array({', '.join(points)}))"

    def top_ids(self, id_expr: str, value: str, k: str) -> str:
        return (
            f"transform(slice(sort_array(collect_list(named_struct('v', {value}, 'i', {id_expr})), false), 1, {k}), "
            "x -> x.i)"
        )

    def struct(self, **fields: str) -> str:
        return "named_struct(" + ", ".join(f"'{name}', {expr}" for name, expr in fields.items()) + ")"

    def starts_with(self, expr: str, prefix: str) -> str:
        return f"startswith({expr}, '{prefix}')"

    def position(self, expr: str, needle: str) -> str:
        return f"instr({expr}, '{needle}')"

    def hash_of(self, expr: str) -> str:
        return f"xxhash64({expr})"  # Spark's hash() has 32 bits: a run of 100,000 samples shares some

    def uid_of(self, column: str) -> str:
        # string functions, as DuckDB's: a regular expression's `.` and `$` treat line ends apart
        # (Java's stop at \r, \u2028 and more), and a CSV field may hold one
        return (
            f"CASE WHEN instr({column}, '/') = 0 THEN '' "
            f"ELSE substring({column}, 1, length({column}) - instr(reverse({column}), '/')) END"
        )

    def traj_of(self, column: str) -> str:
        return f"CASE WHEN instr({column}, '/') = 0 THEN '' ELSE substring_index({column}, '/', -1) END"

    def last_ignore_nulls(self, expr: str) -> str:
        return f"last({expr}, true)"

    def constants(self) -> dict[str, str]:
        return {**super().constants(), "top_schema": TOP_SCHEMA, "payload_schema": PAYLOAD_SCHEMA}


class SparkBackend(Backend):
    """Runs the views on a SparkSession (created here, stopped by ``close``)."""

    name = "spark"

    def __init__(self, master: str | None = None) -> None:
        try:
            from pyspark.sql import SparkSession
        except ImportError as exc:  # the CLI turns this into advice
            raise ImportError("pyspark is not installed") from exc
        self.dialect = SparkDialect()
        builder = (
            SparkSession.builder.master(master or "local[2]")
            .appName("trace-instrument analyze")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.sql.shuffle.partitions", "4")
            .config("spark.sql.ansi.enabled", "false")
            .config("spark.driver.memory", "1g")
        )
        self.spark = builder.getOrCreate()
        self._work: str | None = None  # the clean copies of damaged sample files
        self._inputs_files: tuple[SourceFile, ...] = ()
        self._salvaged: dict[int, Salvage] = {}
        self._unpacked: dict[int, str] = {}  # the decompressed copy of each gzip trajectory file
        self.spark.sparkContext.setLogLevel("ERROR")

    def run(self, sql: str) -> list[tuple[Any, ...]]:
        match = _CREATE_TABLE.match(sql)
        if match:  # a table of the pipeline: a cached temp view
            sql = sql[: match.start()] + f"CACHE TABLE {match.group(1)} AS" + sql[match.end() :]
        return [tuple(_plain(v) for v in row) for row in self.spark.sql(sql).collect()]

    def drop_table(self, name: str) -> None:
        self.spark.sql(f"UNCACHE TABLE IF EXISTS {name}")
        self.spark.catalog.dropTempView(name)

    def close(self) -> None:
        self.spark.catalog.clearCache()
        self.spark.stop()
        if self._work:
            shutil.rmtree(self._work, ignore_errors=True)

    def export_parquet(self, table: str, path: str) -> None:
        self.spark.table(table).write.mode("overwrite").parquet(path)

    def load(self, inputs: Inputs) -> LoadReport:
        self._files(inputs.files)
        torn = {t.file_id: t for t in inputs.torn}
        samples = inputs.of_kind(FileKind.SAMPLE)
        skipped: list[Skipped] = []
        rejected: tuple[tuple[str, int], ...] = ()
        if samples:
            salvaged = self._read_csv(samples, torn)
            self.script("raw_events", torn_filter=_csv_torn_filter(samples, torn))
            self.script("events")
            skipped.extend(skipped_rows(salvaged))
            rejected = refused_per_file(salvaged)
        else:
            self.script("empty_events")
        self.summarize_events()
        self.build_samples()
        trajectories = inputs.of_kind(FileKind.TRAJECTORY)
        if trajectories:
            # read from decompressed copies, as DuckDB reads them: a cut .gz stops Spark's reader
            # with an EOFException, and the lines before the cut are kept
            read, damaged = unpacked_trajectories(trajectories, Path(self._work_dir()))
            self._unpacked = {f.file_id: read[f.file_id] for f in trajectories if read[f.file_id] != f.path}
            self._files(self._inputs_files, self._salvaged)
            skipped.extend(damaged)
            self._read_text([read[f.file_id] for f in trajectories])
            self.script("trajectories", torn_filter=_jsonl_torn_filter(trajectories, torn))
            paths = {f.file_id: f.path for f in trajectories}
            bad = self.run("SELECT file_id, count(*) FROM traj_lines WHERE NOT is_json GROUP BY file_id")
            if bad:
                files = tuple(sorted((paths[int(fid)], int(n)) for fid, n in bad))
                skipped.append(Skipped(NOT_JSON_LINE, sum(n for _, n in files), (), files))
        else:
            self.script("empty_trajectories")
        self.build_sglang_values()
        self.select_steps(None)
        rows = LoadReport(tuple(skipped), sum(n for _, n in rejected), tuple(rejected))
        return merged(rows, torn_report(inputs))

    def _files(self, files: tuple[SourceFile, ...], salvaged: dict[int, Salvage] | None = None) -> None:
        """The ``files`` table; ``uri`` is the file Spark reads (a damaged file's clean copy in its place)."""
        self._inputs_files = files
        self._salvaged = salvaged or {}
        read = {**read_paths(list(files), self._salvaged), **self._unpacked}
        rows = [(f.file_id, f.path, _uri(read[f.file_id]), f.kind, f.root, f.host, f.pid) for f in files]
        schema = "file_id INT, path STRING, uri STRING, kind STRING, root STRING, host STRING, pid BIGINT"
        self.spark.createDataFrame(rows, schema).createOrReplaceTempView("files")

    def _read_csv(self, samples: list[SourceFile], torn: dict[int, TornTail]) -> list[Salvage]:
        """``raw_csv`` from the sample files; damaged ones are read through salvage.py, as DuckDB does.

        Spark's permissive reader accepts what DuckDB refuses (bad bytes become U+FFFD, a stray quote
        stays in the field): a file with a row it could not fill, a replacement character or a quote
        left in a field is damaged, or at worst quoted in a way only a row-by-row reading tells.
        """
        from pyspark.sql.functions import input_file_name

        work = Path(self._work_dir())
        # a gzip file cut short stops Spark's reader (an EOFException), a last line of NUL bytes
        # it passes over: such files are read row by row
        salvaged = {
            f.file_id: salvage_csv(
                f.path, work / f"{f.file_id}.csv", torn[f.file_id].text if f.file_id in torn else None
            )
            for f in samples
            if (f.path.endswith(".gz") and not gunzip(f.path, Path(os.devnull)).complete) or nul_tail(f.path)
        }
        readable = [f.path for f in samples if f.file_id not in salvaged]
        suspects: set[str] = set()
        if readable:
            frame = self._csv_frame(readable).withColumn("path", input_file_name())
            frame.createOrReplaceTempView("raw_csv")
            suspects = {
                row[0]
                for row in self.run(
                    "SELECT DISTINCT path FROM raw_csv WHERE _corrupt IS NOT NULL OR ts IS NULL OR content IS NULL "
                    "OR instr(concat_ws(',', job_id, cat, sample_id, status, content), '\ufffd') > 0 "
                    "OR instr(concat_ws(',', job_id, cat, sample_id, status, content), '\"') > 0 "
                    # a timestamp Spark would cast but salvage refuses (1e3, +5): events.sql leaves it NULL
                    f"OR {self.dialect.plain_timestamp('ts')} IS NULL"
                )
            }
        uris = {_uri(f.path): f for f in samples}
        for uri in sorted(suspects):
            f = uris[uri]
            tail = torn[f.file_id].text if f.file_id in torn else None
            salvaged[f.file_id] = salvage_csv(f.path, work / f"{f.file_id}.csv", tail)
        if salvaged:
            self._files(self._inputs_files, salvaged)
            whole = [f.path for f in samples if f.file_id not in salvaged]
            # a clean copy keeps a quoted field's line breaks (DuckDB reads such a row from the
            # original file as one row): each copy is read whole, rows across lines
            copies = [str(salvaged[f.file_id].clean_path) for f in samples if f.file_id in salvaged]
            frame = self._csv_frame(copies, multiline=True)
            if whole:
                frame = self._csv_frame(whole).unionByName(frame)
            frame.withColumn("path", input_file_name()).createOrReplaceTempView("raw_csv")
        return list(salvaged.values())

    def _csv_frame(self, paths: list[str], multiline: bool = False) -> Any:
        return self.spark.read.csv(
            paths,
            multiLine=multiline,
            schema=", ".join(f"{column} STRING" for column in (*CSV_COLUMNS, "_corrupt")),
            header=False,
            quote='"',
            escape='"',
            mode="PERMISSIVE",
            columnNameOfCorruptRecord="_corrupt",
            encoding="UTF-8",
        )

    def _work_dir(self) -> str:
        """The folder of this engine's copies (clean sample files, decompressed trajectory files)."""
        if self._work is None:
            self._work = tempfile.mkdtemp(prefix="trace-salvage-")
        return self._work

    def _read_text(self, paths: list[str]) -> None:
        from pyspark.sql.functions import input_file_name

        frame = self.spark.read.text(paths).withColumn("path", input_file_name())
        frame.createOrReplaceTempView("traj_text")


def _uri(path: str) -> str:
    return Path(path).resolve().as_uri()


def _plain(value: Any) -> Any:
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _csv_torn_filter(samples: list[SourceFile], torn: dict[int, TornTail]) -> str:
    clauses = []
    for f in samples:
        tail = torn.get(f.file_id)
        if tail is None or len(tail.fields) != 6:
            continue
        clauses.append(
            f"(f.file_id = {f.file_id} AND r.sample_id = {_lit(tail.fields[2])} AND r.ts = {_lit(tail.fields[4])} "
            f"AND r.content = {_lit(tail.fields[5])})"
        )
    return "NOT (" + " OR ".join(clauses) + ")" if clauses else "TRUE"


def _jsonl_torn_filter(files: list[SourceFile], torn: dict[int, TornTail]) -> str:
    clauses = [
        f"(f.file_id = {f.file_id} AND t.value = {_lit(torn[f.file_id].text)})" for f in files if f.file_id in torn
    ]
    return "NOT (" + " OR ".join(clauses) + ")" if clauses else "TRUE"
