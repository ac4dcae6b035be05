"""Semantics and hostile inputs: the trace-dir fallback, objects that raise, names that would leave their folder."""

from __future__ import annotations

import json
import os
import socket

import pytest


class Unprintable:
    def __str__(self):
        raise RuntimeError("no str")

    __repr__ = __format__ = __str__


class BadLength(list):
    def __len__(self):
        raise RuntimeError("no len")


class BadPath:
    def __fspath__(self):
        raise RuntimeError("no path")


class BadNumber:
    def __mul__(self, other):
        raise RuntimeError("no number")

    def __int__(self):
        raise RuntimeError("no number")


# -- set_trace_dir(None) hands the switch back to $VERL_TRACE_DIR ---------------------------------


def test_unset_trace_dir_falls_back_to_the_environment(load_runtime, tmp_path, monkeypatch):
    runtime = load_runtime(trace_dir=tmp_path / "from-env-at-import")
    runtime.set_trace_dir(tmp_path / "explicit")
    assert runtime.get_trace_dir() == str(tmp_path / "explicit")
    runtime.set_trace_dir(None)
    assert runtime.get_trace_dir() == str(tmp_path / "from-env-at-import")
    monkeypatch.setenv("VERL_TRACE_DIR", str(tmp_path / "changed-later"))
    runtime.set_trace_dir("")  # the variable is read again at this call
    assert runtime.get_trace_dir() == str(tmp_path / "changed-later")
    monkeypatch.delenv("VERL_TRACE_DIR")
    runtime.set_trace_dir(None)
    assert runtime.get_trace_dir() is None
    runtime.trace_flow("u", "0", "A", "B", "S")
    assert not (tmp_path / "changed-later").exists()


# -- objects whose __str__, __len__ or __fspath__ raise --------------------------------------------


@pytest.mark.parametrize("value", [Unprintable(), BadPath()], ids=["unprintable", "bad-fspath"])
def test_set_trace_dir_never_raises_and_keeps_the_setting(load_runtime, tmp_path, value):
    runtime = load_runtime(trace_dir=tmp_path / "trace")
    runtime.set_trace_dir(value)
    assert runtime.get_trace_dir() == str(tmp_path / "trace")


def test_turn_record_never_raises(traced):
    record = traced.TurnRecord(BadLength([1, 2]), rid=Unprintable())
    assert record.turn.prompt_token_count == 0 and record.turn.turn_index == -1
    record.stamp_end()
    assert record.turn.end_ts >= record.turn.start_ts


def test_make_traj_key_never_raises(traced):
    tracker = traced.TrajectoryTracker()
    first, second = Unprintable(), Unprintable()
    key = tracker.make_traj_key(first, 3)
    assert key.startswith("prompt-<Unprintable ") and key.endswith("/sample-3")
    assert key != tracker.make_traj_key(second, 3)  # two objects never share a key
    assert tracker.make_traj_key("u", 3) == "prompt-u/sample-3"


@pytest.mark.parametrize(
    ("dump_dir", "instance_id", "options"),
    [
        (Unprintable(), 1, {}),
        (BadPath(), 1, {}),
        ("DIR", Unprintable(), {}),
        ("DIR", 1, {"max_file_size_mb": BadNumber()}),
        ("DIR", 1, {"max_file_size_bytes": BadNumber(), "max_queue_bytes": BadNumber()}),
    ],
    ids=["unprintable-dir", "bad-fspath-dir", "unprintable-id", "bad-size", "bad-byte-limits"],
)
def test_trajectory_store_never_raises(traced, trace_dir, dump_dir, instance_id, options):
    dump_dir = str(trace_dir / "trajectory") if dump_dir == "DIR" else dump_dir
    store = traced.TrajectoryStore(dump_dir, instance_id, **options)
    store.write(traced.Trajectory(request_id="0"))
    assert store.close(10)
    written = list((trace_dir / "trajectory").glob("*.jsonl")) if isinstance(dump_dir, str) else []
    if written:  # a usable folder: the line is there, in a name of its own
        (path,) = written
        assert path.parent == trace_dir / "trajectory" and len(path.read_text().splitlines()) == 1
    else:
        assert traced.losses.status()["lost"]["trajectory"] == {"write error": 1}


# -- names built from a host name or an id stay in their folder -------------------------------------


def test_a_hostname_with_separators_never_moves_files_out_of_the_trace_dir(load_runtime, tmp_path, monkeypatch):
    monkeypatch.setattr(socket, "gethostname", lambda: "../../escaped/host")
    trace_dir = tmp_path / "a" / "b" / "trace"
    runtime = load_runtime(trace_dir=trace_dir)
    runtime.trace_flow("u", "0", "A", "B", "S")
    assert runtime.flush(10)
    runtime.writer._flush_and_report_at_exit()  # writes the final status file
    assert [path.name for path in (trace_dir / "sample").iterdir()] == [f".._.._escaped_host-pid{os.getpid()}.csv"]
    (status_file,) = (trace_dir / "status").iterdir()
    assert status_file.name == f".._.._escaped_host-pid{os.getpid()}.json"
    assert json.loads(status_file.read_text())["host"] == "../../escaped/host"
    assert not (tmp_path / "a" / "escaped").exists() and not (tmp_path / "escaped").exists()


def test_an_instance_id_with_separators_stays_in_the_dump_dir(traced, trace_dir):
    dump_dir = trace_dir / "trajectory"
    store = traced.TrajectoryStore(str(dump_dir), "../../escaped")
    store.write(traced.Trajectory(request_id="0"))
    assert store.close(10)
    (path,) = dump_dir.iterdir()
    assert path.name.startswith("trajectory_.._.._escaped_") and path.suffix == ".jsonl"
    assert not (trace_dir.parent / "escaped").exists() and not (trace_dir / "escaped").exists()
