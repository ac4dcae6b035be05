"""Writes are all-or-nothing per run, atomic per file, locked, and keep file modes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from support import copy_tree, tree_bytes

from trace_instrument.engine.apply import apply
from trace_instrument.engine.files import LOCK_NAME, PAUSE_AT_ENV, PAUSE_ENV, CheckoutError, checkout_lock
from trace_instrument.engine.remove import remove
from trace_instrument.model import Selection, Status
from trace_instrument.render.exits import remove_exit
from trace_instrument.spec import load_catalog

TRAINER = "verl/trainer/ppo/ray_trainer.py"


def test_file_mode_is_kept(checkout_090, catalog):
    target = checkout_090 / TRAINER
    target.chmod(0o640)
    before = target.read_bytes()
    assert apply(checkout_090, catalog).written
    assert target.read_bytes() != before, "the file must have been rewritten for its mode to mean anything"
    assert target.stat().st_mode & 0o777 == 0o640


def test_a_file_that_fails_stops_every_write(checkout_090, verl_090, catalog):
    broken = checkout_090 / "verl/trainer/ppo/v1/trainer_sync.py"
    broken.write_text(broken.read_text() + "\ndef oops(:\n")
    before = tree_bytes(checkout_090)
    result = apply(checkout_090, catalog)
    assert not result.written
    assert tree_bytes(checkout_090) == before
    failed = next(f for f in result.files if f.path.endswith("trainer_sync.py"))
    assert failed.error is not None and "syntax error" in failed.error.message and "--skip" in failed.error.message
    assert {p.status for p in failed.points} == {Status.SKIPPED}


def test_keep_going_writes_the_other_files(checkout_090, catalog):
    broken = checkout_090 / "verl/trainer/ppo/v1/trainer_sync.py"
    broken.write_text(broken.read_text() + "\ndef oops(:\n")
    result = apply(checkout_090, catalog, keep_going=True)
    assert result.written
    assert "trace_flow(" in (checkout_090 / TRAINER).read_text()
    assert "trace_flow(" not in broken.read_text()


def test_remove_stops_on_a_failed_file_unless_keep_going(checkout_090, verl_090, catalog):
    """A file the fork broke after apply: remove writes nothing, or with --keep-going every other file,
    and keeps the runtime package the broken file still imports."""
    assert apply(checkout_090, catalog).written
    broken = checkout_090 / "verl/trainer/ppo/v1/trainer_sync.py"
    broken.write_text(broken.read_text() + "\ndef oops(:\n")
    before = tree_bytes(checkout_090)
    held = remove(checkout_090, catalog)
    assert not held.written and tree_bytes(checkout_090) == before
    result = remove(checkout_090, catalog, keep_going=True)
    assert result.written
    assert (checkout_090 / TRAINER).read_bytes() == (verl_090 / TRAINER).read_bytes()
    assert "from verl.utils.tracing import" in broken.read_text(), "the failed file is left as it was"
    assert (checkout_090 / "verl/utils/tracing/__init__.py").is_file(), "still imported by the failed file"
    assert remove_exit(result) == 2, "a file failed: the run is an error even though the rest was written"


def test_a_run_refuses_while_another_holds_the_lock(checkout_090, catalog):
    before = tree_bytes(checkout_090)
    with checkout_lock(checkout_090):
        result = apply(checkout_090, catalog)
        assert not result.written
        assert result.error is not None
        command = " ".join(sys.orig_argv)[:300]
        assert result.error.message == (
            f"{checkout_090}: another trace-instrument run holds .trace-instrument.lock: "
            f"pid {os.getpid()} ({command}); wait for it to end, or end it"
        )
        assert tree_bytes(checkout_090) == before
        assert not (checkout_090 / ".trace-instrument.json").exists()
    assert not (checkout_090 / ".trace-instrument.lock").exists(), "releasing the lock removes its file"
    assert apply(checkout_090, catalog).written, "once the lock is free the run goes ahead"
    with (
        pytest.raises(CheckoutError, match="another trace-instrument run holds"),
        checkout_lock(checkout_090),
        checkout_lock(checkout_090),
    ):
        pass


@pytest.mark.parametrize("renamed_before_kill", [1, 4, 9])
@pytest.mark.slow
def test_sigkill_during_writes_leaves_each_file_original_or_complete(
    checkout_090, verl_090, tmp_path, catalog, renamed_before_kill
):
    reference = tmp_path / "reference"

    copy_tree(verl_090, reference)
    apply(reference, catalog)
    complete, original = tree_bytes(reference), tree_bytes(verl_090)
    env = {**os.environ, PAUSE_AT_ENV: "renames", PAUSE_ENV: "0.3"}
    process = subprocess.Popen(
        [sys.executable, "-m", "trace_instrument", "apply", str(checkout_090)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            now = tree_bytes(checkout_090)
        except FileNotFoundError:  # the running apply renamed a staged file between listing and reading
            continue
        renamed = [p for p, data in now.items() if not p.endswith(".ti-tmp") and original.get(p) != data]
        if len(renamed) >= renamed_before_kill:
            break
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    now = tree_bytes(checkout_090)
    changed = 0
    for path, data in now.items():
        if path.endswith(".ti-tmp"):
            continue
        assert data in (original.get(path), complete.get(path)), f"{path} is neither original nor complete"
        changed += data != original.get(path)
    assert 0 < changed < len([p for p in complete if complete[p] != original.get(p)])
    # the next run finishes the job and clears what the killed run staged
    apply(checkout_090, catalog)
    assert tree_bytes(checkout_090) == complete


def _runtime_first(tree: dict[str, bytes]) -> bool:
    """No instrumented file imports a runtime package that is not all there."""
    imports = any(b"from verl.utils.tracing import" in data for path, data in tree.items() if path.endswith(".py"))
    shipped = load_catalog().runtime
    package = {f"{shipped.target_dir}/{name}": content for name, content in shipped.files}
    # all there: every file the catalog ships, each with its complete bytes (none half written)
    return not imports or all(tree.get(path) == content for path, content in package.items())


@pytest.mark.parametrize("stage", ["before-writes", "staging", "renames"])
@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)])
@pytest.mark.slow
def test_an_interrupted_run_ends_cleanly_at_every_stage_of_the_writes(
    checkout_090, verl_090, tmp_path, catalog, stage, signum, code
):
    reference = copy_tree(verl_090, tmp_path / "reference")
    apply(reference, catalog)
    complete, original = tree_bytes(reference), tree_bytes(verl_090)
    env = {**os.environ, PAUSE_AT_ENV: stage, PAUSE_ENV: "0.5"}
    process = subprocess.Popen(
        [sys.executable, "-m", "trace_instrument", "apply", str(checkout_090)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    first = process.stderr.readline()  # the run says where it pauses
    assert first == f"trace-instrument: paused at {stage}\n"
    process.send_signal(signum)
    rest = process.stderr.read()
    assert process.wait(timeout=120) == code
    lines = [line for line in rest.splitlines() if not line.startswith("trace-instrument: paused")]
    name = signal.Signals(signum).name
    assert len(lines) == 1 and lines[0].startswith(f"trace-instrument: interrupted ({name}); "), rest
    now = tree_bytes(checkout_090)
    assert not [p for p in now if p.endswith(".ti-tmp")], "staged copies are cleared"
    assert not (checkout_090 / LOCK_NAME).exists()
    written = now == complete
    # signals are held back while the renames run: the tree is the old one or the new one, never a mix
    assert written or now == original
    assert written == (stage == "renames")
    assert lines[0].endswith("the changes had been written completely" if written else "nothing was written")
    assert _runtime_first(now)


def test_remove_after_a_killed_remove_leaves_no_manifest(checkout_090, verl_090, catalog):
    """A remove killed after some renames left files pristine but the manifest behind: the next
    remove finds those points absent and takes them out of the manifest too."""
    assert apply(checkout_090, catalog).written
    (checkout_090 / TRAINER).write_bytes((verl_090 / TRAINER).read_bytes())  # renamed before the kill
    assert remove(checkout_090, catalog).written
    assert not (checkout_090 / ".trace-instrument.json").exists()
    assert tree_bytes(checkout_090) == tree_bytes(verl_090)


# -- a rename refused half-way (an immutable file, a bind mount): all or nothing, exactly ----------------

SYNC_ONLY = frozenset({"progress.v1.sync-params.sync"})  # one file, the runtime package and the manifest


def _steps(monkeypatch: pytest.MonkeyPatch, fail_at: int = 0, also: int = 0) -> list[int]:
    """Count the writes' steps (each rename into place, each file deleted); the fail_at-th fails
    (0: none), and the `also`-th (a roll-back's own renames come after it)."""
    from trace_instrument.engine import files

    calls = [0]
    real_replace, real_delete = os.replace, files._delete

    def step() -> None:
        calls[0] += 1
        if calls[0] in (fail_at, also):
            raise PermissionError(1, "Operation not permitted")

    def replace(source, target):  # type: ignore[no-untyped-def]
        step()
        return real_replace(source, target)

    def delete(target):  # type: ignore[no-untyped-def]
        step()
        return real_delete(target)

    monkeypatch.setattr(files.os, "replace", replace)
    monkeypatch.setattr(files, "_delete", delete)
    return calls


def _count_steps(monkeypatch: pytest.MonkeyPatch, run) -> int:  # type: ignore[no-untyped-def]
    with monkeypatch.context() as patch:
        calls = _steps(patch)
        assert run().written
    return calls[0]


def test_an_apply_whose_rename_fails_at_any_position_leaves_the_tree_as_it_was(
    checkout_090, tmp_path, catalog, monkeypatch
):
    selection = Selection(only=SYNC_ONLY)
    probe = copy_tree(checkout_090, tmp_path / "probe")
    count = _count_steps(monkeypatch, lambda: apply(probe, catalog, selection))
    assert count >= 15, "the point's file, thirteen runtime files and the manifest"
    before = tree_bytes(checkout_090)
    folders = {p for p in checkout_090.rglob("*") if p.is_dir()}
    for at in range(1, count + 1):
        with monkeypatch.context() as patch:
            _steps(patch, fail_at=at)
            result = apply(checkout_090, catalog, selection)
        assert not result.written and result.error is not None and "nothing written" in result.error.message, at
        assert tree_bytes(checkout_090) == before, f"rename {at} failed: the tree must be as it was"
        assert {p for p in checkout_090.rglob("*") if p.is_dir()} == folders, f"rename {at}: a folder left behind"
    assert apply(checkout_090, catalog, selection).written


def test_a_remove_whose_rename_fails_at_any_position_leaves_the_tree_as_it_was(
    checkout_090, tmp_path, catalog, monkeypatch
):
    assert apply(checkout_090, catalog, Selection(only=SYNC_ONLY)).written
    probe = copy_tree(checkout_090, tmp_path / "probe")
    count = _count_steps(monkeypatch, lambda: remove(probe, catalog))
    assert count >= 14, "the point's file, and the runtime files and the manifest deleted"
    before = tree_bytes(checkout_090)
    for at in range(1, count + 1):
        with monkeypatch.context() as patch:
            _steps(patch, fail_at=at)
            result = remove(checkout_090, catalog)
        assert not result.written and result.error is not None and "nothing written" in result.error.message, at
        assert tree_bytes(checkout_090) == before, f"rename {at} failed: the tree must be as it was"
    assert remove(checkout_090, catalog).written


def test_a_roll_back_that_fails_too_says_what_was_left_written(checkout_090, tmp_path, catalog, monkeypatch):
    selection = Selection(only=SYNC_ONLY)
    probe = copy_tree(checkout_090, tmp_path / "probe")
    last = _count_steps(monkeypatch, lambda: apply(probe, catalog, selection))
    with monkeypatch.context() as patch:
        # the manifest's rename fails, then putting the point's file back (the first step undone) too
        _steps(patch, fail_at=last, also=last + 1)
        result = apply(checkout_090, catalog, selection)
    assert result.error is not None and not result.written
    assert result.error.message.startswith("partly written:")
    assert "verl/trainer/ppo/v1/trainer_sync.py" in result.error.message and "run the same command again" in (
        result.error.message
    )
    assert apply(checkout_090, catalog, selection).written  # the next run finishes the job
    assert {p.status for p in apply(checkout_090, catalog, selection).points} == {Status.PRESENT}
