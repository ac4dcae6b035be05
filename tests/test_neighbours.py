"""The neighbourhood of each anchor as port ships it (engine/neighbours.py), measured on small trees:
the statement just before and just after an edit's anchor statements, as first lines."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from trace_instrument.engine import neighbours
from trace_instrument.spec import load_catalog

SPEC = """\
file: verl/target.py
points:
  - id: t.after
    facility: progress
    title: after two statements
    scope: Worker.run
    after: |
      batch = make(data)
      batch.cook()
    code: |
      log_progress('made')
  - id: t.before
    facility: progress
    title: before the first statement
    scope: Worker.run
    before: |
      prepare(data)
    code: |
      log_progress('start')
  - id: t.inside
    facility: progress
    title: at the start of a block
    scope: Worker.run
    body_start: |
      for item in batch: ...
    code: |
      log_progress('in')
"""

SOURCE = """\
class Worker:
    def run(self, data):
        prepare(data)
        batch = make(data)
        batch.cook()
        for item in batch:
            finish(item)
"""


def _tree(tmp_path: Path, source: str = SOURCE):  # type: ignore[no-untyped-def]
    specs = tmp_path / "spec"
    specs.mkdir()
    (specs / "spec.yaml").write_text(SPEC, encoding="utf-8")
    tree = tmp_path / "tree"
    (tree / "verl").mkdir(parents=True)
    (tree / "verl" / "target.py").write_text(textwrap.dedent(source), encoding="utf-8")
    return tree, load_catalog([specs], shipped=False)


def test_the_statements_around_each_anchor_are_measured(tmp_path: Path) -> None:
    tree, catalog = _tree(tmp_path)
    found = neighbours.measured(tree, catalog)
    # read off SOURCE: the two-statement anchor sits between prepare(data) and the loop's header;
    # the one-statement anchor is the first of its block (nothing before), make(data) after it
    assert found["t.after"] == [("prepare(data)", "for item in batch:")]
    assert found["t.before"] == [("", "batch = make(data)")]
    assert "t.inside" not in found, "a point with no before/after edit has no neighbourhood"


def test_a_file_that_does_not_parse_is_left_out(tmp_path: Path) -> None:
    tree, catalog = _tree(tmp_path, "class Worker(:\n")
    assert neighbours.measured(tree, catalog) == {}


def test_the_first_line_of_a_block_is_its_header() -> None:
    import ast

    (stmt,) = ast.parse("with timer('gen', raw):\n    run()\n").body
    assert neighbours.first_line(stmt) == "with timer('gen', raw):"


def test_the_shipped_data_is_read_as_pairs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "neighbours.json"
    data.write_text(json.dumps({"p.one": [["a()", "b()"], ["", "c()"]]}), encoding="utf-8")
    monkeypatch.setattr(neighbours, "DATA", data)
    neighbours.shipped.cache_clear()
    try:
        assert neighbours.shipped() == {"p.one": [("a()", "b()"), ("", "c()")]}
        monkeypatch.setattr(neighbours, "DATA", tmp_path / "absent.json")
        neighbours.shipped.cache_clear()
        assert neighbours.shipped() == {}, "no data file: no neighbourhoods"
    finally:
        neighbours.shipped.cache_clear()


def test_the_shipped_file_names_catalog_points() -> None:
    shipped = neighbours.shipped()
    ids = {point.id for point in load_catalog().points}
    assert shipped and set(shipped) <= ids
    assert all(isinstance(b, str) and isinstance(a, str) for edits in shipped.values() for b, a in edits)
