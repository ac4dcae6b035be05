"""A verl tree with the runtime as the release before formats.py shipped it (13 files): apply puts
the new file in and updates the files that now read it, as files of an earlier release."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from trace_instrument.engine.apply import apply
from trace_instrument.engine.check import check
from trace_instrument.model import RuntimeStatus

pytestmark = pytest.mark.slow  # reads the runtime of an earlier commit from git
ROOT = Path(__file__).resolve().parents[1]
BEFORE = "bda5a99"  # the last commit whose runtime had no formats.py


def _git(*args: str) -> bytes:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, check=True).stdout


def test_the_runtime_before_formats_py_is_updated_in_place(tmp_path, catalog):
    target = tmp_path / catalog.runtime.target_dir
    target.mkdir(parents=True)
    for parent in (tmp_path / "verl", tmp_path / "verl" / "utils"):
        (parent / "__init__.py").write_text("")
    names = _git("ls-tree", "--name-only", f"{BEFORE}:templates/runtime").decode().split()
    for name in names:
        (target / name).write_bytes(_git("show", f"{BEFORE}:templates/runtime/{name}"))
    assert "formats.py" not in names and len(names) == len(catalog.runtime.files) - 1

    before = {f.path.rpartition("/")[2]: f.status for f in check(tmp_path, catalog).runtime_files}
    assert before.get("formats.py") is RuntimeStatus.MISSING, before
    # the files whose bytes changed since, read from the two versions of templates/runtime
    changed = {
        name
        for name in names
        if _git("show", f"{BEFORE}:templates/runtime/{name}") != (ROOT / "templates" / "runtime" / name).read_bytes()
    }
    assert changed, "the runtime changed since the commit before formats.py"
    assert {name for name, status in before.items() if status is RuntimeStatus.OUTDATED} == changed
    applied = apply(tmp_path, catalog)
    assert applied.written and not applied.error
    after = check(tmp_path, catalog).runtime_files
    assert {f.status for f in after} == {RuntimeStatus.PRESENT} and len(after) == len(catalog.runtime.files)
    assert {name: (target / name).read_bytes() for name, _ in catalog.runtime.files} == dict(catalog.runtime.files)
