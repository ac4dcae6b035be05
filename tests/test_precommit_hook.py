"""The shipped pre-commit hook, run by the real pre-commit (try-repo) on an instrumented checkout."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import TESTS, copy_tree

from trace_instrument.engine.apply import apply
from trace_instrument.wheels import cache_dir

PROJECT = TESTS.parent


def _git(cwd: Path, *args: str) -> None:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, env=env)


def _try_repo(cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PRE_COMMIT_HOME": str(cache_dir() / "pre-commit")}
    return subprocess.run(  # noqa: PLW1510 - the caller asserts the exit code
        [
            sys.executable,
            "-m",
            "pre_commit",
            "try-repo",
            str(PROJECT),
            "trace-instrument-check",
            "--all-files",
            "--verbose",
        ],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )


@pytest.mark.slow
def test_hook_passes_on_an_instrumented_checkout_and_fails_on_drift(verl_090, tmp_path, catalog):
    repo = copy_tree(verl_090, tmp_path / "repo")
    apply(repo, catalog)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "instrumented verl")
    clean = _try_repo(repo)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    runtime_files = len(list((PROJECT / "templates" / "runtime").glob("*.py")))  # the runtime is split by concern
    assert f"check: 94 present; runtime: {runtime_files} present — clean" in clean.stdout

    trainer = repo / "verl/trainer/ppo/ray_trainer.py"
    trainer.write_text(
        trainer.read_text().replace("stage='TRAIN_REWARD', detail='reward_extracted'", "stage='TRAIN_REWARD'")
    )
    _git(repo, "commit", "-qam", "hand edit")
    drifted = _try_repo(repo)
    assert drifted.returncode == 1, drifted.stdout + drifted.stderr
    assert "drifted" in drifted.stdout and "flow.v0.train-reward" in drifted.stdout

    # the gate fails on tracing that would break at run time: the tracing import deleted by hand
    _git(repo, "reset", "-q", "--hard", "HEAD~1")
    kept = [
        line for line in trainer.read_text().splitlines(True) if not line.startswith("from verl.utils.tracing import")
    ]
    trainer.write_text("".join(kept))
    _git(repo, "commit", "-qam", "an import deleted")
    broken = _try_repo(repo)
    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert "broken" in broken.stdout and "'trace_flow' is not imported" in broken.stdout
