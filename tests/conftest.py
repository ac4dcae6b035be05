"""Shared fixtures: the catalog, and pristine verl trees from the PyPI wheels.

The wheels are downloaded once (pip download --no-deps) into the
trace-instrument cache; TRACE_INSTRUMENT_WHEELS may name a folder that already
holds them. When neither works the tests fail with the reason; they never skip.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import support
from support import copy_tree, suite_writes

from trace_instrument.spec import load_catalog
from trace_instrument.wheels import WheelError, verl_tree

REAL_DISCOVERY_FILES = [
    Path("/tmp/verl_trace_sample_path.txt"),
    Path("/tmp/verl_trace_trajectory_path.txt"),
    Path("/tmp/verl_progress_path.txt"),
]


@pytest.fixture(scope="session", autouse=True)
def real_discovery_files_untouched(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """No test may write the real /tmp discovery files.

    Every process the suite starts inherits a scratch discovery folder, so a test that forgets
    to set its own cannot touch a user's files; the guard still fails if one is written anyway
    with a path of the suite's (e.g. by code that ignores the variable). What other processes
    write there is theirs and never fails the suite.
    """
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("VERL_TRACE_DISCOVERY_DIR", str(tmp_path_factory.mktemp("discovery")))
        yield
    written = suite_writes(REAL_DISCOVERY_FILES, tmp_path_factory.getbasetemp())
    assert not written, f"a test wrote the real discovery files: {', '.join(map(str, written))}"


@pytest.fixture(scope="session")
def catalog():
    return load_catalog()


def _pristine(version: str) -> Path:
    try:
        return verl_tree(version)
    except WheelError as exc:
        pytest.fail(f"verl {version} is needed for this test and could not be had: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def verl_090() -> Path:
    return _pristine("0.9.0")


@pytest.fixture(scope="session")
def verl_091() -> Path:
    return _pristine("0.9.1")


@pytest.fixture(scope="session")
def verl_080() -> Path:
    return _pristine("0.8.0")


@pytest.fixture
def checkout_090(verl_090: Path, tmp_path: Path) -> Path:
    return copy_tree(verl_090, tmp_path / "checkout")


@pytest.fixture(scope="session")
def applied_090(verl_090: Path, catalog, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """verl 0.9.0 with the whole catalog applied, once per test run (its bytes and manifest are
    the same every time: the manifest holds no paths or times). Never written by a test: take
    `instrumented_090`, a copy."""
    from trace_instrument.engine.apply import apply

    root = copy_tree(verl_090, tmp_path_factory.mktemp("applied_090"))
    assert apply(root, catalog).written
    return root


@pytest.fixture
def instrumented_090(applied_090: Path, tmp_path: Path) -> Path:
    """A writable copy of `applied_090` (the manifest included): set-up for the tests that start
    from an instrumented tree; the tests of apply itself run apply."""
    root = copy_tree(applied_090, tmp_path / "checkout")
    for extra in applied_090.iterdir():
        if extra.is_file():
            shutil.copy2(extra, root / extra.name)
    return root


E2E_FIXTURES = frozenset({"verl_090", "verl_091", "verl_080", "checkout_090", "applied_090", "instrumented_090"})
MODULE_MARKS = {"test_html": "browser", "test_spark": "spark"}
SLOW_WORDS = ("subprocess", "git(", "Popen", "sys.executable")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test by what it uses (see the markers in pyproject.toml): real wheels (a verl
    fixture, or `verl_tree(` in its code), Chromium, Spark, other processes."""
    import inspect

    for item in items:
        function = getattr(item, "function", None)
        try:
            code = inspect.getsource(function) if function is not None else ""
        except (OSError, TypeError):
            code = ""
        if E2E_FIXTURES & set(getattr(item, "fixturenames", ())) or "verl_tree(" in code:
            item.add_marker(pytest.mark.e2e)
        module = item.module.__name__.rpartition(".")[2] if getattr(item, "module", None) else ""
        if module in MODULE_MARKS:
            item.add_marker(getattr(pytest.mark, MODULE_MARKS[module]))
        if any(word in code for word in SLOW_WORDS):
            item.add_marker(pytest.mark.slow)

    # the longest first (Spark, Chromium, other processes, real trees), so parallel workers do not
    # end waiting on one of them; the order within each kind is the collection's
    items.sort(key=_weight)


def _weight(item: pytest.Item) -> int:
    marks = {m.name for m in item.iter_markers()}
    for rank, mark in enumerate(("spark", "browser", "slow", "e2e")):
        if mark in marks:
            return rank
    return 4


MEMORY_DISK = Path("/dev/shm")  # Linux's tmpfs: the suite copies and writes thousands of small files
_OWN_BASETEMP: list[Path] = []


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Rewriting snapshots runs in this one process (no xdist workers), so the summary below can
    list every file it rewrote. Scratch places go to a fresh folder in memory where the machine has
    one (unless --basetemp names one; xdist's workers get theirs inside it), removed at the end."""
    if support.UPDATING and getattr(config.option, "numprocesses", None):
        config.option.numprocesses = 0
        config.option.dist = "no"
    in_worker = hasattr(config, "workerinput")
    if config.option.basetemp is None and not in_worker and MEMORY_DISK.is_dir() and os.access(MEMORY_DISK, os.W_OK):
        own = Path(tempfile.mkdtemp(prefix="trace-instrument-tests-", dir=MEMORY_DISK))
        _OWN_BASETEMP.append(own)
        config.option.basetemp = str(own)


def pytest_unconfigure(config: pytest.Config) -> None:
    for own in _OWN_BASETEMP:
        shutil.rmtree(own, ignore_errors=True)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not support.UPDATING:
        return
    reporter = terminalreporter
    reporter.section(f"{support.UPDATE_ENV}=1", sep="=", red=True, bold=True)
    for snapshot in support.REWRITTEN:
        reporter.line(f"rewritten: {snapshot.relative_to(support.REPOSITORY).as_posix()}", red=True)
    if not support.REWRITTEN:
        reporter.line("no snapshot changed", red=True)
    reporter.line("this run fails by design: review the snapshots (git diff), then run again without the variable")


def pytest_sessionfinish(session: pytest.Session) -> None:
    """With the update variable set the run never passes, so it cannot go green in CI."""
    if support.UPDATING:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
