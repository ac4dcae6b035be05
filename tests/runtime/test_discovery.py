"""Discovery files: right content, atomic replacement, planted symlinks never followed."""

from __future__ import annotations

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
