"""verify's zero-intrusion proof covers name bindings: an import the tool added that rebinds a
business name fails verify with a `names` finding; the same checkout without the rebinding passes.

A small synthetic checkout: one user point (it adds `import time`) with the shipped catalog for
the runtime package. Apply instruments the file; then an upstream merge brings a business import
at the top of the file. Verify compares against that upstream file (--baseline), so the only
failure left is what the merge did to the names.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from trace_instrument.engine.apply import apply
from trace_instrument.engine.manifest import Manifest
from trace_instrument.engine.verify import verify
from trace_instrument.model import Check, Status
from trace_instrument.spec import load_catalog

SPEC = Path(__file__).parent / "fixtures" / "apply" / "name-unbound-clean" / "spec.yaml"
TARGET = "verl/target.py"
BUSINESS = """\
class Trainer:
    def step(self, batch):
        out = self.model(batch)
        return out
"""


def _instrumented(tmp_path: Path, upstream_import: str) -> tuple[Path, Path, object]:
    """A checkout applied by the tool, then merged with an upstream that adds `upstream_import`."""
    spec = tmp_path / "spec"
    spec.mkdir()
    shutil.copy(SPEC, spec / "spec.yaml")
    catalog = load_catalog([spec])
    root = tmp_path / "checkout"
    (root / "verl").mkdir(parents=True)
    (root / TARGET).write_text(BUSINESS, encoding="utf-8")
    result = apply(root, catalog)
    assert [(p.point_id, p.status) for p in result.points if p.status is not Status.NOT_APPLICABLE] == [
        ("t.timed", Status.APPLIED)
    ]
    assert Manifest.load(root).imports == {TARGET: ("import time",)}, "the manifest records the import it added"
    merged = f"{upstream_import}\n" + (root / TARGET).read_text(encoding="utf-8")
    (root / TARGET).write_text(merged, encoding="utf-8")
    upstream = tmp_path / "upstream"
    (upstream / "verl").mkdir(parents=True)
    (upstream / TARGET).write_text(f"{upstream_import}\n\n\n{BUSINESS}", encoding="utf-8")
    return root, upstream, catalog


def test_an_added_import_that_rebinds_a_business_name_fails_verify(tmp_path: Path):
    root, upstream, catalog = _instrumented(tmp_path, "from time import time")
    lines = (root / TARGET).read_text(encoding="utf-8").splitlines()
    assert lines[:2] == ["from time import time", "import time"], "the added import comes after the business one"
    use = next(number for number, text in enumerate(lines, 1) if "_t0 = time.time()" in text)
    result = verify(root, catalog, baseline=upstream)
    failures = [(f.check, f.line, f.message) for f in result.findings if not f.ok]
    assert failures == [
        (Check.NAMES, use, "t.timed: 'time' is bound by 'from time import time' at line 1"),
        (
            Check.NAMES,
            2,
            "`import time` (added by trace-instrument) rebinds 'time': 'time' is bound by 'from time import time' at line 1",
        ),
    ]
    assert not result.ok


@pytest.mark.parametrize("upstream_import", ["from os import getpid", "import time"])
def test_the_same_merge_without_a_rebinding_verifies(tmp_path: Path, upstream_import: str):
    root, upstream, catalog = _instrumented(tmp_path, upstream_import)
    result = verify(root, catalog, baseline=upstream)
    assert result.ok, [f for f in result.findings if not f.ok]
    names = [f.message for f in result.findings if f.check is Check.NAMES]
    assert names == ["the names of 1 points resolve as meant"]
