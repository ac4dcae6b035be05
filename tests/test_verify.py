"""verify: the proofs hold on a clean result and catch what they are meant to catch."""

from __future__ import annotations

from trace_instrument.engine.apply import apply
from trace_instrument.engine.verify import verify

TRAINER = "verl/trainer/ppo/ray_trainer.py"


def _failures(result, check=None):
    return [f for f in result.findings if not f.ok and (check is None or f.check == check)]


def test_clean_result_verifies(instrumented_090, catalog):
    result = verify(instrumented_090, catalog)
    assert result.ok, _failures(result)
    totals = {call: sum(c.actual for c in result.counts if c.call == call) for call in ("trace_flow", "log_progress")}
    assert totals == {"trace_flow": 31, "log_progress": 82}
    assert {f.check.value for f in result.findings} == {
        "counts",
        "facilities",
        "imports",
        "names",
        "context",
        "compile",
        "zero-intrusion",
        "runtime",
    }
    assert {f.subject: f.message for f in result.findings if f.check == "facilities"} == {
        "sample_flow": "36 of 36 points in place",
        "progress": "50 of 50 points in place",
        "trajectory": "6 of 6 points in place",
        "env": "2 of 2 points in place",
    }


def test_zero_intrusion_catches_a_changed_business_line(instrumented_090, catalog):
    path = instrumented_090 / TRAINER
    text = path.read_text()
    path.write_text(
        text.replace(
            "rollout_n = self.config.actor_rollout_ref.rollout.n",
            "rollout_n = 2 * self.config.actor_rollout_ref.rollout.n",
        )
    )
    failures = _failures(verify(instrumented_090, catalog), "zero-intrusion")
    line = next(i for i, l in enumerate(path.read_text().splitlines(), 1) if "rollout_n = 2 *" in l)
    assert [(f.subject, f.line) for f in failures] == [(TRAINER, line)]


def test_zero_intrusion_against_an_explicit_baseline(instrumented_090, verl_090, catalog):
    (instrumented_090 / ".trace-instrument.json").unlink()
    no_baseline = _failures(verify(instrumented_090, catalog), "zero-intrusion")
    assert no_baseline and "--baseline" in no_baseline[0].message
    assert verify(instrumented_090, catalog, baseline=verl_090).ok


def test_runtime_self_check_catches_a_broken_format(instrumented_090, catalog):
    trace = instrumented_090 / "verl/utils/tracing/formats.py"  # the status trace.py writes is defined there
    text = trace.read_text()
    assert '"COMPLETE"' in text
    trace.write_text(text.replace('"COMPLETE"', '"DONE"'))
    failures = _failures(verify(instrumented_090, catalog), "runtime")
    assert any("sample_status" in f.message for f in failures), failures


def test_counts_and_imports_catch_a_lost_call_and_a_double_import(instrumented_090, catalog):
    path = instrumented_090 / TRAINER
    text = path.read_text()
    text = text.replace("                log_progress('end record metrics')\n", "")
    text = text.replace(
        "from verl.utils.tracing import", "from verl.utils.tracing import trace_flow\nfrom verl.utils.tracing import", 1
    )
    path.write_text(text)
    result = verify(instrumented_090, catalog)
    counts = _failures(result, "counts")
    assert [f.message for f in counts] == ["log_progress: 26 call sites, catalog expects 27"]
    assert any("imported 2 times" in f.message for f in _failures(result, "imports"))


def test_a_lost_manifest_is_written_again_by_apply(instrumented_090, catalog):
    manifest = instrumented_090 / ".trace-instrument.json"
    manifest.unlink()
    result = apply(instrumented_090, catalog)
    assert manifest.exists() and result.written
    assert verify(instrumented_090, catalog).ok


def test_an_extra_not_asked_for_is_never_verified_and_skipped_points_are_not_proven(tmp_path, catalog, verl_release):
    """verl 0.7.1 has its own `slowest = np.argmax(...)` line, the code of the opt-in extra
    extra.reward-score.aggregate: not selected nor applied, the extra is not verified (it failed
    verify on every 0.6.1-0.7.1 tree). A skipped point is not proven either."""
    from support import copy_tree

    from trace_instrument.model import Selection

    pristine = verl_release("0.7.1")
    text = (pristine / "verl/experimental/agent_loop/agent_loop.py").read_text(encoding="utf-8")
    assert "slowest = np.argmax(t_generate_sequences + t_tool_calls)" in text, "verl's own line the extra's code equals"
    tree = copy_tree(pristine, tmp_path / "v071")
    apply(tree, catalog)
    every = verify(tree, catalog)
    assert not [f for f in _failures(every) if "reward-score" in f.message]
    lost = "traj.c0.tracker"
    assert [f for f in _failures(every, "points") if lost in f.message]
    skipped = verify(tree, catalog, Selection(skip=frozenset({lost})))
    assert not [f for f in skipped.findings if lost in f.message]


def test_verl_code_equal_to_an_extra_is_never_taken_for_it(tmp_path, catalog, verl_release):
    """The extra's code calls nothing of the runtime: only the manifest's record makes it the
    tool's. remove never rewrites verl 0.7.1's own `slowest = ...` line back into the extra's
    anchor (which reads `t_compute_score`), and check with the extra asked for finds it absent."""
    from support import copy_tree

    from trace_instrument.engine.check import check
    from trace_instrument.engine.remove import remove
    from trace_instrument.model import Selection, Status

    pristine = verl_release("0.7.1")
    agent_loop = "verl/experimental/agent_loop/agent_loop.py"
    tree = copy_tree(pristine, tmp_path / "v071")
    apply(tree, catalog)
    asked = Selection(extras=frozenset({"reward-score-metric"}))
    statuses = {r.point_id: r.status for r in check(tree, catalog, asked).points}
    assert statuses["extra.reward-score.aggregate"] is not Status.PRESENT
    for selection in (Selection(), asked):
        remove(tree, catalog, selection)
        assert (tree / agent_loop).read_bytes() == (pristine / agent_loop).read_bytes()
