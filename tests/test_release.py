"""The release number says what a tool ships: it changes whenever the catalog (anchors/), the
templates or the runtime (templates/) change, so that a tree written by a newer tool is never
taken for an older one (engine.releases refuses to write over it). The digest of those folders
is recorded with the release it belongs to (tests/release.digest); the runtime carries the same
number as the package."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from pathlib import Path

import trace_instrument
from trace_instrument.engine.releases import release

REPO = Path(__file__).resolve().parent.parent
SHIPPED = ("anchors", "templates")
RECORD = REPO / "tests" / "release.digest"
RECORD_ENV = "TRACE_INSTRUMENT_RECORD_RELEASE"  # = the current release: write its digest into RECORD
BUMP = (
    "bump the release: __version__ in trace_instrument/__init__.py and in templates/runtime/__init__.py "
    "(the same number, higher than {recorded}), add the sha256 (first 16 hex) of the runtime "
    "__init__.py you replace to templates/runtime.earlier, then record the new pair: "
    "{env}=<new version> python -m pytest -n 0 tests/test_release.py"
)


def shipped_digest(repo: Path = REPO) -> str:
    """sha256 over every file of anchors/ and templates/ (caches left out): path, size, bytes."""
    hasher = hashlib.sha256()
    for folder in SHIPPED:
        for path in sorted((repo / folder).rglob("*")):
            if not path.is_file() or "__pycache__" in path.parts or path.suffix == ".pyc":
                continue
            data = path.read_bytes()
            hasher.update(f"{path.relative_to(repo).as_posix()}\0{len(data)}\0".encode())
            hasher.update(data)
    return hasher.hexdigest()


def _recorded() -> tuple[str, str]:
    version, digest = RECORD.read_text(encoding="utf-8").split()
    return version, digest


def test_the_release_is_a_numbered_one():
    assert re.fullmatch(r"\d+\.\d+\.\d+", trace_instrument.__version__), "MAJOR.MINOR.PATCH, ordered by numbers"


def test_the_runtime_carries_the_release_of_the_package():
    text = (REPO / "templates/runtime/__init__.py").read_text(encoding="utf-8")
    assert f'\n__version__ = "{trace_instrument.__version__}"\n' in text, (
        "templates/runtime/__init__.py's __version__ must equal trace_instrument.__version__"
    )


def test_the_package_version_has_one_definition():
    project = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    assert (
        'dynamic = ["version"]' in project and '[tool.hatch.version]\npath = "trace_instrument/__init__.py"' in project
    )
    assert not re.search(r"(?m)^version\s*=", project), "pyproject.toml reads the version; it does not state it"


def test_what_the_tool_ships_changes_only_with_its_release():
    current, digest = trace_instrument.__version__, shipped_digest()
    if os.environ.get(RECORD_ENV) == current:
        RECORD.write_text(f"{current} {digest}\n", encoding="utf-8")
    recorded_version, recorded_digest = _recorded()
    if digest == recorded_digest:
        assert current == recorded_version, f"{RECORD.name} records {recorded_version}; the package says {current}"
        return
    recorded_release, current_release = release(recorded_version), release(current)
    assert recorded_release is not None and current_release is not None
    if current_release > recorded_release:
        raise AssertionError(
            f"release {current} is not recorded yet: {RECORD_ENV}={current} python -m pytest -n 0 tests/test_release.py"
        )
    raise AssertionError(
        f"anchors/ or templates/ changed since release {recorded_version} was recorded "
        f"({recorded_digest[:12]}, now {digest[:12]}), and the release did not change: a tree written with "
        f"these files would pass for one written by {recorded_version}. Either "
        + BUMP.format(recorded=recorded_version, env=RECORD_ENV)
        + f"; or, when {recorded_version} has not been released yet (changes merged into the same release), "
        f"record the new digest for it: {RECORD_ENV}={recorded_version} python -m pytest -n 0 tests/test_release.py"
    )


def test_a_change_without_a_bump_is_caught(tmp_path):
    """The digest sees a one-byte change of any shipped file, and a renamed one."""
    copy = tmp_path / "copy"
    for folder in SHIPPED:
        shutil.copytree(REPO / folder, copy / folder, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    before = shipped_digest(copy)
    assert before == shipped_digest(), "a copy of the folders has their digest"
    for changed in (copy / "anchors" / "env.yaml", copy / "templates" / "runtime" / "trace.py"):
        data = changed.read_bytes()
        changed.write_bytes(data + b"\n")
        assert shipped_digest(copy) != before, changed.name
        changed.write_bytes(data)
    assert shipped_digest(copy) == before
    moved = copy / "templates" / "runtime" / "trace.py"
    moved.rename(moved.with_name("tracing.py"))
    assert shipped_digest(copy) != before, "a renamed file changes the digest too"
