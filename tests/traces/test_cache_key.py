"""The reader's cache is keyed by a digest of the reader's own code: a cache written by another
version of the reader (a changed module or SQL file) is never read, with no version to bump."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from trace_instrument import caches
from trace_instrument.traces import store
from trace_instrument.traces.analyze import Options, analyze

PACKAGE = Path(__file__).parents[2] / "trace_instrument"
LARGE = Options(in_memory_max_bytes=0)  # as a run too large to read into memory: it is cached


@pytest.fixture
def reader_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The cache keyed by a copy of the reader's code, which the test may change."""
    copy = shutil.copytree(PACKAGE / "traces", tmp_path / "reader", ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(store, "READER_CODE", copy)
    caches.code_digest.cache_clear()  # read once a process: each change below is a new reader
    yield copy
    caches.code_digest.cache_clear()


@pytest.mark.parametrize("changed", ["sql/views.sql", "views.py"])
def test_a_changed_reader_file_loads_the_traces_afresh(changed, reader_copy, tiny_run, tmp_path):
    trace = shutil.copytree(tiny_run, tmp_path / "trace")
    first = analyze([trace], LARGE)
    caches.code_digest.cache_clear()
    second = analyze([trace], LARGE)
    assert not first.cached and second.cached, "the same reader reads its own cache"
    with (reader_copy / changed).open("a", encoding="utf-8") as handle:
        handle.write("\n-- changed\n" if changed.endswith(".sql") else "\n# changed\n")
    caches.code_digest.cache_clear()
    third = analyze([trace], LARGE)
    assert not third.cached, f"a cache written before {changed} changed was read"
    assert third == first
    assert len(list((trace / ".trace-instrument-cache").glob("analyze-*.duckdb"))) == 1, "the stale cache is gone"


def test_a_file_that_is_not_the_readers_code_leaves_the_key_alone(reader_copy, tiny_run, tmp_path):
    trace = shutil.copytree(tiny_run, tmp_path / "trace")
    analyze([trace], LARGE)
    (reader_copy / "notes.txt").write_text("not code", encoding="utf-8")
    (reader_copy / "__pycache__").mkdir(exist_ok=True)
    (reader_copy / "__pycache__" / "views.cpython-311.pyc").write_bytes(b"compiled")
    caches.code_digest.cache_clear()
    assert analyze([trace], LARGE).cached


@pytest.mark.slow
def test_a_changed_copy_of_the_package_loads_afresh(tiny_run, tmp_path):
    """As installed: processes of a copy of the package, a reader file (then the runtime's format)
    changed between them."""
    site = tmp_path / "site"  # laid out as a checkout: the package, and templates/ beside it
    shutil.copytree(PACKAGE, site / "trace_instrument", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(PACKAGE.parent / "templates", site / "templates", ignore=shutil.ignore_patterns("__pycache__"))
    trace = shutil.copytree(tiny_run, tmp_path / "trace")
    code = (
        "import sys\n"
        "import trace_instrument\n"
        f"assert trace_instrument.__file__.startswith({str(site)!r}), trace_instrument.__file__\n"
        "from trace_instrument.traces.analyze import Options, analyze\n"
        f"print('CACHED:', analyze([{str(trace)!r}], Options(in_memory_max_bytes=0)).cached)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(site)}

    def cached() -> bool:
        run = subprocess.run(
            [sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True, check=False
        )
        assert run.returncode == 0, run.stderr
        (line,) = [row for row in run.stdout.splitlines() if row.startswith("CACHED:")]
        return line == "CACHED: True"

    assert [cached(), cached()] == [False, True]
    with (site / "trace_instrument" / "traces" / "sql" / "steps.sql").open("a", encoding="utf-8") as handle:
        handle.write("\n-- changed\n")
    assert [cached(), cached()] == [False, True]
    # the format the reader reads by is the runtime's: changed, it is another reader too
    with (site / "templates" / "runtime" / "formats.py").open("a", encoding="utf-8") as handle:
        handle.write("\n# changed\n")
    assert cached() is False
