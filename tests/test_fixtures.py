"""Per-operation fixtures: tests/fixtures/<operation>/<case>/{spec.yaml,before.py,after.py}.

Each case is run four ways: before -> after (apply), after -> after (the no-op
twin: a second apply changes no byte), after -> before (remove), and
before -> before under --dry-run.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support import assert_snapshot

from trace_instrument.engine.apply import apply
from trace_instrument.engine.remove import remove
from trace_instrument.model import EXTRAS, Selection
from trace_instrument.spec import load_catalog

FIXTURES = Path(__file__).parent / "fixtures"


def _cases() -> list:
    return list(_case_iter())


def _case_iter():
    for spec in sorted(FIXTURES.glob("*/*/spec.yaml")):
        case = spec.parent
        yield pytest.param(case, id=f"{case.parent.name}/{case.name}")


def _target(tmp_path: Path, data: bytes) -> Path:
    target = tmp_path / "verl" / "target.py"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return target


def _run(case: Path, tmp_path: Path, data: bytes, *, operation=apply, **kwargs) -> bytes:
    catalog = load_catalog([case], shipped=False)
    target = _target(tmp_path, data)
    result = operation(tmp_path, catalog, Selection(extras=frozenset(EXTRAS)), **kwargs)
    assert not result.error, result.error
    assert not [f.error for f in result.files if f.error]
    return target.read_bytes()


@pytest.mark.parametrize("case", _cases())
def test_apply_gives_after(case: Path, tmp_path: Path):
    before = (case / "before.py").read_bytes()
    produced = _run(case, tmp_path, before)
    assert produced != before, "the fixture must change something"
    compile(produced, "after.py", "exec")
    assert_snapshot(case / "after.py", produced)


@pytest.mark.parametrize("case", _cases())
def test_no_op_twin_second_apply_changes_nothing(case: Path, tmp_path: Path):
    after = (case / "after.py").read_bytes()
    assert _run(case, tmp_path, after) == after


@pytest.mark.parametrize("case", _cases())
def test_remove_restores_before(case: Path, tmp_path: Path):
    after = (case / "after.py").read_bytes()
    assert _run(case, tmp_path, after, operation=remove) == (case / "before.py").read_bytes()


@pytest.mark.parametrize("case", _cases())
def test_dry_run_writes_nothing(case: Path, tmp_path: Path):
    before = (case / "before.py").read_bytes()
    assert _run(case, tmp_path, before, write=False) == before
