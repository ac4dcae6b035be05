"""Failures that belong to one file stay with that file, and a run never overwrites a file that
changed while it worked. Synthetic checkouts of two small files; nothing of ours is mocked.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trace_instrument.engine.apply import apply
from trace_instrument.engine.check import check
from trace_instrument.engine.files import PAUSE_AT_ENV, PAUSE_ENV
from trace_instrument.model import Catalog, FileProblemKind, Reason, Selection, Status
from trace_instrument.render import exits
from trace_instrument.spec import load_catalog

FLOW = "trace_flow(uid='u', traj_uid='0', from_module='A', to_module='B', stage='TRAIN_REWARD', detail='d')"
SPEC = """\
file: verl/{name}.py
points:
  - id: t.{name}
    facility: sample_flow
    title: traced after the extraction
    scope: f
    after: |
      r = extract(b)
    code: |
      {flow}
"""
BUSINESS = "from verl.utils.reward import extract\n\n\ndef f(b):\n    r = extract(b)\n    return r\n"
# A long flat sum at module level (read by every operation): Python parses it (the parser's limit
# is higher), but its ast is 700 levels deep, beyond what recursive tree walks manage under the
# default recursion limit (the name table's and LibCST's).
DEEP = BUSINESS + "\n\nTOTAL = " + " + ".join(["1"] * 700) + "\n"


def _catalog(tmp_path: Path) -> Catalog:
    folder = tmp_path / "spec"
    folder.mkdir()
    for name in ("deep", "fine"):
        (folder / f"{name}.yaml").write_text(SPEC.format(name=name, flow=FLOW), encoding="utf-8")
    return load_catalog([folder], shipped=False)


def _checkout(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    (root / "verl").mkdir(parents=True)
    (root / "verl/deep.py").write_text(DEEP, encoding="utf-8")
    (root / "verl/fine.py").write_text(BUSINESS, encoding="utf-8")
    return root


def _by_file(result) -> dict[str, list[tuple[str, Status, Reason | None]]]:
    return {f.path: [(p.point_id, p.status, p.reason) for p in f.points] for f in result.files}


def test_the_deep_file_parses():
    """The premise: the deep file is valid Python, so what fails on it is the tool, not the file."""
    ast.parse(DEEP)
    compile(DEEP, "deep.py", "exec")


def test_check_contains_an_internal_error_to_its_file(tmp_path: Path):
    root = _checkout(tmp_path)
    result = check(root, _catalog(tmp_path), Selection())
    assert result.error is None
    assert _by_file(result) == {
        "verl/deep.py": [("t.deep", Status.ERROR, Reason.INTERNAL)],
        "verl/fine.py": [("t.fine", Status.MISSING, None)],
    }
    deep = next(f for f in result.files if f.path == "verl/deep.py")
    assert deep.error is not None and deep.error.kind is FileProblemKind.INTERNAL
    assert deep.error.message.startswith("internal error (RecursionError")
    assert "please report it" in deep.error.message
    assert "Traceback (most recent call last)" in deep.error.traceback
    assert exits.check_exit(result) == exits.ERROR


def test_apply_contains_an_internal_error_and_writes_nothing(tmp_path: Path):
    root = _checkout(tmp_path)
    result = apply(root, _catalog(tmp_path), Selection())
    assert _by_file(result) == {
        "verl/deep.py": [("t.deep", Status.ERROR, Reason.INTERNAL)],
        "verl/fine.py": [("t.fine", Status.APPLIED, None)],
    }
    assert not result.written, "a file that fails stops every write"
    assert (root / "verl/fine.py").read_text(encoding="utf-8") == BUSINESS
    assert (root / "verl/deep.py").read_text(encoding="utf-8") == DEEP
    assert exits.apply_exit(result) == exits.ERROR


def test_apply_keep_going_writes_the_other_file(tmp_path: Path):
    root = _checkout(tmp_path)
    result = apply(root, _catalog(tmp_path), Selection(), keep_going=True)
    assert result.written
    fine = (root / "verl/fine.py").read_text(encoding="utf-8")
    assert fine.splitlines()[:2] == [
        "from verl.utils.reward import extract",
        "from verl.utils.tracing import trace_flow",
    ]
    assert f"    r = extract(b)\n    {FLOW}\n    return r\n" in fine
    assert (root / "verl/deep.py").read_text(encoding="utf-8") == DEEP
    assert exits.apply_exit(result) == exits.ERROR, "the failed file still makes it an error"


@pytest.mark.slow
def test_a_file_changed_between_analysis_and_write_is_not_overwritten(tmp_path: Path):
    """The run pauses before its writes (the tool's fault-injection hook); the file is edited
    meanwhile. The bytes it read no longer match: nothing is written, not even the runtime."""
    root = _checkout(tmp_path)
    (root / "verl/deep.py").write_text(BUSINESS, encoding="utf-8")
    _catalog(tmp_path)  # the spec folder
    env = {**os.environ, PAUSE_AT_ENV: "before-writes", PAUSE_ENV: "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "trace_instrument", "apply", str(root), "--anchors", str(tmp_path / "spec")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    assert process.stderr.readline() == "trace-instrument: paused at before-writes\n"
    edited = BUSINESS + "\n\ndef g(b):\n    return b\n"
    (root / "verl/fine.py").write_text(edited, encoding="utf-8")
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == exits.ERROR, stdout + stderr
    assert "verl/fine.py: changed while this run was working on it; run again" in stdout + stderr
    assert (root / "verl/fine.py").read_text(encoding="utf-8") == edited
    assert (root / "verl/deep.py").read_text(encoding="utf-8") == BUSINESS
    left = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    assert left == ["verl/deep.py", "verl/fine.py"], "no runtime, manifest, lock or staged copy"
