"""The checkout lock: a run that finds it taken names the holder, and a lock whose recorded
holder is gone (its orphaned children still hold the file's lock) does not block."""

from __future__ import annotations

import fcntl
import os
import sys
from pathlib import Path

import pytest

from trace_instrument.engine.files import LOCK_NAME, CheckoutError, checkout_lock


def _held_by_another(root: Path, record: str) -> int:
    """Lock the lock file through a descriptor of its own (as an orphaned worker holds its copy), its
    record as given; the descriptor, to be closed by the caller."""
    handle = os.open(root / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.write(handle, record.encode())
    return handle


def _start_time(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[19])


def test_a_live_holder_is_named_with_its_pid_and_command(tmp_path):
    with checkout_lock(tmp_path):
        record = (tmp_path / LOCK_NAME).read_text()
        with pytest.raises(CheckoutError) as refused, checkout_lock(tmp_path):
            pass
    command = " ".join(sys.orig_argv)[:300]
    assert record == f"{os.getpid()} {_start_time(os.getpid())} {command}\n"
    assert str(refused.value) == (
        f"{tmp_path}: another trace-instrument run holds {LOCK_NAME}: "
        f"pid {os.getpid()} ({command}); wait for it to end, or end it"
    )
    assert not (tmp_path / LOCK_NAME).exists()


def test_a_lock_whose_holder_is_gone_is_taken_over(tmp_path):
    # this very pid, but started at another time: the process that wrote it is gone, the pid reused
    stale = _held_by_another(tmp_path, f"{os.getpid()} {_start_time(os.getpid()) + 1} python -m trace_instrument apply")
    try:
        with checkout_lock(tmp_path):
            record = (tmp_path / LOCK_NAME).read_text()
            assert record.startswith(f"{os.getpid()} {_start_time(os.getpid())} ")
            assert not os.path.samestat(os.fstat(stale), os.stat(tmp_path / LOCK_NAME)), "a new lock file"
            with pytest.raises(CheckoutError, match=f"pid {os.getpid()} "), checkout_lock(tmp_path):
                pass
    finally:
        os.close(stale)


def test_a_lock_whose_holder_says_nothing_blocks_and_says_so(tmp_path):
    # a run of a release that did not record itself, or one between locking and recording
    silent = _held_by_another(tmp_path, "")
    try:
        with pytest.raises(CheckoutError) as refused, checkout_lock(tmp_path):
            pass
    finally:
        os.close(silent)
    assert str(refused.value) == (
        f"{tmp_path}: another trace-instrument run holds {LOCK_NAME} "
        "(it does not say which: if no run is under way, delete the file)"
    )
    with checkout_lock(tmp_path):  # once its holder is gone, the kernel's lock is gone with it
        pass
