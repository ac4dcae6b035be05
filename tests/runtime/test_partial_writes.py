"""Writes that stop part-way (a full disk): no glued rows or lines, only the lost records counted, no empty files.

A file-size limit (RLIMIT_FSIZE) makes the kernel write up to the limit and
fail after it, which is what a filling disk does; /dev/full never writes
partially. Each script runs in its own process, with SIGXFSZ ignored so the
limit shows as EFBIG.
"""

from __future__ import annotations

import json
import time

NOW = 1787215029.123
ROW = b"ENV_NOTFOUND_DLC_JOB_ID,sample,u/0,RUNNING,1787215029123,from=A|to=B|stage=S\r\n"
PREAMBLE = """
import json, resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
import verl.utils.tracing as tracing
from verl.utils.tracing import settings
settings.clock = lambda: {now!r}
_, HARD = resource.getrlimit(resource.RLIMIT_FSIZE)

def limit_file_size(size):
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, HARD))
""".replace("{now!r}", repr(NOW))


def final_status(trace_dir):
    (status_file,) = (trace_dir / "status").iterdir()
    status = json.loads(status_file.read_text())
    assert status["final"] is True
    return status


def test_a_torn_csv_row_is_cut_back_and_the_next_batch_starts_clean(script, tmp_path):
    trace_dir = tmp_path / "trace"
    code = (
        PREAMBLE
        + f"""
limit_file_size({len(ROW) * 10 + len(ROW) // 2})  # room for ten and a half rows
tracing.trace_flow("u", ["0"] * 20, "A", "B", "S")
assert tracing.flush(10)
limit_file_size(HARD)
tracing.trace_flow("u", ["0"] * 5, "A", "B", "S")
assert tracing.flush(10)
"""
    )
    proc, _ = script.run(code, VERL_TRACE_DIR=trace_dir)
    assert proc.returncode == 0, proc.stderr
    (csv_file,) = (trace_dir / "sample").iterdir()
    assert csv_file.read_bytes() == ROW * 15  # ten whole rows of the first batch, then the second batch
    status = final_status(trace_dir)
    assert status["lost"]["sample_flow"] == {"write error": 10}
    assert status["written"]["sample_flow"] == 15


def test_a_torn_trajectory_line_is_cut_back_and_the_file_kept(script, tmp_path):
    trace_dir = tmp_path / "trace"
    line = json.dumps({"prompt_uid": None, "sample_index": None, "raw_message": json.dumps({"request_id": "0"})})
    line_bytes = len(line) + 1
    code = (
        PREAMBLE
        + f"""
store = tracing.TrajectoryStore(tracing.get_trace_dir() + "/trajectory", 7)
store.write({{"request_id": "0"}})
assert store.flush(10)
limit_file_size({line_bytes + line_bytes // 2})  # the second line is torn in the middle
store.write({{"request_id": "1"}})
assert store.flush(10)
limit_file_size(HARD)
store.write({{"request_id": "2"}})
assert store.close(10)
"""
    )
    proc, _ = script.run(code, VERL_TRACE_DIR=trace_dir)
    assert proc.returncode == 0, proc.stderr
    (jsonl_file,) = (trace_dir / "trajectory").iterdir()
    lines = jsonl_file.read_text().splitlines()
    assert [json.loads(json.loads(text)["raw_message"])["request_id"] for text in lines] == ["0", "2"]
    status = final_status(trace_dir)
    assert status["lost"]["trajectory"] == {"write error": 1}
    assert status["written"]["trajectory"] == 2


def test_failed_trajectory_writes_leave_no_empty_files(script, tmp_path):
    trace_dir = tmp_path / "trace"
    code = (
        PREAMBLE
        + """
store = tracing.TrajectoryStore(tracing.get_trace_dir() + "/trajectory", 7)
limit_file_size(10)  # every line fails after 10 bytes
for index in range(5):
    store.write({"request_id": str(index)})
assert store.close(10)
limit_file_size(HARD)  # room for the status file at exit
"""
    )
    proc, _ = script.run(code, VERL_TRACE_DIR=trace_dir)
    assert proc.returncode == 0, proc.stderr
    assert list((trace_dir / "trajectory").iterdir()) == []
    assert final_status(trace_dir)["lost"]["trajectory"] == {"write error": 5}


def test_a_torn_progress_line_never_glues_to_the_next(script, tmp_path):
    trace_dir = tmp_path / "trace"
    hour = time.strftime("%Y%m%d-%H", time.localtime(NOW))
    code = (
        PREAMBLE
        + """
tracing.log_progress("first line")
limit_file_size(len("first line\\n") + 5)
tracing.log_progress("second line")  # only "secon" fits
limit_file_size(HARD)
tracing.log_progress("third line")
"""
    )
    proc, _ = script.run(code, VERL_TRACE_DIR=trace_dir)
    assert proc.returncode == 0, proc.stderr
    assert (trace_dir / "progress" / f"{hour}.log").read_text() == "first line\nsecon\nthird line\n"
    status = final_status(trace_dir)
    assert status["lost"]["progress"] == {"write error": 1}
    assert status["written"]["progress"] == 2
