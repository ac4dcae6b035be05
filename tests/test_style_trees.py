"""Whole verl releases instrumented under their formatter's configuration (issue 39, section 2).

With verl's own `[tool.ruff]` (tests/fixtures/style/verl, line-length 120) in the tree root,
`ruff format --check` finds nothing to reformat in the files apply touched (the release files need
no change either) and `ruff check --select E501` no line over 120; a tree black formatted at 120,
with `[tool.black] line-length = 120`, is what black leaves unchanged after apply. Either
formatter run over the instrumented tree changes nothing, and `check` and `remove` are exact on it.
Without configuration the same apply leaves ruff hundreds of lines to rewrite: the measure of what
changed.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import black
import pytest
from support import copy_tree

from trace_instrument.engine.apply import apply
from trace_instrument.engine.check import check
from trace_instrument.engine.remove import remove
from trace_instrument.model import EXTRAS, Selection, Status

VERL_STYLE = Path(__file__).parent / "fixtures" / "style" / "verl"
RUFF = [sys.executable, "-m", "ruff"]
RELEASES = ["0.8.0", "0.9.0", "0.9.1"]
TRAINER = "verl/trainer/ppo/ray_trainer.py"


def _ruff(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RUFF, *args], cwd=root, capture_output=True, text=True, check=False)


def _catalog_files(root: Path, catalog) -> list[str]:
    return [f for f in catalog.files if (root / f).is_file()]


def _touched(result) -> list[str]:
    return [f.path for f in result.files if f.changed]


def _bytes(root: Path, files: list[str]) -> dict[str, bytes]:
    return {f: (root / f).read_bytes() for f in files}


def _changed_lines(diff: str) -> int:
    """Lines a `ruff format --diff` takes out or puts in (what the issue counts)."""
    return sum(1 for line in diff.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---"))


def _check_and_remove_exact(root: Path, catalog, pristine: dict[str, bytes]) -> None:
    found = check(root, catalog)
    assert found.error is None
    assert {p.status for p in found.points if p.status is not Status.NOT_APPLICABLE} == {Status.PRESENT}
    assert remove(root, catalog).error is None
    assert _bytes(root, list(pristine)) == pristine
    assert not (root / "verl/utils/tracing").exists()


@pytest.mark.parametrize("version", RELEASES)
def test_under_verls_ruff_configuration_ruff_finds_nothing_to_reformat(verl_release, tmp_path, catalog, version):
    pristine_tree = verl_release(version)
    root = copy_tree(pristine_tree, tmp_path / "configured")
    shutil.copyfile(VERL_STYLE / "pyproject.toml", root / "pyproject.toml")
    files = _catalog_files(root, catalog)
    assert _ruff(root, "format", "--check", "--no-cache", *files).returncode == 0, "the release files need no change"
    pristine = _bytes(root, files)

    result = apply(root, catalog)
    assert result.written and result.error is None
    touched = _touched(result)
    assert TRAINER in touched
    formatted = _ruff(root, "format", "--check", "--no-cache", *touched, "verl/utils/tracing")
    assert formatted.returncode == 0, formatted.stdout
    too_long = _ruff(root, "check", "--no-cache", "--select", "E501", "--line-length", "120", *touched)
    assert too_long.returncode == 0, too_long.stdout

    # the fork's pre-commit runs the formatter: nothing changes, check and remove stay exact
    instrumented = _bytes(root, touched)
    assert _ruff(root, "format", "--no-cache", *touched).returncode == 0
    assert _bytes(root, touched) == instrumented
    _check_and_remove_exact(root, catalog, pristine)

    # without the configuration, the templates as written: ruff would rewrite lines of every touched file
    plain = copy_tree(pristine_tree, tmp_path / "plain")
    assert apply(plain, catalog).written
    diff = _ruff(plain, "format", "--diff", "--no-cache", "--line-length", "120", TRAINER).stdout
    assert _changed_lines(diff) > 100


def test_the_opt_in_extras_under_verls_configuration_too(verl_091, tmp_path, catalog):
    """The extras add a swapped expression and a rewrite that moves a block out of a `with`:
    under verl's configuration ruff finds nothing to reformat either, and both come out exactly."""
    selection = Selection(extras=frozenset(EXTRAS))
    root = copy_tree(verl_091, tmp_path / "extras")
    shutil.copyfile(VERL_STYLE / "pyproject.toml", root / "pyproject.toml")
    files = _catalog_files(root, catalog)
    pristine = _bytes(root, files)
    result = apply(root, catalog, selection)
    assert result.written and {p.status for p in result.points} == {Status.APPLIED}
    touched = _touched(result)
    formatted = _ruff(root, "format", "--check", "--no-cache", *touched)
    assert formatted.returncode == 0, formatted.stdout
    assert {p.status for p in check(root, catalog, selection).points} == {Status.PRESENT}
    assert remove(root, catalog).error is None
    assert _bytes(root, files) == pristine


def test_a_lost_manifest_comes_back_whole_under_a_formatters_configuration(verl_091, tmp_path, catalog):
    """A run killed before writing the manifest: the next apply writes the one a clean apply
    records, found by applying to a scratch copy of verl/ (which holds no configuration): that
    copy is formatted as the checkout is, or it would not give the tree back and the originals of
    the rewrites would be lost."""
    root = copy_tree(verl_091, tmp_path / "lost")
    shutil.copyfile(VERL_STYLE / "pyproject.toml", root / "pyproject.toml")
    files = _catalog_files(root, catalog)
    pristine = _bytes(root, files)
    assert apply(root, catalog).written
    manifest = root / ".trace-instrument.json"
    recorded = manifest.read_bytes()
    assert b'"replaced"' in recorded
    manifest.unlink()
    assert apply(root, catalog).written
    assert manifest.read_bytes() == recorded
    _check_and_remove_exact(root, catalog, pristine)


def test_another_ruff_style_is_followed_too(verl_091, tmp_path, catalog):
    """A fork formatted at 79 columns with single quotes: the inserted code, its import lines
    included (past 79 columns they wrap), is what ruff writes there."""
    root = copy_tree(verl_091, tmp_path / "narrow")
    (root / "ruff.toml").write_text('line-length = 79\n[format]\nquote-style = "single"\n', encoding="utf-8")
    files = _catalog_files(root, catalog)
    assert _ruff(root, "format", "--no-cache", *files).returncode == 0
    pristine = _bytes(root, files)
    result = apply(root, catalog)
    assert result.written
    touched = _touched(result)
    assert any(b"from verl.utils.tracing import (\n" in (root / f).read_bytes() for f in touched)
    formatted = _ruff(root, "format", "--check", "--no-cache", *touched)
    assert formatted.returncode == 0, formatted.stdout
    _check_and_remove_exact(root, catalog, pristine)


def test_chunks_and_whole_modules_are_formatted_alike(verl_091, tmp_path, catalog, monkeypatch):
    """apply edits chunks of a file, or the whole module where a file cannot be cut: under a
    formatter's configuration the two give the same bytes, as without one (tests/test_chunks.py)."""
    from trace_instrument.edit import chunks

    produced = {}
    for enabled in (True, False):
        monkeypatch.setattr(chunks, "ENABLED", enabled)
        root = copy_tree(verl_091, tmp_path / f"chunks-{enabled}")
        (root / "pyproject.toml").write_text("[tool.ruff]\nline-length = 79\n", encoding="utf-8")
        result = apply(root, catalog)
        assert result.written
        produced[enabled] = _bytes(root, [*_touched(result), ".trace-instrument.json"])
    assert produced[True] == produced[False]


def _black_format(root: Path, files: list[str], mode: black.Mode) -> None:
    for relative in files:
        path = root / relative
        path.write_text(black.format_str(path.read_text(encoding="utf-8"), mode=mode), encoding="utf-8")


def _black_clean(root: Path, relative: str, mode: black.Mode) -> bool:
    try:
        black.format_file_contents((root / relative).read_text(encoding="utf-8"), fast=False, mode=mode)
    except black.NothingChanged:
        return True
    return False


@pytest.mark.parametrize("version", RELEASES)
def test_a_black_formatted_tree_under_tool_black_stays_black_clean(verl_release, tmp_path, catalog, version):
    mode = black.Mode(line_length=120)
    root = copy_tree(verl_release(version), tmp_path / "black")
    (root / "pyproject.toml").write_text("[tool.black]\nline-length = 120\n", encoding="utf-8")
    files = _catalog_files(root, catalog)
    _black_format(root, files, mode)  # a fork that formats with black
    pristine = _bytes(root, files)

    result = apply(root, catalog)
    assert result.written and result.error is None
    touched = _touched(result)
    assert TRAINER in touched
    assert [f for f in touched if not _black_clean(root, f, mode)] == []

    instrumented = _bytes(root, touched)
    _black_format(root, touched, mode)
    assert _bytes(root, touched) == instrumented
    _check_and_remove_exact(root, catalog, pristine)
