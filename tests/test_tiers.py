"""The tiers (tests/tiers.py): the guard fires on what only another tier may use, and the default run
selects the default tier alone. These tests are in the default tier, so the process's own guard is
armed while they run: each offence they commit on purpose is taken back with `expecting()`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import tiers

from trace_instrument import wheels
from trace_instrument.caches import cache_dir

GUARD = tiers.GUARD


def test_the_guard_is_armed_in_the_default_tier() -> None:
    assert GUARD is not None and GUARD.armed
    assert GUARD.trees == str(cache_dir() / "verl-")


def test_calling_verl_tree_fails_a_default_tier_test() -> None:
    """Even for a tree already extracted (verl_tree then touches nothing the audit hook sees)."""
    assert GUARD is not None
    with GUARD.expecting() as offences, pytest.raises(tiers.TierViolation, match="tier e2e"):
        wheels.verl_tree("0.9.0")
    assert offences == ["called verl_tree('0.9.0'): tier e2e"]


def test_reading_a_tree_fails_a_default_tier_test() -> None:
    """Opening or listing anything under an extracted tree, however the path was had."""
    assert GUARD is not None
    tree = Path(GUARD.trees + "0.9.0") / "verl"
    with GUARD.expecting() as offences:
        with pytest.raises(tiers.TierViolation):
            (tree / "__init__.py").read_bytes()
        with pytest.raises(tiers.TierViolation):
            list(tree.iterdir())
    assert len(offences) == 2 and all("touched a whole verl tree" in o for o in offences), offences
    # the cache's other entries are not trees: the wheels folder may be looked at
    with GUARD.expecting() as offences:
        (cache_dir() / "wheels").is_dir()
        list((cache_dir() / "no-such-entry").parent.glob("wheels"))
    assert offences == []


def test_launching_chromium_or_a_jvm_fails_a_default_tier_test(tmp_path: Path) -> None:
    """The audit hook refuses before the program starts: neither needs to be installed."""
    assert GUARD is not None
    with GUARD.expecting() as offences:
        for program in ("chromium", "/usr/bin/chromium-browser", "java", "spark-submit"):
            with pytest.raises(tiers.TierViolation):
                subprocess.run([program, "--version"], check=False, capture_output=True)
    assert [o.split(":")[-1].strip() for o in offences] == ["tier browser", "tier browser", "tier spark", "tier spark"]
    done = subprocess.run([sys.executable, "-c", "print(1)"], check=True, capture_output=True, text=True)
    assert done.stdout == "1\n", "other processes are not the guard's business"


def test_importing_pyspark_fails_a_default_tier_test(monkeypatch: pytest.MonkeyPatch) -> None:
    assert GUARD is not None
    for name in [name for name in sys.modules if name.split(".")[0] == "pyspark"]:
        monkeypatch.delitem(sys.modules, name)  # imported by a spark test of this worker (--all)
    with GUARD.expecting() as offences, pytest.raises(tiers.TierViolation, match="tier spark"):
        import pyspark.sql  # noqa: F401
    assert offences == ["imported pyspark: tier spark"] or offences == ["imported pyspark.sql: tier spark"]


def test_a_caught_violation_still_fails_the_test() -> None:
    """Code under test that catches the error and goes on: the guard's record fails the phase."""
    assert GUARD is not None
    item = _Item(marks=())
    with pytest.raises(pytest.fail.Exception, match="called verl_tree"), tiers.guarded(item):  # type: ignore[arg-type]
        try:
            wheels.verl_tree("0.9.1")
        except tiers.TierViolation:
            pass
    assert GUARD.armed, "armed again for the rest of this test"


def test_a_test_in_another_tier_is_not_watched() -> None:
    assert GUARD is not None
    GUARD.armed = False  # as for a test of tier e2e, around which guarded() does not arm
    try:
        with tiers.guarded(_Item(marks=("e2e",))):  # type: ignore[arg-type]
            assert not GUARD.armed
            assert GUARD.offence("open", (GUARD.trees + "0.9.0/verl/__init__.py", "r", 0)) is not None
    finally:
        GUARD.armed = True


def test_the_offences_are_told_apart_without_a_process() -> None:
    guard = tiers.Guard("/cache/verl-")
    assert guard.offence("open", ("/cache/verl-0.8.0/verl/x.py", "r", 0)) == (
        "touched a whole verl tree (/cache/verl-0.8.0/verl/x.py): tier e2e"
    )
    assert guard.offence("os.scandir", (b"/cache/verl-0.9.1-abc/verl",)) is not None
    assert guard.offence("open", ("/cache/wheels/verl-0.9.0-py3-none-any.whl", "rb", 0)) is None
    assert guard.offence("open", (3, "r", 0)) is None  # a descriptor: no path
    assert guard.offence("import", ("pyspark.sql.session", None)) == "imported pyspark.sql.session: tier spark"
    assert guard.offence("import", ("pysparkling", None)) is None
    popen = "subprocess.Popen"
    assert guard.offence(popen, (None, ["/snap/bin/chromium", "--headless"], None, None)) is not None
    assert guard.offence(popen, ("/usr/lib/jvm/bin/java", ["java", "-cp"], None, None)) == (
        "started a JVM (java): tier spark"
    )
    assert guard.offence(popen, (None, "chromium --headless", None, None)) is not None  # shell=True
    assert guard.offence(popen, (None, ["git", "init"], None, None)) is None
    guard.audit("open", ("/cache/verl-0.9.0/verl/x.py", "r", 0))  # disarmed: nothing
    assert guard.seen == []
    guard.armed = True
    with pytest.raises(tiers.TierViolation):
        guard.audit("open", ("/cache/verl-0.9.0/verl/x.py", "r", 0))
    assert guard.seen == ["touched a whole verl tree (/cache/verl-0.9.0/verl/x.py): tier e2e"]


def test_a_tier_follows_from_the_fixtures_a_test_requests() -> None:
    assert tiers.declared_tiers(_Item(fixtures=("tmp_path", "checkout_090", "verl_090"))) == {"e2e"}  # type: ignore[arg-type]
    assert tiers.declared_tiers(_Item(fixtures=("chromium", "sim_run"))) == {"browser"}  # type: ignore[arg-type]
    assert tiers.declared_tiers(_Item(fixtures=("pyspark", "tiny_run"))) == {"spark"}  # type: ignore[arg-type]
    assert tiers.declared_tiers(_Item(fixtures=("verl_release",), marks=("slow",))) == {"e2e", "slow"}  # type: ignore[arg-type]
    assert tiers.declared_tiers(_Item(fixtures=("tmp_path", "catalog"))) == set()  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("options", "kept"),
    [
        ({}, ["plain"]),
        ({"--all": True}, ["plain", "tree", "browser", "slow"]),
        ({"markexpr": "e2e"}, ["plain", "tree", "browser", "slow"]),  # pytest's -m then selects among them
    ],
)
def test_the_default_run_keeps_the_default_tier_alone(options: dict[str, object], kept: list[str]) -> None:
    items = {
        "plain": _Item(fixtures=("tmp_path",)),
        "tree": _Item(fixtures=("checkout_090", "verl_090")),
        "browser": _Item(fixtures=("chromium",)),
        "slow": _Item(marks=("slow",)),
    }
    selected = list(items.values())
    config = _Config(options)
    tiers.select_default_tier(config, selected)  # type: ignore[arg-type]
    assert selected == [items[name] for name in kept]
    assert config.deselected == [item for name, item in items.items() if name not in kept]


def test_the_header_says_which_tiers_run() -> None:
    assert tiers.header(_Config({})).startswith("tiers: the default tier alone (--all runs every tier")  # type: ignore[arg-type]
    assert tiers.header(_Config({"--all": True})) == "tiers: all (default, e2e, slow, browser, spark)"  # type: ignore[arg-type]
    assert tiers.header(_Config({"markexpr": "e2e"})) == "tiers: the tests -m 'e2e' selects"  # type: ignore[arg-type]


class _Config:
    def __init__(self, options: dict[str, object]) -> None:
        self.options = {"--all": False, "markexpr": "", **options}
        self.deselected: list[object] = []
        self.hook = self

    def getoption(self, name: str) -> object:
        return self.options[name]

    def pytest_deselected(self, items: list[object]) -> None:
        self.deselected.extend(items)


class _Item:
    """What tiers reads of a pytest item: its fixtures and its marks."""

    def __init__(self, fixtures: tuple[str, ...] = (), marks: tuple[str, ...] = ()) -> None:
        self.fixturenames = list(fixtures)
        self._marks = [getattr(pytest.mark, name).mark for name in marks]

    def iter_markers(self):  # type: ignore[no-untyped-def]
        return iter(self._marks)
