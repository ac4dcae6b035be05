"""`trace-instrument demo --traces DIR`: a simulated 3-host run written by the real runtime (copied out
of templates/runtime into a scratch folder and imported from there), then analysed: text and page."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import recompute
from typer.testing import CliRunner

from trace_instrument.cli import app
from trace_instrument.traces.demo import DemoConfig, plan

runner = CliRunner()


@pytest.mark.slow  # seven simulated processes, then a whole analysis
def test_the_demo_writes_a_multi_host_run_and_analyses_it(tmp_path: Path) -> None:
    target = tmp_path / "traces"
    result = runner.invoke(app, ["demo", "--traces", str(target)])
    assert result.exit_code == 0, result.output
    config = DemoConfig()
    procs, _ = plan(config)
    # the runtime named each process's sample file after its host: the three hosts, seven processes
    samples = sorted(p.name for p in (target / "sample").glob("*.csv"))
    assert len(samples) == len(procs) == 1 + config.hosts * config.workers_per_host
    assert {re.sub(r"-pid\d+\.csv$", "", name) for name in samples} == {"node-0", "node-1", "node-2"}
    # every trajectory the runtime wrote, and every CSV row, counted in the header of the text report
    trajectories = recompute.trajectories(target)
    rows = recompute.read_rows(target)
    assert len(trajectories) > 400
    assert f"trajectories {len(trajectories):,} " in result.stdout
    assert f"rows read {len(rows):,} " in result.stdout
    assert "hosts node-0, node-1, node-2" in result.stdout
    page = (target / "report.html").read_text(encoding="utf-8")
    assert page.count('<figure class="trend"') == 7 and 'class="chart empty"' not in page.split("</section>", 2)[1]
    # the run goes unstable from its middle on: the last steps clip more responses than the first
    clipped = {}
    for t in trajectories:
        clipped.setdefault(t["global_step"], []).append(t["response_length"] >= 2048)
    first, last = min(clipped), max(clipped)
    assert sum(clipped[last]) / len(clipped[last]) > sum(clipped[first]) / len(clipped[first]) + 0.2


def test_the_demo_never_writes_into_a_folder_that_holds_files(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine", encoding="utf-8")
    result = runner.invoke(app, ["demo", "--traces", str(tmp_path)])
    assert result.exit_code == 2
    assert "not a new or empty folder" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
