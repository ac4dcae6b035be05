"""The test tiers, declared: which tier a test is in, which tests a run selects, and the guard.

A test's tier follows from what it uses: the fixtures it requests (directly or through another
fixture: `item.fixturenames` is the closure) or a `pytest.mark.<tier>` / `pytestmark` its module
declares. Nothing is read from a test's source text.

- `e2e`: a whole verl tree from the PyPI wheels (`verl_080`, `verl_090`, `verl_091`, `verl_release`,
  and every fixture built on them: `checkout_090`, `applied_090`, `instrumented_090`, ...);
- `browser`: headless Chromium (the `chromium` fixture of tests/traces);
- `spark`: Spark in local mode, a JVM (the `pyspark` fixture of tests/traces);
- `slow`: other processes run for real (the CLI as a subprocess, git histories, signals and exits):
  `pytest.mark.slow` on the test or `pytestmark` on its module. (A short Python snippet run against
  the standard-library runtime, tests/runtime's `script`, a tenth of a second, stays in the default.)

A new test that needs one of these goes into its tier: request the fixture, or declare the mark.

`python -m pytest` runs the default tier alone (the tests in none of these); `--all` runs every
tier; `-m <expression>` selects by marks as pytest does (`-m e2e`, `-m "spark or browser"`).

While a default-tier test runs (set-up, call and tear-down), an audit hook (`sys.addaudithook`)
watches the process: reading a whole verl tree of the wheel cache or calling `verl_tree`,
launching Chromium, importing pyspark or starting a JVM is recorded, refused (the operation
raises `TierViolation`) and fails the test, even where the code under test catches the error. So a
test put in the default tier by mistake fails at once instead of slowing the default run down.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

TIERS = ("e2e", "slow", "browser", "spark")
# the fixtures that put a test in a tier (the fixtures built on them follow: fixturenames is a closure)
FIXTURE_TIERS = {
    "verl_080": "e2e",
    "verl_090": "e2e",
    "verl_091": "e2e",
    "verl_release": "e2e",
    "chromium": "browser",
    "pyspark": "spark",
}
ALL_OPTION = "--all"


def declared_tiers(item: pytest.Item) -> set[str]:
    """The tiers `item` is in: from the fixtures it requests and the marks it (or its module) carries."""
    marks = {mark.name for mark in item.iter_markers()} & set(TIERS)
    fixtures = {FIXTURE_TIERS[name] for name in getattr(item, "fixturenames", ()) if name in FIXTURE_TIERS}
    return marks | fixtures


def mark_tiers(items: list[pytest.Item]) -> None:
    """Add the marks of the tiers each test's fixtures put it in, so `-m` selects on them."""
    for item in items:
        for tier in sorted(declared_tiers(item)):
            if not item.get_closest_marker(tier):
                item.add_marker(getattr(pytest.mark, tier))


def select_default_tier(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without `--all` or `-m`, keep only the default tier: the others are reported as deselected."""
    if config.getoption(ALL_OPTION) or config.getoption("markexpr"):
        return
    kept = [item for item in items if not declared_tiers(item)]
    if len(kept) == len(items):
        return
    config.hook.pytest_deselected(items=[item for item in items if declared_tiers(item)])
    items[:] = kept


def header(config: pytest.Config) -> str:
    """The line the run's header shows: which tiers run, and how to run the others."""
    if config.getoption(ALL_OPTION):
        return "tiers: all (default, " + ", ".join(TIERS) + ")"
    if config.getoption("markexpr"):
        return f"tiers: the tests -m {config.getoption('markexpr')!r} selects"
    return f"tiers: the default tier alone ({ALL_OPTION} runs every tier, -m {'|'.join(TIERS)} one of them)"


class TierViolation(RuntimeError):
    """A default-tier test used what only another tier may use."""


class Guard:
    """Records (and refuses) what a default-tier test may not do, while it is armed.

    `trees` is the path prefix of the extracted verl trees (`<cache>/verl-`): the wheel cache's
    other entries (the wheels, the codemod's check cache) are not trees.
    """

    def __init__(self, trees: str) -> None:
        self.trees = trees
        self.armed = False
        self.seen: list[str] = []

    def audit(self, event: str, args: tuple[Any, ...]) -> None:
        """The audit hook: cheap when disarmed (it sees every audited event of the process)."""
        if not self.armed:
            return
        what = self.offence(event, args)
        if what is not None:
            self.seen.append(what)
            raise TierViolation(f"a default-tier test {what} (see tests/tiers.py)")

    def offence(self, event: str, args: tuple[Any, ...]) -> str | None:
        """What `event` does that the default tier may not, or None."""
        if event in ("open", "os.listdir", "os.scandir") and args and self._in_tree(args[0]):
            return f"touched a whole verl tree ({_text(args[0])}): tier e2e"
        if event == "import" and args and str(args[0]).split(".")[0] == "pyspark":
            return f"imported {args[0]}: tier spark"
        if event == "subprocess.Popen" and len(args) >= 2:
            program = _program(args[0], args[1])
            if "chromium" in program or "chrome" in program:
                return f"launched {program}: tier browser"
            if program in ("java", "spark-submit", "spark-class", "pyspark"):
                return f"started a JVM ({program}): tier spark"
        return None

    def called(self, what: str) -> None:
        """A guarded function was called (the wrapped `verl_tree`)."""
        if self.armed:
            self.seen.append(f"called {what}: tier e2e")
            raise TierViolation(f"a default-tier test called {what}: tier e2e (see tests/tiers.py)")

    def _in_tree(self, path: object) -> bool:
        return isinstance(path, (str, bytes, os.PathLike)) and _text(path).startswith(self.trees)

    @contextmanager
    def expecting(self) -> Iterator[list[str]]:
        """For the guard's own tests: the offences of the block are handed over, not failed on."""
        start = len(self.seen)
        taken: list[str] = []
        try:
            yield taken
        finally:
            taken.extend(self.seen[start:])
            del self.seen[start:]


def _text(path: object) -> str:
    value = os.fspath(path)  # type: ignore[arg-type]
    return value.decode(errors="replace") if isinstance(value, bytes) else value


def _program(executable: object, argv: object) -> str:
    """The base name of the program a Popen starts."""
    first = argv if isinstance(argv, (str, bytes, os.PathLike)) else next(iter(argv or ()), "")
    chosen = executable if executable is not None else first
    return Path(_text(chosen).split()[0] if isinstance(argv, str) else _text(chosen)).name


GUARD: Guard | None = None


def install_guard() -> Guard:
    """The process's one guard: its audit hook, and `verl_tree` wrapped (a cached tree is returned
    without touching it, so the call itself is watched too)."""
    global GUARD
    if GUARD is None:
        from trace_instrument import wheels
        from trace_instrument.caches import cache_dir

        GUARD = Guard(str(cache_dir() / "verl-"))
        sys.addaudithook(GUARD.audit)
        wheels.verl_tree = _watched(wheels.verl_tree, GUARD)
    return GUARD


def _watched(function: Callable[[str], Path], guard: Guard) -> Callable[[str], Path]:
    @functools.wraps(function)
    def verl_tree(version: str) -> Path:
        guard.called(f"verl_tree({version!r})")
        return function(version)

    return verl_tree


@contextmanager
def guarded(item: pytest.Item) -> Iterator[None]:
    """Around one phase of a test: armed when the test is in the default tier; fails it on an offence
    (also one the code under test caught and went on after)."""
    guard = GUARD
    if guard is None or declared_tiers(item):
        yield
        return
    start, before = len(guard.seen), guard.armed
    guard.armed = True
    try:
        yield
    finally:
        guard.armed = before
        offences = guard.seen[start:]
        del guard.seen[start:]
    if offences:
        pytest.fail("default tier: " + "; ".join(dict.fromkeys(offences)) + " (see tests/tiers.py)", pytrace=False)
