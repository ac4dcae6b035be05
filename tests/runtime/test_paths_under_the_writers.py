"""What the runtime writes to never blocks the caller and never vanishes uncounted: a FIFO, socket or
device where a file should be is refused and counted; a trace folder removed or replaced while the
run goes on is made again, and what went into the old one is counted."""

from __future__ import annotations

import json
import re
import shutil

import pytest

SPECIAL_PATHS = """
    import faulthandler, os, socket, sys, time
    faulthandler.dump_traceback_later(30, exit=True)  # an open that blocks dumps its stack and fails
    import verl.utils.tracing as tracing
    from verl.utils.tracing import settings

    KIND = sys.argv[1]
    NOW = 1_700_000_000.0
    settings.clock = lambda: NOW
    trace_dir = os.environ["VERL_TRACE_DIR"]
    keep = []

    def plant(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if KIND == "socket":
            server = socket.socket(socket.AF_UNIX)
            os.chdir(os.path.dirname(path))  # a relative name: the full path may pass AF_UNIX's limit
            server.bind(os.path.basename(path))
            keep.append(server)
        else:
            os.mkfifo(path)
            if KIND == "fifo-with-reader":  # the open succeeds; what it opened is checked
                keep.append(os.open(path, os.O_RDONLY | os.O_NONBLOCK))

    hour = time.strftime("%Y%m%d-%H", time.localtime(NOW))
    plant(os.path.join(trace_dir, "progress", hour + ".log"))
    plant(os.path.join(trace_dir, "sample", f"{socket.gethostname()}-pid{os.getpid()}.csv"))
    for line in range(3):
        tracing.log_progress(f"line {line}")
    tracing.trace_flow("u", ["0", "1"], "A", "B", "S")
    tracing.trace_flow("u", "2", "A", "B", "S")
    assert tracing.flush(5), "the sample writer is stuck"
    print("DONE", flush=True)
"""


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["fifo", "fifo-with-reader", "socket"])
def test_a_special_file_in_the_way_is_refused_counted_and_said_once(script, tmp_path, kind):
    trace_dir = tmp_path / "trace"
    code = SPECIAL_PATHS.replace("sys.argv[1]", repr(kind))
    proc, _ = script.run(code, timeout=60, VERL_TRACE_DIR=trace_dir)
    assert proc.returncode == 0 and "DONE" in proc.stdout, proc.stderr[-3000:]
    (status_file,) = (trace_dir / "status").iterdir()
    status = json.loads(status_file.read_text())
    reason = "not a regular file"
    assert status["lost"] == {"sample_flow": {reason: 3}, "progress": {reason: 3}, "trajectory": {}}
    assert status["written"] == {"sample_flow": 0, "progress": 0, "trajectory": 0}
    said = [line for line in proc.stderr.splitlines() if "not a regular file: nothing is written" in line]
    what = "a socket" if kind == "socket" else "a FIFO"
    assert sorted(said) == sorted(
        f"[verl tracing] {path} is {what}, not a regular file: nothing is written to it "
        "(what was meant for it is counted as lost: not a regular file)"
        for path in (
            next((trace_dir / "progress").iterdir()),
            next((trace_dir / "sample").iterdir()),
        )
    )


# -- the trace folder removed or replaced under open files --------------------------------


def trajectory(runtime, request_id):
    return runtime.Trajectory(request_id=request_id, turns=[])


def moved_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "was removed or replaced while the run went on" in line]


@pytest.mark.parametrize("how", ["removed", "renamed"])
def test_rows_after_the_trace_folder_goes_away_land_in_a_new_one(traced, trace_dir, load_runtime, capsys, how):
    store = traced.TrajectoryStore(str(trace_dir / "trajectory"), 0)
    traced.trace_flow("before", ["0", "1"], "A", "B", "S")
    traced.log_progress("before")
    store.write(trajectory(traced, "before"))
    assert traced.flush(10) and store.flush(10)
    if how == "removed":
        shutil.rmtree(trace_dir)
    else:  # the mount replaced: the old files keep their names, elsewhere
        trace_dir.rename(trace_dir.with_name("old-mount"))

    traced.trace_flow("after", ["0", "1", "2"], "A", "B", "S")
    traced.log_progress("after")
    store.write(trajectory(traced, "after"))
    assert store.close(10)
    rows = load_runtime.read_csv(traced, trace_dir).splitlines()
    assert [row.split(b",")[2] for row in rows] == [b"after/0", b"after/1", b"after/2"]
    (progress_file,) = (trace_dir / "progress").iterdir()
    assert progress_file.read_text() == "after\n"
    (trajectory_file,) = (trace_dir / "trajectory").iterdir()
    assert [json.loads(json.loads(line)["raw_message"])["request_id"] for line in trajectory_file.open()] == ["after"]
    status = traced.losses.status()
    assert status["lost"] == {"sample_flow": {}, "progress": {}, "trajectory": {}}
    assert status["written"] == {"sample_flow": 5, "progress": 2, "trajectory": 2}  # 2, 1, 1 before it went
    err = capsys.readouterr().err
    assert moved_lines(err) == [
        (
            f"[verl tracing] {trace_dir} was removed or replaced while the run went on: writing on into a new "
            "one (what went into the old one after that is counted as lost: folder removed)"
        )
    ]


def remove_after_writing_gone(runtime, monkeypatch, folder):
    """The folder is removed right after the record "gone" is written: it went into a file with no name."""
    real_write_all = runtime.files.write_all
    removed = []

    def write_then_remove(fd, data):
        real_write_all(fd, data)
        if b"gone" in data and not removed:
            removed.append(True)
            shutil.rmtree(folder)

    monkeypatch.setattr(runtime.files, "write_all", write_then_remove)


def test_rows_written_as_the_folder_is_removed_are_counted_apart(traced, trace_dir, load_runtime, monkeypatch, capsys):
    remove_after_writing_gone(traced, monkeypatch, trace_dir)
    traced.trace_flow("gone", ["0", "1"], "A", "B", "S")
    assert traced.flush(10)
    traced.trace_flow("kept", "0", "A", "B", "S")
    rows = load_runtime.read_csv(traced, trace_dir).splitlines()
    assert [row.split(b",")[2] for row in rows] == [b"kept/0"]
    status = traced.losses.status()
    assert status["lost"]["sample_flow"] == {"folder removed": 2}
    assert status["written"]["sample_flow"] == 1
    assert len(moved_lines(capsys.readouterr().err)) == 1


def test_a_progress_line_written_as_the_folder_is_removed_is_counted(traced, trace_dir, monkeypatch, capsys):
    remove_after_writing_gone(traced, monkeypatch, trace_dir)
    traced.log_progress("gone")
    traced.log_progress("kept")
    (progress_file,) = (trace_dir / "progress").iterdir()
    assert progress_file.read_text() == "kept\n"
    status = traced.losses.status()
    assert (status["lost"]["progress"], status["written"]["progress"]) == ({"folder removed": 1}, 1)
    assert len(moved_lines(capsys.readouterr().err)) == 1


def test_trajectories_written_as_their_folder_is_removed_are_counted(traced, tmp_path, monkeypatch, capsys):
    dump_dir = tmp_path / "dumps"
    store = traced.TrajectoryStore(str(dump_dir), 0)
    remove_after_writing_gone(traced, monkeypatch, dump_dir)
    store.write(trajectory(traced, "gone"))
    assert store.flush(10)
    store.write(trajectory(traced, "kept"))
    assert store.close(10)
    (kept_file,) = dump_dir.iterdir()
    assert re.search(r'\\"request_id\\": \\"kept\\"', kept_file.read_text())
    status = traced.losses.status()
    assert (status["lost"]["trajectory"], status["written"]["trajectory"]) == ({"folder removed": 1}, 1)
    assert len(moved_lines(capsys.readouterr().err)) == 1
