"""Progress lines: stdout, hourly progress files (injected clock) and the line helpers."""

from __future__ import annotations

import time

import numpy as np  # a test dependency: pip install -e '.[test]'
import pytest

# 10:59:59.500 local time on some day, whatever the machine's timezone.
BEFORE_HOUR = time.mktime((2026, 8, 11, 10, 59, 59, 0, 0, -1)) + 0.5


def hour_file(trace_dir, now):
    return trace_dir / "progress" / f"{time.strftime('%Y%m%d-%H', time.localtime(now))}.log"


def test_progress_goes_to_stdout_even_when_tracing_is_off(load_runtime, tmp_path, capsys):
    runtime = load_runtime()
    runtime.log_progress("start generation")
    runtime.log_progress(42)
    assert capsys.readouterr().out == "start generation\n42\n"
    assert list(load_runtime.discovery_dir.iterdir()) == []
    assert not (tmp_path / "trace").exists()


def test_progress_file_name_and_content(traced, trace_dir, load_runtime, capsys):
    traced.settings.clock = lambda: BEFORE_HOUR
    traced.log_progress("==================== Step 1 ====================")
    traced.log_progress("disagg: start compute reward")
    expected = "==================== Step 1 ====================\ndisagg: start compute reward\n"
    assert hour_file(trace_dir, BEFORE_HOUR).name == "20260811-10.log"
    assert hour_file(trace_dir, BEFORE_HOUR).read_bytes() == expected.encode()
    assert capsys.readouterr().out == expected
    assert (load_runtime.discovery_dir / "verl_progress_path.txt").read_text() == str(trace_dir / "progress")


def test_progress_file_rotates_every_hour(traced, trace_dir):
    now = [BEFORE_HOUR]
    traced.settings.clock = lambda: now[0]
    traced.log_progress("last line of hour 10")
    now[0] += 1.0  # 11:00:00.500
    traced.log_progress("first line of hour 11")
    traced.log_progress("second line of hour 11")
    now[0] += 3600
    traced.log_progress("hour 12")
    files = sorted(p.name for p in (trace_dir / "progress").iterdir())
    assert files == ["20260811-10.log", "20260811-11.log", "20260811-12.log"]
    assert hour_file(trace_dir, BEFORE_HOUR).read_text() == "last line of hour 10\n"
    assert hour_file(trace_dir, now[0] - 3600).read_text() == "first line of hour 11\nsecond line of hour 11\n"
    assert hour_file(trace_dir, now[0]).read_text() == "hour 12\n"


def test_progress_appends_to_an_existing_hour_file(traced, trace_dir):
    traced.settings.clock = lambda: BEFORE_HOUR
    path = hour_file(trace_dir, BEFORE_HOUR)
    path.parent.mkdir(parents=True)
    path.write_text("from another process\n")
    traced.log_progress("mine")
    assert path.read_text() == "from another process\nmine\n"


def test_step_window_line(traced, capsys):
    traced.log_step_window(3, "rollout", "started")
    traced.log_step_window(3, "train", "finished")
    assert capsys.readouterr().out == "Step 3 rollout started\nStep 3 train finished\n"


@pytest.mark.parametrize(
    ("n_tokens", "seconds", "line"),
    [
        (1234, 2.0, "gen throughput (token/s): 617.00\n"),
        (10, 3, "gen throughput (token/s): 3.33\n"),
        (0, 1.5, "gen throughput (token/s): 0.00\n"),
        (np.int64(9), np.float64(2.0), "gen throughput (token/s): 4.50\n"),
        (None, 1.0, ""),
        (10, None, ""),
        (-1, 1.0, ""),
        (10, 0, ""),
        (10, -2.0, ""),
        ("many", 1.0, ""),
        (10, "slow", ""),
    ],
)
def test_gen_throughput_tokens(traced, capsys, n_tokens, seconds, line):
    traced.log_gen_throughput_tokens(n_tokens, seconds)
    assert capsys.readouterr().out == line


class FakeTensor:
    """Just enough of the torch.Tensor API for log_gen_throughput, over numpy."""

    def __init__(self, array):
        self.array = np.asarray(array)
        self.shape = self.array.shape

    def dim(self):
        return self.array.ndim

    def numel(self):
        return self.array.size

    def sum(self):
        return self.array.sum()

    def __getitem__(self, index):
        return FakeTensor(self.array[index])


class FakeTensorDict(dict):
    pass


class FakeBatch:
    def __init__(self, **tensors):
        self.batch = FakeTensorDict(tensors)


def test_gen_throughput_counts_unpadded_response_tokens(traced, capsys):
    mask = [[1, 1, 1, 1, 0], [0, 1, 1, 1, 1]]  # 2 prompt columns + 3 response columns
    batch = FakeBatch(responses=FakeTensor(np.zeros((2, 3))), attention_mask=FakeTensor(mask))
    traced.log_gen_throughput(batch, 2.0)
    assert capsys.readouterr().out == "gen throughput (token/s): 2.50\n"  # (2 + 3) / 2


@pytest.mark.parametrize(
    "mask",
    [None, np.ones((2, 2)), np.ones(10)],  # absent, narrower than responses, not 2-D
)
def test_gen_throughput_falls_back_to_all_response_slots(traced, capsys, mask):
    tensors = {"responses": FakeTensor(np.zeros((2, 3)))}
    if mask is not None:
        tensors["attention_mask"] = FakeTensor(mask)
    traced.log_gen_throughput(FakeBatch(**tensors), 3.0)
    assert capsys.readouterr().out == "gen throughput (token/s): 2.00\n"


@pytest.mark.parametrize("batch", [FakeBatch(), object(), None, FakeBatch(responses="not a tensor")])
def test_gen_throughput_ignores_unusable_batches(traced, capsys, batch):
    traced.log_gen_throughput(batch, 1.0)
    assert capsys.readouterr().out == ""


def test_rollout_completed_only_when_tracing(load_runtime, trace_dir, capsys):
    runtime = load_runtime()
    runtime.log_rollout_completed("u", "3", 1.0)
    assert capsys.readouterr().out == ""
    runtime.set_trace_dir(trace_dir)
    runtime.log_rollout_completed("92ee95cb", "3")
    runtime.log_rollout_completed("92ee95cb", 1, score=0.5)
    expected = (
        "Task 92ee95cb/3 is completed, score=0.0 status=Finished\n"
        "Task 92ee95cb/1 is completed, score=0.5 status=Finished\n"
    )
    assert capsys.readouterr().out == expected
    (log_file,) = (trace_dir / "progress").iterdir()
    assert log_file.read_text() == expected
