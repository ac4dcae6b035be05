"""remove takes a swapped expression back only where it can tell which one it is."""

from __future__ import annotations

from pathlib import Path

from trace_instrument.engine.remove import remove
from trace_instrument.model import FileProblemKind, Status
from trace_instrument.spec import load_catalog

SPEC = """\
file: verl/target.py
points:
  - id: t.swap
    facility: progress
    title: the call passes the dataloader twice
    scope: Trainer.fit
    changes_behaviour: passes the dataloader instead of the weights
    replace_expr: |
      self.run(self.loader, self.weights)
    expr: self.weights
    code: self.loader
    marker: |
      self.run(self.loader, self.loader)
"""
APPLIED = "class Trainer:\n    def fit(self):\n        self.run(self.loader, self.loader)\n"


def test_a_replacement_twice_in_its_statement_is_refused_not_a_crash(tmp_path: Path):
    specs = tmp_path / "anchors"
    specs.mkdir()
    (specs / "spec.yaml").write_text(SPEC)
    target = tmp_path / "checkout" / "verl" / "target.py"
    target.parent.mkdir(parents=True)
    target.write_text(APPLIED)

    result = remove(tmp_path / "checkout", load_catalog([specs], shipped=False))

    [point] = result.points
    assert point.status is Status.ERROR
    assert "more than once" in point.message
    [file] = result.files
    assert file.error is not None and file.error.kind is FileProblemKind.EDIT_FAILED
    assert target.read_text() == APPLIED
