"""The suite's guard on the real discovery files blames the suite only for what it wrote."""

from __future__ import annotations

from pathlib import Path

from support import suite_writes


def test_a_file_naming_the_suites_scratch_is_the_suites_and_another_processes_is_not(tmp_path: Path) -> None:
    scratch = tmp_path / "pytest-of-someone" / "pytest-3"
    scratch.mkdir(parents=True)
    ours = tmp_path / "verl_trace_sample_path.txt"
    ours.write_text(str(scratch / "test_x0" / "traces" / "sample"), encoding="utf-8")
    theirs = tmp_path / "verl_progress_path.txt"
    theirs.write_text("/data/traces/job-17/progress", encoding="utf-8")  # a training run on the same machine
    absent = tmp_path / "verl_trace_trajectory_path.txt"
    assert suite_writes([ours, theirs, absent], scratch) == [ours]
