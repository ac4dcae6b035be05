"""Imports added one facility at a time come out again byte for byte, one facility at a time.

The fixtures (tests/fixtures/apply/) show one apply and one full remove; here
two points of different facilities, one needing `import time`, are applied in
either order and removed one after the other, on files that start with no
import, with a docstring, and with only a first-party import.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from trace_instrument.engine.apply import apply
from trace_instrument.engine.remove import remove
from trace_instrument.model import Selection
from trace_instrument.spec import load_catalog

SPEC = """\
file: verl/target.py
points:
  - id: t.progress
    facility: progress
    title: a progress line after the item arrives
    scope: wait
    after: |
      item = queue.get(TIMEOUT)
    code: |
      log_progress('got an item')
  - id: t.timed
    facility: sample_flow
    title: a line that needs the standard-library time module
    scope: wait
    imports: ["import time"]
    before: |
      return item
    code: |
      log_progress(f'returning at {time.time()}')
"""

BODY = "TIMEOUT = 5\n\n\ndef wait(queue):\n    item = queue.get(TIMEOUT)\n    return item\n"
INSTRUMENTED = BODY.replace(
    "    return item\n",
    "    log_progress('got an item')\n    log_progress(f'returning at {time.time()}')\n    return item\n",
)
IMPORTS = "import time\n\nfrom verl.utils.tracing import log_progress\n\n"
FIRST_PARTY = "from verl.utils.device import get_device_name\n"
# (before, after both points), written out by hand
CASES = {
    "no-import": (BODY, IMPORTS + INSTRUMENTED),
    "header-no-import": ("# header\n\n" + BODY, "# header\n\n" + IMPORTS + INSTRUMENTED),
    "docstring-no-import": ('"""Waiting."""\n\n' + BODY, '"""Waiting."""\n\n' + IMPORTS + INSTRUMENTED),
    "first-party-only": (
        "# header\n\n" + FIRST_PARTY + "\n" + BODY,
        "# header\n\nimport time\n\n" + FIRST_PARTY + "from verl.utils.tracing import log_progress\n\n" + INSTRUMENTED,
    ),
}


def _facility(name: str) -> Selection:
    return Selection(facilities=frozenset({name}))


@pytest.mark.parametrize("order", [("progress", "sample_flow"), ("sample_flow", "progress")], ids="-then-".join)
@pytest.mark.parametrize(("source", "instrumented"), list(CASES.values()), ids=list(CASES))
def test_facility_by_facility_round_trip(
    tmp_path: Path, source: str, instrumented: str, order: tuple[str, str]
) -> None:
    (tmp_path / "spec").mkdir()
    (tmp_path / "spec" / "target.yaml").write_text(SPEC, encoding="utf-8")
    catalog = load_catalog([tmp_path / "spec"], shipped=False)
    root = tmp_path / "checkout"
    target = root / "verl" / "target.py"
    target.parent.mkdir(parents=True)
    target.write_text(source, encoding="utf-8")
    first, second = order

    assert apply(root, catalog, _facility(first)).written
    first_only = target.read_text(encoding="utf-8")
    assert apply(root, catalog, _facility(second)).written
    assert target.read_text(encoding="utf-8") == instrumented

    assert remove(root, catalog, _facility(second)).written
    assert target.read_text(encoding="utf-8") == first_only
    assert remove(root, catalog).written
    assert target.read_text(encoding="utf-8") == source
