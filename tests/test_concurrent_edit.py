"""An edit saved while a run writes (an editor's autosave, a `git pull`) is never replaced: each file
is checked against what was read (size, mtime, bytes) right before its rename, and a change undoes
the whole write, naming the file. The tool's own pause hook places the edit; synthetic checkouts of
two small files."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from trace_instrument.engine import files
from trace_instrument.engine.apply import apply
from trace_instrument.engine.files import PAUSE_AT_ENV, PAUSE_ENV
from trace_instrument.engine.remove import remove
from trace_instrument.model import Catalog, RunErrorKind, Status
from trace_instrument.render import exits
from trace_instrument.spec import load_catalog

SPEC = """\
file: verl/{name}.py
points:
  - id: t.{name}
    facility: progress
    title: said after the extraction
    scope: f
    after: |
      r = extract(b)
    code: |
      log_progress('{message}')
"""
BUSINESS = "from verl.utils.reward import extract\n\n\ndef f(b):\n    r = extract(b)\n    return r\n"
EDIT = "\n\ndef g(b):\n    return b  # saved by an editor while the run wrote\n"
EDITED = "verl/last.py"  # the file the edit goes to: renamed after the other one


def _catalog(tmp_path: Path, message: str = "extracted") -> Catalog:
    folder = tmp_path / f"spec-{message.replace(' ', '-')}"
    folder.mkdir()
    for name in ("first", "last"):
        (folder / f"{name}.yaml").write_text(SPEC.format(name=name, message=message), encoding="utf-8")
    return load_catalog([folder], shipped=False)


def _checkout(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    (root / "verl").mkdir(parents=True)
    for name in ("first", "last"):
        (root / f"verl/{name}.py").write_text(BUSINESS, encoding="utf-8")
    return root


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _edit(root: Path) -> None:
    with (root / EDITED).open("a", encoding="utf-8") as handle:
        handle.write(EDIT)


def _pause_hook(monkeypatch: pytest.MonkeyPatch, stage: str, action: Callable[[], object]) -> list[str]:
    """The write's pause hook (files._fault_pause), doing `action` the first time it reaches `stage`
    (for "renames": once a file other than EDITED is renamed); the stages it passed, in order."""
    passed: list[str] = []

    def pause(at: str) -> None:
        passed.append(at)
        if at == stage and passed.count(at) == 1:
            action()

    monkeypatch.setattr(files, "_fault_pause", pause)
    return passed


def _refused(result, before: dict[str, bytes], root: Path) -> None:
    assert not result.written
    assert result.error is not None and result.error.kind is RunErrorKind.CHANGED
    assert result.error.path == EDITED
    assert result.error.message == f"nothing written: {EDITED}: changed while this run was working on it; run again"
    expected = {**before, EDITED: before[EDITED] + EDIT.encode()}
    assert _tree(root) == expected, "the edit kept, every other file as it was, nothing staged left"


@pytest.mark.parametrize("stage", ["before-renames", "renames"])
def test_apply_keeps_an_edit_saved_before_a_rename(tmp_path, monkeypatch, stage):
    root = _checkout(tmp_path)
    catalog = _catalog(tmp_path)
    before = _tree(root)
    passed = _pause_hook(monkeypatch, stage, lambda: _edit(root))
    result = apply(root, catalog)
    _refused(result, before, root)
    assert exits.apply_exit(result) == exits.ERROR
    if stage == "renames":
        assert passed.count("renames") >= 1, "files had been renamed into place (and were put back)"


def test_an_edit_of_the_same_size_and_time_is_seen_by_its_bytes(tmp_path, monkeypatch):
    root = _checkout(tmp_path)
    before = _tree(root)
    target = root / EDITED
    status = target.stat()

    def same_size_and_time() -> None:
        target.write_bytes(before[EDITED].replace(b"return r", b"return b"))
        os.utime(target, ns=(status.st_atime_ns, status.st_mtime_ns))

    _pause_hook(monkeypatch, "before-renames", same_size_and_time)
    result = apply(root, _catalog(tmp_path))
    assert not result.written and result.error is not None and result.error.kind is RunErrorKind.CHANGED
    assert target.read_bytes() == before[EDITED].replace(b"return r", b"return b")
    assert _tree(root)["verl/first.py"] == before["verl/first.py"]


def test_an_unchanged_file_is_written(tmp_path, monkeypatch):
    """The premise of the others: with nothing edited, the same run writes (the hook does nothing)."""
    root = _checkout(tmp_path)
    _pause_hook(monkeypatch, "before-renames", lambda: None)
    result = apply(root, _catalog(tmp_path))
    assert result.written and result.error is None
    assert "log_progress('extracted')" in (root / EDITED).read_text(encoding="utf-8")


def test_remove_keeps_an_edit_saved_before_the_renames(tmp_path, monkeypatch):
    root = _checkout(tmp_path)
    catalog = _catalog(tmp_path)
    assert apply(root, catalog).written
    before = _tree(root)
    _pause_hook(monkeypatch, "before-renames", lambda: _edit(root))
    result = remove(root, catalog)
    _refused(result, before, root)
    assert exits.remove_exit(result) == exits.ERROR


def test_apply_update_keeps_an_edit_saved_before_the_renames(tmp_path, monkeypatch):
    root = _checkout(tmp_path)
    assert apply(root, _catalog(tmp_path, "extracted")).written
    reworded = _catalog(tmp_path, "extracted it")
    assert [p.status for p in apply(root, reworded, write=False, update=True).points] == [Status.UPDATED] * 2
    before = _tree(root)
    _pause_hook(monkeypatch, "before-renames", lambda: _edit(root))
    result = apply(root, reworded, update=True)
    _refused(result, before, root)


@pytest.mark.slow
def test_the_command_line_keeps_an_edit_saved_while_it_pauses(tmp_path):
    """The real hook (its environment variables), the real command line, a real edit meanwhile."""
    root = _checkout(tmp_path)
    _catalog(tmp_path)
    before = _tree(root)
    env = {**os.environ, PAUSE_AT_ENV: "before-renames", PAUSE_ENV: "1"}
    command = [
        sys.executable,
        "-m",
        "trace_instrument",
        "apply",
        str(root),
        "--anchors",
        str(tmp_path / "spec-extracted"),
    ]
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    assert process.stderr.readline() == "trace-instrument: paused at before-renames\n"
    _edit(root)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == exits.ERROR, stdout + stderr
    assert f"{EDITED}: changed while this run was working on it; run again" in stdout + stderr
    assert _tree(root) == {**before, EDITED: before[EDITED] + EDIT.encode()}
