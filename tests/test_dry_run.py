"""What `apply --dry-run` and `remove --dry-run` show a reviewer, on the real verl 0.9.0 wheel.

The edits of verl's own files come first and whole; the runtime package's files and the manifest,
text the tool ships or keeps for itself, are one line each (`--full` shows their diff too). The
numbers asserted here come from the template files and from a tree apply wrote, never from the
tool's own summary; the business diff is the reviewed snapshot tests/golden/v0.9.0.patch.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from pathlib import Path

import pytest
from support import REPOSITORY, TESTS, copy_tree, tree_bytes
from typer.testing import CliRunner

from trace_instrument.cli import app

RUNTIME_SOURCE = REPOSITORY / "templates" / "runtime"
RUNTIME_DIR = "verl/utils/tracing/"
MANIFEST = ".trace-instrument.json"
BUSINESS_PATCH = TESTS / "golden" / "v0.9.0.patch"
# one summary line: state, path, lines, digest (and, for the manifest, the points it records)
SUMMARY = re.compile(r"^  (new|updated|removed) +(\S+) +(\d+) lines  sha256 ([0-9a-f]+)(?:  (\d+) points recorded)?$")


def _run(*args: object) -> tuple[int, str]:
    outcome = CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)
    return outcome.exit_code, outcome.output


def _runtime_files() -> dict[str, bytes]:
    files = {f"{RUNTIME_DIR}{path.name}": path.read_bytes() for path in sorted(RUNTIME_SOURCE.glob("*.py"))}
    assert files, f"no runtime templates found in {RUNTIME_SOURCE}"
    return files


def _line_count(data: bytes) -> int:
    """Lines as a patch counts them: a last line without its newline is a line too."""
    return data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)


def _expected(data: bytes, state: str, points: int | None = None) -> tuple[str, int, str, int | None]:
    return state, _line_count(data), hashlib.sha256(data).hexdigest()[:16], points


def _summaries(output: str) -> dict[str, list[tuple[str, int, str, int | None]]]:
    """Path -> every summary line naming it (state, lines, digest, points recorded)."""
    found: dict[str, list[tuple[str, int, str, int | None]]] = {}
    for line in output.splitlines():
        match = SUMMARY.match(line)
        if match:
            state, path, lines, digest, points = match.groups()
            found.setdefault(path, []).append((state, int(lines), digest, int(points) if points else None))
    return found


def _diff_part(output: str) -> str:
    """The diff a dry run prints: from its first header to the first line that is no diff's."""
    rows = output.splitlines(keepends=True)
    start = next(i for i, row in enumerate(rows) if row.startswith("diff --git "))
    diff_line = re.compile(r"^(diff --git |new file mode |deleted file mode |--- |\+\+\+ |@@ |[ +\-\\]|$)")
    end = next((i for i in range(start, len(rows)) if not diff_line.match(rows[i])), len(rows))
    return "".join(rows[start:end])


def _body_lines(files: dict[str, bytes], shown_elsewhere: str) -> list[str]:
    """Lines of the tool's own files long enough to be their own, and not in the business diff."""
    elsewhere = set(shown_elsewhere.splitlines())
    lines = {line for data in files.values() for line in data.decode("utf-8").splitlines() if len(line.strip()) > 30}
    return sorted(line for line in lines if not {f" {line}", f"+{line}", f"-{line}"} & elsewhere)


def _everything(root: Path) -> dict[str, bytes]:
    """The files under root/verl and the manifest next to it."""
    manifest = root / MANIFEST
    return {**tree_bytes(root), **({MANIFEST: manifest.read_bytes()} if manifest.exists() else {})}


def _written(verl_090: Path, where: Path) -> dict[str, bytes]:
    """The tree a writing apply makes of a pristine copy: what the dry run describes."""
    root = copy_tree(verl_090, where)
    code, output = _run("apply", root)
    assert code == 0, output
    return _everything(root)


def test_apply_dry_run_shows_the_business_diff_whole_and_the_tools_files_in_a_line(checkout_090, verl_090, tmp_path):
    code, output = _run("apply", "--dry-run", checkout_090)
    assert code == 0, output
    business = BUSINESS_PATCH.read_text(encoding="utf-8")
    assert _diff_part(output) == business, "the edits of verl's files first, every hunk of them"

    written = _written(verl_090, tmp_path / "written")
    manifest_points = len(json.loads(written[MANIFEST])["points"])
    expected = {path: [_expected(data, "new")] for path, data in _runtime_files().items()}
    expected[MANIFEST] = [_expected(written[MANIFEST], "new", manifest_points)]
    assert _summaries(output) == expected, "each runtime file and the manifest: exactly one line"
    assert manifest_points > 0

    own = {**_runtime_files(), MANIFEST: written[MANIFEST]}
    assert f"diff --git a/{RUNTIME_DIR}" not in output and f"diff --git a/{MANIFEST}" not in output
    shown = [line for line in _body_lines(own, business) if line in output]
    assert shown == [], "no text of the runtime package or the manifest"
    assert tree_bytes(checkout_090) == tree_bytes(verl_090)


def test_apply_dry_run_full_shows_every_file_text(checkout_090, verl_090):
    code, output = _run("apply", "--dry-run", "--full", checkout_090)
    assert code == 0, output
    assert _summaries(output) == {}
    assert _diff_part(output).startswith(BUSINESS_PATCH.read_text(encoding="utf-8"))
    for path, data in _runtime_files().items():
        assert f"diff --git a/{path} b/{path}\nnew file mode 100644\n" in output
        added = "".join(f"+{line}\n" for line in data.decode("utf-8").splitlines())
        assert added in output, f"{path}: its whole text"
    assert f"diff --git a/{MANIFEST} b/{MANIFEST}" in output
    assert tree_bytes(checkout_090) == tree_bytes(verl_090)


@pytest.mark.slow
def test_the_patch_stays_complete(checkout_090, verl_090, tmp_path):
    outcome = CliRunner().invoke(app, ["apply", "--patch", "-", str(checkout_090)], catch_exceptions=False)
    assert outcome.exit_code == 0
    patch = outcome.stdout_bytes
    assert patch.startswith(BUSINESS_PATCH.read_bytes())
    target = copy_tree(verl_090, tmp_path / "git")
    patch_file = tmp_path / "all.patch"
    patch_file.write_bytes(patch)
    assert _git(target, "init", "-q").returncode == 0
    applied = _git(target, "apply", "--whitespace=nowarn", str(patch_file))
    assert applied.returncode == 0, applied.stderr
    assert _everything(target) == _written(verl_090, tmp_path / "written"), "the runtime and the manifest too"


def test_remove_dry_run_shows_the_tools_files_in_a_line(checkout_090, verl_090):
    code, output = _run("apply", checkout_090)
    assert code == 0, output
    applied = _everything(checkout_090)
    points = len(json.loads(applied[MANIFEST])["points"])
    code, output = _run("remove", "--dry-run", checkout_090)
    assert code == 0, output
    expected = {path: [_expected(data, "removed")] for path, data in _runtime_files().items()}
    expected[MANIFEST] = [_expected(applied[MANIFEST], "removed", points)]
    assert _summaries(output) == expected
    business = _diff_part(output)
    assert business.count("diff --git ") == BUSINESS_PATCH.read_text(encoding="utf-8").count("diff --git ")
    assert f"diff --git a/{RUNTIME_DIR}" not in business
    shown = [
        line for line in _body_lines({**_runtime_files(), MANIFEST: applied[MANIFEST]}, business) if line in output
    ]
    assert shown == []

    code, full = _run("remove", "--dry-run", "--full", checkout_090)
    assert code == 0
    for path, data in _runtime_files().items():
        assert f"diff --git a/{path} b/{path}\ndeleted file mode 100644\n" in full
        assert "".join(f"-{line}\n" for line in data.decode("utf-8").splitlines()) in full
    assert _everything(checkout_090) == applied


@pytest.mark.parametrize("command", ["apply", "remove"])
def test_full_without_dry_run_is_an_error_and_writes_nothing(command, checkout_090, verl_090):
    code, _output = _run(command, "--full", checkout_090)
    assert code == 2
    assert tree_bytes(checkout_090) == tree_bytes(verl_090)


def _git(where: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(["git", *arguments], cwd=where, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        pytest.fail("git is needed to check that the patch applies; install git", pytrace=False)
