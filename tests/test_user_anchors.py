"""--anchors DIR: the documented example instruments a custom agent loop."""

from __future__ import annotations

import shutil

from support import TESTS, tree_bytes

from trace_instrument.engine.apply import apply
from trace_instrument.engine.check import check
from trace_instrument.engine.remove import remove
from trace_instrument.model import Status
from trace_instrument.spec import load_catalog

EXAMPLES = TESTS.parent / "examples"
TARGET = "verl/experimental/agent_loop/my_agent_loop.py"


def test_the_example_instruments_a_custom_agent_loop(checkout_090):
    shutil.copy(EXAMPLES / "my_agent_loop.py", checkout_090 / TARGET)
    pristine = tree_bytes(checkout_090)
    catalog = load_catalog([EXAMPLES / "anchors"])
    result = apply(checkout_090, catalog)
    mine = [p for p in result.points if p.file == TARGET]
    assert [p.status for p in mine] == [Status.APPLIED] * 3
    text = (checkout_090 / TARGET).read_text()
    assert "from verl.utils.tracing import TurnRecord, trace_flow" in text
    assert text.index("detail='sending_generate_request'") < text.index("_rec = TurnRecord(prompt_ids)")
    assert text.index("self._traj_tracker.append_turn_record(_traj_key, _rec)") < text.index(
        "detail='received_generate_response'"
    )
    compile(text, TARGET, "exec")
    assert {p.status for p in check(checkout_090, catalog).points} == {Status.PRESENT}
    remove(checkout_090, catalog)
    assert tree_bytes(checkout_090) == pristine


def test_without_the_user_anchors_the_custom_loop_is_unexpected_tracing(checkout_090):
    shutil.copy(EXAMPLES / "my_agent_loop.py", checkout_090 / TARGET)
    apply(checkout_090, load_catalog([EXAMPLES / "anchors"]))
    result = check(checkout_090, load_catalog())
    unexpected = {p.file for p in result.points if p.status is Status.UNEXPECTED}
    assert unexpected == {TARGET}
