"""Writes are all-or-nothing per run, atomic per file, locked, and keep file modes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from support import tree_bytes

from trace_instrument.engine.apply import apply
from trace_instrument.engine.files import PAUSE_ENV, CheckoutError, checkout_lock
from trace_instrument.model import Status

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
    assert "syntax error" in failed.error and "--skip" in failed.error
    assert {p.status for p in failed.points} == {Status.SKIPPED}


def test_keep_going_writes_the_other_files(checkout_090, catalog):
    broken = checkout_090 / "verl/trainer/ppo/v1/trainer_sync.py"
    broken.write_text(broken.read_text() + "\ndef oops(:\n")
    result = apply(checkout_090, catalog, keep_going=True)
    assert result.written
    assert "trace_flow(" in (checkout_090 / TRAINER).read_text()
    assert "trace_flow(" not in broken.read_text()


def test_a_run_refuses_while_another_holds_the_lock(checkout_090, catalog):
    before = tree_bytes(checkout_090)
    with checkout_lock(checkout_090):
        result = apply(checkout_090, catalog)
        assert not result.written
        assert result.error == f"{checkout_090}: another trace-instrument run holds .trace-instrument.lock"
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
def test_sigkill_during_writes_leaves_each_file_original_or_complete(
    checkout_090, verl_090, tmp_path, catalog, renamed_before_kill
):
    reference = tmp_path / "reference"
    from support import copy_tree

    copy_tree(verl_090, reference)
    apply(reference, catalog)
    complete, original = tree_bytes(reference), tree_bytes(verl_090)
    env = {**os.environ, PAUSE_ENV: "0.3"}
    process = subprocess.Popen(
        [sys.executable, "-m", "trace_instrument", "apply", str(checkout_090)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        now = tree_bytes(checkout_090)
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
