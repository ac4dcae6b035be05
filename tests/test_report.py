"""report: the final report, from the checkout."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from trace_instrument.cli import app
from trace_instrument.engine.apply import apply
from trace_instrument.engine.report import report
from trace_instrument.model import Selection
from trace_instrument.render.markdown import report as as_markdown


def test_report_on_a_complete_result(instrumented_090, catalog):
    rep = report(instrumented_090, catalog)
    assert rep.ok and rep.verl_version == "0.9.0"
    assert {c.call: (c.found, c.expected) for c in rep.calls} == {"trace_flow": (31, 31), "log_progress": (82, 82)}
    assert [s.stage for s in rep.stages if not s.covered] == ["update prompt2accs"]
    text = as_markdown(rep)
    for expected in (
        "- sample_flow: 36/36 points in place",
        "- `trace_flow(` call sites: 31/31",
        "- progress stages covered: 10/11 (not covered: update prompt2accs — no implementation in verl)",
        "- verify: ok",
        "export VERL_TRACE_DIR=",
        "$VERL_TRACE_DIR/progress/{YYYYMMDD-HH}.log",
    ):
        assert expected in text, expected


def test_report_says_what_was_skipped_and_why(checkout_090, catalog):
    apply(checkout_090, catalog, Selection(facilities=frozenset({"sample_flow", "runtime"})))
    rep = report(checkout_090, catalog)
    assert not rep.ok
    missing = {p.point_id for p in rep.not_in_place}
    assert missing == {p.id for p in catalog.points if p.extra is None and p.facility != "sample_flow"}
    body = json.loads(CliRunner().invoke(app, ["report", "--format", "json", str(checkout_090)]).output)
    assert body["ok"] is False and {"stages", "calls", "verify", "outputs"} <= set(body)
