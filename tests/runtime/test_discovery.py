"""Discovery files: right content, atomic replacement, planted symlinks never followed."""

from __future__ import annotations

import io
import logging
import os
from pathlib import Path
from types import SimpleNamespace

import pytest


def publish_sample(runtime, trace_dir):
    runtime.trace_flow("u", "0", "A", "B", "S")
    assert runtime.flush(10)
    return "verl_trace_sample_path.txt", trace_dir / "sample"


def publish_progress(runtime, trace_dir):
    runtime.log_progress("line")
    return "verl_progress_path.txt", trace_dir / "progress"


def publish_trajectory(runtime, trace_dir):
    runtime.TrajectoryStore(str(trace_dir / "trajectory"), 1).close()
    return "verl_trace_trajectory_path.txt", trace_dir / "trajectory"


PUBLISHERS = {
    "verl_trace_sample_path.txt": publish_sample,
    "verl_progress_path.txt": publish_progress,
    "verl_trace_trajectory_path.txt": publish_trajectory,
}
by_file = pytest.mark.parametrize("filename", sorted(PUBLISHERS))


def leftovers(discovery_dir):
    return [p.name for p in discovery_dir.iterdir() if p.name.startswith(".")]


@by_file
def test_content_is_the_output_dir(traced, trace_dir, load_runtime, filename):
    name, directory = PUBLISHERS[filename](traced, trace_dir)
    path = load_runtime.discovery_dir / name
    assert name == filename and path.read_bytes() == str(directory).encode()
    assert path.stat().st_mode & 0o777 == 0o644
    assert leftovers(load_runtime.discovery_dir) == []


@by_file
def test_relative_trace_dir_is_published_as_absolute(load_runtime, tmp_path, monkeypatch, filename):
    monkeypatch.chdir(tmp_path)
    runtime = load_runtime(trace_dir="relative-trace")
    _, directory = PUBLISHERS[filename](runtime, tmp_path / "relative-trace")
    assert (load_runtime.discovery_dir / filename).read_text() == str(directory)


@by_file
def test_planted_symlink_is_replaced_not_followed(traced, trace_dir, load_runtime, tmp_path, filename):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    link = load_runtime.discovery_dir / filename
    link.symlink_to(victim)
    _, directory = PUBLISHERS[filename](traced, trace_dir)
    assert victim.read_text() == "precious"
    assert not link.is_symlink() and link.read_text() == str(directory)


@by_file
def test_dangling_symlink_target_is_not_created(traced, trace_dir, load_runtime, tmp_path, filename):
    target = tmp_path / "would-be-created"
    (load_runtime.discovery_dir / filename).symlink_to(target)
    PUBLISHERS[filename](traced, trace_dir)
    assert not target.exists()


@by_file
def test_directory_in_the_way_is_left_alone(traced, trace_dir, load_runtime, filename):
    blocker = load_runtime.discovery_dir / filename
    blocker.mkdir()
    (blocker / "inside").write_text("keep")
    PUBLISHERS[filename](traced, trace_dir)
    assert (blocker / "inside").read_text() == "keep"
    assert leftovers(load_runtime.discovery_dir) == []


# -- every call site goes through the runtime's safe writer --------------------------------------

STORE_POINT = Path(__file__).resolve().parents[2] / "templates" / "points" / "trajectory" / "store.py"


def test_the_store_point_leaves_the_discovery_file_to_the_runtime(traced, trace_dir, load_runtime, tmp_path):
    """The C0 store point used to write /tmp/verl_trace_trajectory_path.txt with open('w'), following links."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    link = load_runtime.discovery_dir / "verl_trace_trajectory_path.txt"
    link.symlink_to(victim)
    opened = []

    def recording_open(path, *args, **kwargs):
        opened.append(os.fspath(path))
        return io.StringIO()  # nothing reaches the real /tmp

    namespace = {
        "self": SimpleNamespace(),
        "os": os,
        "logger": logging.getLogger("test_store_point"),
        "get_trace_dir": traced.get_trace_dir,
        "TrajectoryStore": traced.TrajectoryStore,
        "open": recording_open,
    }
    exec(compile(STORE_POINT.read_text(), str(STORE_POINT), "exec"), namespace)  # noqa: S102 - our own template
    namespace["self"]._trajectory_store.close()
    assert opened == []
    assert victim.read_text() == "precious"
    assert not link.is_symlink() and link.read_text() == str(trace_dir / "trajectory")


def test_a_file_another_user_planted_is_reported_once_on_stderr(unprivileged):
    """In a sticky /tmp, another user's file cannot be replaced (EPERM): say so, once, whatever logging does."""
    discovery = unprivileged.folder("discovery", 0o1777)
    planted = discovery / "verl_trace_trajectory_path.txt"
    planted.write_text("/somewhere/else/entirely")  # owned by root, not by the script's user
    trace_dir = unprivileged.folder("trace")
    code = """
        logging.disable(logging.CRITICAL)  # the application routes warnings elsewhere
        for instance in range(3):
            tracing.TrajectoryStore(tracing.get_trace_dir() + "/trajectory", instance).close()
        tracing.trace_flow("u", "0", "A", "B", "S")
        tracing.log_progress("a line")
        assert tracing.flush(10)
    """
    proc, _ = unprivileged.run(code, VERL_TRACE_DIR=trace_dir, VERL_TRACE_DISCOVERY_DIR=discovery)
    assert proc.returncode == 0, proc.stderr
    reports = [line for line in proc.stderr.splitlines() if "verl_trace_trajectory_path.txt" in line]
    assert len(reports) == 1 and reports[0].startswith("[verl tracing] ")
    assert planted.read_text() == "/somewhere/else/entirely"
    assert sorted(path.name for path in discovery.iterdir()) == [
        "verl_progress_path.txt",
        "verl_trace_sample_path.txt",
        "verl_trace_trajectory_path.txt",
    ]
    assert (discovery / "verl_trace_sample_path.txt").read_text() == str(trace_dir / "sample")
