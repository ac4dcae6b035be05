"""One damaged sample file never costs the good ones: its bad rows are counted at their lines, the rest is read.

The damage is built by hand, so each expected count and line number is known from the construction;
the rows that must still be read are counted from the pristine files (recompute.read_rows).
"""

from __future__ import annotations

import gzip
import shutil
import zlib
from pathlib import Path

import pytest
from recompute import read_rows, trajectories
from typer.testing import CliRunner

from trace_instrument.cli import app
from trace_instrument.traces.analyze import Options, analyze
from trace_instrument.traces.salvage import RowProblem, salvage_csv

runner = CliRunner()
GOOD_ROW = (
    b"job-tiny,sample,33333333-cccc-4ccc-cccc-333333333333/0,RUNNING,1787215021000,from=A|to=B|stage=MYSTERY|detail=x"
)


def _skipped(result) -> dict[str, tuple[int, tuple[str, ...]]]:
    return {s.reason: (s.count, s.examples) for s in result.header.skipped}


def _worker_csv(trace: Path) -> Path:
    return next((trace / "sample").glob("node-b-*.csv"))


@pytest.fixture
def copy(tiny_run: Path, tmp_path: Path) -> Path:
    return shutil.copytree(tiny_run, tmp_path / "trace")


def test_a_bare_line_feed_inside_a_crlf_file_costs_one_line(copy: Path, tiny_run: Path) -> None:
    worker = _worker_csv(copy)
    lines = worker.read_bytes().splitlines()
    damaged = lines[:5] + [lines[5] + b"\nstray"] + lines[6:]  # line 7 of the file is the stray half
    worker.write_bytes(b"\r\n".join(damaged) + b"\r\n")
    result = analyze([copy], Options(cache=False))
    assert _skipped(result)[RowProblem.TOO_FEW_COLUMNS.value] == (1, (f"{worker}:7",))
    assert result.header.rows_read == len(read_rows(tiny_run))
    pristine = analyze([tiny_run], Options(cache=False))
    assert result.latencies == pristine.latencies and result.funnel == pristine.funnel


def test_a_corrupt_file_among_good_ones_is_counted_line_by_line(copy: Path, tiny_run: Path) -> None:
    corrupt = copy / "sample" / "node-z-pid9.csv"
    corrupt.write_bytes(
        b"\xff\xfe\x00garbage\n"  # 1: not UTF-8
        b'job,sample,u/0,RUNNING,1787215021000,"never closed\n'  # 2: a quote that never closes
        b"a,b,c\n"  # 3: too few columns
        b"job,sample,u/0,RUNNING,soon,from=A|to=B|stage=X\n"  # 4: the timestamp is not a number
        b"job,sample,u/0,RUNNING,1,2,3,4\n"  # 5: too many columns
        b'job,sample,u/0,RUN"NING,1787215021000,from=A|to=B|stage=X\n'  # 6: a quote inside a field
    )
    result = analyze([copy], Options(cache=False))
    skipped = _skipped(result)
    assert skipped[RowProblem.NOT_UTF8.value] == (1, (f"{corrupt}:1",))
    assert skipped[RowProblem.BAD_QUOTING.value] == (2, (f"{corrupt}:2", f"{corrupt}:6"))
    assert skipped[RowProblem.TOO_FEW_COLUMNS.value] == (1, (f"{corrupt}:3",))
    assert skipped[RowProblem.BAD_TIMESTAMP.value] == (1, (f"{corrupt}:4",))
    assert skipped[RowProblem.TOO_MANY_COLUMNS.value] == (1, (f"{corrupt}:5",))
    assert result.header.rows_read == len(read_rows(tiny_run))
    assert result.header.rows_rejected == 6


def test_a_file_that_stops_the_scan_and_one_with_refused_rows_are_both_read(copy: Path, tiny_run: Path) -> None:
    worker = _worker_csv(copy)
    with open(worker, "ab") as f:
        f.write(b"a,b,c\n" + GOOD_ROW + b"\n")  # refused row, then one more good (unknown-stage) row
    (copy / "sample" / "node-z-pid9.csv").write_bytes(b'x,"y\n' * 3 + GOOD_ROW + b"\n")
    result = analyze([copy], Options(cache=False))
    skipped = _skipped(result)
    n = len(worker.read_bytes().splitlines())
    assert skipped[RowProblem.TOO_FEW_COLUMNS.value] == (1, (f"{worker}:{n - 1}",))
    assert skipped[RowProblem.BAD_QUOTING.value][0] == 3
    assert skipped["row with an unknown stage or detail"][0] == 2  # the good row at the end of each file
    assert result.header.rows_read == len(read_rows(tiny_run)) + 2


@pytest.mark.parametrize("threads", [1, 2])
def test_a_quote_never_closed_in_one_of_many_files_loses_no_row(sim_run, tmp_path: Path, threads: int) -> None:
    # DuckDB 2.0's one scan of more files than threads dropped the rest of such a file without a
    # refused line (7 files here; 1 and 2 threads both lost the rows before the line count)
    pristine = sim_run[0]
    trace = shutil.copytree(pristine, tmp_path / "trace", ignore=shutil.ignore_patterns(".trace-instrument-cache"))
    files = sorted((trace / "sample").glob("*.csv"))
    assert len(files) > 2 * threads
    damaged = files[1]
    lines = damaged.read_bytes().splitlines(keepends=True)
    at = len(lines) // 2
    damaged.write_bytes(b"".join([*lines[:at], b'x,"never closed,\r\n', *lines[at:]]))
    result = analyze([trace], Options(cache=False, threads=threads))
    assert result.header.rows_read == len(read_rows(pristine))
    assert result.header.rows_rejected == 1
    assert _skipped(result)[RowProblem.BAD_QUOTING.value] == (1, (f"{damaged}:{at + 1}",))


def test_the_cli_reports_the_damage_and_exits_0(copy: Path) -> None:
    (copy / "sample" / "node-z-pid9.csv").write_bytes(b'\x00\x01"\xff\n' * 5)
    result = runner.invoke(app, ["analyze", str(copy), "--no-cache"])
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output and "Invalid Input Error" not in result.output
    assert f"skipped 5 {RowProblem.NOT_UTF8.value}" in result.output


def test_salvage_keeps_quoted_line_breaks_and_drops_the_torn_tail(tmp_path: Path) -> None:
    source = tmp_path / "a.csv"
    source.write_bytes(
        b'j,s,u/1,R,1,"two\nlines"\r\n'  # one row over two lines
        b"\r\n"  # a blank line: not a row, not a problem
        b'j,s,u/2,R,2,"say ""hi"""\n'
        b"j,s,u/3,R,3,cut he"  # the torn last line
    )
    result = salvage_csv(str(source), tmp_path / "clean.csv", "j,s,u/3,R,3,cut he")
    assert result.rows == 2 and result.problems == {}
    assert (tmp_path / "clean.csv").read_bytes() == b'j,s,u/1,R,1,"two\nlines"\nj,s,u/2,R,2,"say ""hi"""\n'


def test_salvage_of_a_cut_gzip_file_keeps_the_rows_before_the_cut(tmp_path: Path) -> None:
    rows = b"".join(b"j,s,u/%d,R,%d,c\n" % (i, i) for i in range(2000))
    whole = gzip.compress(rows)
    source = tmp_path / "a.csv.gz"
    source.write_bytes(whole[: len(whole) // 2])
    result = salvage_csv(str(source), tmp_path / "clean.csv", None)
    # counted at its last line that decompresses whole (zlib in one call, apart from the salvage)
    last = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(whole[: len(whole) // 2]).count(b"\n")
    assert result.problems == {RowProblem.UNREADABLE_FILE: [last]}
    kept = (tmp_path / "clean.csv").read_bytes()
    assert 0 < result.rows == last < 2000 and rows.startswith(kept)


def test_a_timestamp_too_large_for_the_engines_is_counted(copy: Path, tiny_run: Path) -> None:
    worker = _worker_csv(copy)
    n = len(worker.read_bytes().splitlines())
    with open(worker, "ab") as f:
        f.write(GOOD_ROW.replace(b"1787215021000", b"9" * 25) + b"\r\n")
        f.write(b"a,b,c\r\n")  # and a row that makes the file be salvaged
    result = analyze([copy], Options(cache=False))
    skipped = _skipped(result)
    assert skipped[RowProblem.BAD_TIMESTAMP.value] == (1, (f"{worker}:{n + 1}",))
    assert skipped[RowProblem.TOO_FEW_COLUMNS.value] == (1, (f"{worker}:{n + 2}",))
    assert result.header.rows_read == len(read_rows(tiny_run))


def test_gzip_trajectory_files_are_read_like_plain_ones(copy: Path, tiny_run: Path) -> None:
    """DuckDB's gzip reader would need 16 GiB for a 1 GiB line: such files are decompressed first."""
    for path in (copy / "trajectory").glob("*.jsonl"):
        path.with_name(path.name + ".gz").write_bytes(gzip.compress(path.read_bytes()))
        path.unlink()
    result = analyze([copy], Options(cache=False))
    pristine = analyze([tiny_run], Options(cache=False))
    assert result.rollouts == pristine.rollouts and result.rollouts is not None
    assert result.rollouts.trajectories == len(trajectories(tiny_run))
    assert result.step_rollouts == pristine.step_rollouts


# what the engines' casts take, and integers the order key cannot keep in order (negative, 10^14 on)
ODD_TIMESTAMPS = (
    b"1e3",
    b"+1787215021000",
    b"0x10",
    b"1_000",
    b"1787215021000.0",
    b"-5",
    b"100000000000000",
    b"9223372036854775807",
    b"-9223372036854775808",
)
PLAIN_TIMESTAMPS = (b"01787215021000", b" 1787215021001 ")  # digits, leading zeros or spaces: read as written


def test_a_timestamp_only_an_engines_cast_reads_is_counted_not_read(copy: Path, tiny_run: Path) -> None:
    """Only plain digits are a timestamp: DuckDB's cast would read ``1e3`` as 1000 where Spark and
    the row-by-row reading refuse it, so no engine reads it; the file holds no other damage."""
    worker = _worker_csv(copy)
    n = len(worker.read_bytes().splitlines())
    with open(worker, "ab") as f:
        f.writelines(GOOD_ROW.replace(b"1787215021000", ts) + b"\r\n" for ts in ODD_TIMESTAMPS + PLAIN_TIMESTAMPS)
    result = analyze([copy], Options(cache=False))
    lines = tuple(f"{worker}:{n + 1 + i}" for i in range(len(ODD_TIMESTAMPS)))
    count, examples = _skipped(result)[RowProblem.BAD_TIMESTAMP.value]
    assert count == len(ODD_TIMESTAMPS) and examples == lines[:3]
    assert result.header.rows_rejected == len(ODD_TIMESTAMPS) + len(PLAIN_TIMESTAMPS)  # the MYSTERY stage: unknown
    assert result.header.rows_read == len(read_rows(tiny_run)) + len(PLAIN_TIMESTAMPS)


def _bad_status_and_nul_tail(copy: Path) -> tuple[Path, int, Path, int]:
    """Row 3 of the worker file gets bytes that are not UTF-8 in its status column alone (a column
    no figure uses); the trainer file ends with NUL bytes (what a crash leaves). Their line numbers."""
    worker = _worker_csv(copy)
    lines = worker.read_bytes().splitlines(keepends=True)
    fields = lines[2].split(b",")
    fields[3] = b"RUN\xffNING"
    lines[2] = b",".join(fields)
    worker.write_bytes(b"".join(lines))
    trainer = next(p for p in (copy / "sample").glob("*.csv") if p != worker)
    ended = trainer.read_bytes().count(b"\n")
    with open(trainer, "ab") as f:
        f.write(b"\0" * 300)
    return worker, 3, trainer, ended + 1


def _check_bad_status_and_nul_tail(result, lines: tuple[Path, int, Path, int], tiny_run: Path) -> None:
    worker, bad_line, trainer, nul_line = lines
    skipped = _skipped(result)
    assert skipped[RowProblem.NOT_UTF8.value] == (1, (f"{worker}:{bad_line}",))
    assert skipped[RowProblem.NUL_BYTES.value] == (1, (f"{trainer}:{nul_line}",))
    assert not any("torn" in reason for reason in skipped)
    assert result.header.rows_read == len(read_rows(tiny_run)) - 1
    assert result.header.rows_rejected == 2


def test_bad_bytes_in_the_status_column_and_a_nul_tail_are_damage(copy: Path, tiny_run: Path) -> None:
    lines = _bad_status_and_nul_tail(copy)
    _check_bad_status_and_nul_tail(analyze([copy], Options(cache=False)), lines, tiny_run)


def test_spark_skips_bad_status_bytes_and_a_nul_tail_as_duckdb_does(copy: Path, tiny_run: Path, pyspark) -> None:
    lines = _bad_status_and_nul_tail(copy)
    _check_bad_status_and_nul_tail(analyze([copy], Options(cache=False, engine="spark")), lines, tiny_run)
