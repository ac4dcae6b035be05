"""Shared fixtures: the catalog, and pristine verl trees from the PyPI wheels.

The wheels are downloaded once (pip download --no-deps) into the
trace-instrument cache; TRACE_INSTRUMENT_WHEELS may name a folder that already
holds them. When neither works the tests fail with the reason; they never skip.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import support
import tiers
from support import copy_tree, suite_writes

from trace_instrument import wheels
from trace_instrument.model import RunResult
from trace_instrument.spec import load_catalog

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
        return wheels.verl_tree(version)
    except wheels.WheelError as exc:
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


@pytest.fixture(scope="session")
def verl_release() -> Callable[[str], Path]:
    """Any release's pristine tree by version (`verl_release("0.7.1")`), for the tests
    parametrized over releases and the releases without a fixture of their own."""
    return _pristine


@pytest.fixture
def checkout_090(verl_090: Path, tmp_path: Path) -> Path:
    return copy_tree(verl_090, tmp_path / "checkout")


@pytest.fixture(scope="session")
def applied_090_run(verl_090: Path, catalog, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, RunResult]:
    """verl 0.9.0 with the whole catalog applied, once per worker, and apply's result (its bytes
    and manifest are the same every time: the manifest holds no paths or times). Never written by a
    test: take `instrumented_090`, a copy."""
    from trace_instrument.engine.apply import apply

    root = copy_tree(verl_090, tmp_path_factory.mktemp("applied_090"))
    result = apply(root, catalog)
    assert result.written
    return root, result


@pytest.fixture(scope="session")
def applied_090(applied_090_run: tuple[Path, RunResult]) -> Path:
    """The tree of `applied_090_run` (read only)."""
    return applied_090_run[0]


@pytest.fixture
def instrumented_090(applied_090: Path, tmp_path: Path) -> Path:
    """A writable copy of `applied_090` (the manifest included): set-up for the tests that start
    from an instrumented tree, or that change it."""
    return support.copy_checkout(applied_090, tmp_path / "checkout")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        tiers.ALL_OPTION,
        action="store_true",
        help="run every tier (e2e, slow, browser, spark), not only the default one (see tests/tiers.py)",
    )


def pytest_report_header(config: pytest.Config) -> str:
    return tiers.header(config)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each test's tiers marked from what it declares (tests/tiers.py); the default run keeps the
    default tier alone."""
    tiers.mark_tiers(items)
    tiers.select_default_tier(config, items)
    # the longest first (Spark, Chromium, other processes, real trees), so parallel workers do not
    # end waiting on one of them; the order within each kind is the collection's
    items.sort(key=_weight)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> object:
    with tiers.guarded(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> object:
    with tiers.guarded(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> object:
    with tiers.guarded(item):
        return (yield)


def _stop_signals_not_ignored() -> None:
    """A suite started as a background job of a script (`cmd &`, `nohup`) inherits SIGINT (SIGHUP)
    ignored, and so would every process it starts: the tests that interrupt a real CLI run would
    see it finish instead. A handler of this process's own is reset to the default in a child at
    exec, an ignored signal is not, so the suite handles them as Python does when they are not
    ignored (the tool itself keeps an ignored signal ignored, as a background job asks)."""
    defaults = {"SIGINT": signal.default_int_handler, "SIGHUP": signal.SIG_DFL, "SIGTERM": signal.SIG_DFL}
    for name, handler in defaults.items():
        signum = getattr(signal, name, None)
        if signum is not None and signal.getsignal(signum) is signal.SIG_IGN:
            signal.signal(signum, handler)


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
    tiers.install_guard()
    _stop_signals_not_ignored()
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
