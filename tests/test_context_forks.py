"""Forks whose one business edit puts tracing code where it cannot run, on real verl 0.9.0.

Each fork is verl 0.9.0 from PyPI with one edit a fork makes: an `if` around the store's anchor,
the tracker's anchor in a branch, the rollout slice moved into the `gen` timer, a late `import os`.
apply must not place such code, check must not call it present (also when the edit comes after
apply, on a committed fork), verify must fail on it. verl's own code, run with its collaborators
stubbed (tests/agent_loop_stubbed.py, in a subprocess: the runtime reads the environment once),
shows it: the tree the tool wrote runs, tracing off and on; the tree with the code where the anchor
put it raises.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from trace_instrument.engine.apply import apply
from trace_instrument.engine.check import check
from trace_instrument.engine.remove import remove
from trace_instrument.engine.verify import verify
from trace_instrument.model import Catalog, Check, Reason, RunResult, Selection, Status
from trace_instrument.render import exits
from trace_instrument.render.ci import github_annotations, junit_xml

AGENT_LOOP = "verl/experimental/agent_loop/agent_loop.py"
RAY_TRAINER = "verl/trainer/ppo/ray_trainer.py"
EXTRACTED = "                        reward_tensor, reward_extra_infos_dict = extract_reward(batch)\n"
STUBBED = Path(__file__).parent / "agent_loop_stubbed.py"

INIT = """        RolloutTraceConfig.init(
            self.rollout_config.trace.project_name,
            self.rollout_config.trace.experiment_name,
            trace_config.get("backend"),
            trace_config.get("token2text", False),
            trace_config.get("max_samples_per_step_per_worker", None),
        )
"""
GUARD = '        if trace_config.get("backend") is not None:\n'
MM = '        self.mm_processor_kwargs = self.data_config.get("mm_processor_kwargs", {})\n'
MM_BRANCH = (
    "        if self.processor is not None:\n"
    '            self.mm_processor_kwargs = self.data_config.get("mm_processor_kwargs", {})\n'
    "        else:\n"
    "            self.mm_processor_kwargs = {}\n"
)
STORE_END = '            logger.info(f"TrajectoryStore initialized: dir={_dump_dir}, instance={self._trajectory_instance_id}")\n'


@pytest.fixture(scope="module")
def instrumented_090(verl_090: Path, catalog: Catalog, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """verl 0.9.0 after one apply (copied by each test that edits it)."""
    tree = tmp_path_factory.mktemp("instrumented") / "checkout"
    shutil.copytree(verl_090, tree)
    assert exits.apply_exit(apply(tree, catalog)) == exits.OK
    return tree


def _copy(source: Path, tmp_path: Path, name: str = "fork") -> Path:
    tree = tmp_path / name
    shutil.copytree(source, tree)
    return tree


def _edit(tree: Path, relative: str, old: str, new: str) -> int:
    """Replace `old` once in the file; returns the line where the replacement starts."""
    path = tree / relative
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, f"{relative}: the fork's edit expects {old[:60]!r} once"
    path.write_text(text.replace(old, new), encoding="utf-8")
    return text[: text.index(old)].count("\n") + 1


def _indented(block: str) -> str:
    return textwrap.indent(block, "    ")


def _statuses(result: RunResult) -> dict[str, Status]:
    return {p.point_id: p.status for p in result.points}


def _point(result: RunResult, point_id: str):  # type: ignore[no-untyped-def]
    return next(p for p in result.points if p.point_id == point_id)


def _run_verl(tree: Path, tmp_path: Path, *, tracing: bool, processor: bool = False) -> str:
    """What verl's own worker code says when built and run once (`ok`, or the exception)."""
    scratch = tmp_path / f"run-{'on' if tracing else 'off'}-{len(list(tmp_path.iterdir()))}"
    scratch.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("VERL_TRACE_DIR", "VERL_TRACE_DISCOVERY_DIR")}
    env["VERL_TRACE_DISCOVERY_DIR"] = str(scratch)
    if tracing:
        env["VERL_TRACE_DIR"] = str(scratch / "trace")
    args = [sys.executable, str(STUBBED), str(tree), str(scratch), *(["--processor"] if processor else [])]
    done = subprocess.run(args, check=False, capture_output=True, text=True, env=env, timeout=120)
    lines = done.stdout.strip().splitlines()
    return lines[-1] if lines else done.stderr[-500:]


BOTH_OK = {"tracing off": "ok", "tracing on": "ok"}


def _both_runs(tree: Path, tmp_path: Path) -> dict[str, str]:
    """What verl's worker code says, run once with tracing off and once on."""
    return {f"tracing {mode}": _run_verl(tree, tmp_path, tracing=mode == "on") for mode in ("off", "on")}


def _calls(tree: Path, relative: str, name: str) -> int:
    module = ast.parse((tree / relative).read_text(encoding="utf-8"))
    return sum(isinstance(n, ast.Call) and getattr(n.func, "id", "") == name for n in ast.walk(module))


# -- an `if` around RolloutTraceConfig.init (verl's default trace backend is null) ----------------------


def test_an_if_around_the_stores_anchor_is_refused_and_the_result_runs(
    verl_090: Path, catalog: Catalog, tmp_path: Path
) -> None:
    tree = _copy(verl_090, tmp_path)
    guard_line = _edit(tree, AGENT_LOOP, INIT, GUARD + _indented(INIT))
    result = apply(tree, catalog)
    store = _point(result, "traj.c0.store")
    assert (store.status, store.reason, store.line) == (Status.CONTEXT_CHANGED, Reason.NOT_ON_EVERY_PATH, guard_line)
    assert "self._trajectory_store" in store.message and "traj.c1.central-dump" in store.message
    assert _statuses(result)["traj.c1.central-dump"] is Status.SKIPPED
    assert exits.apply_exit(result) == exits.FAILED
    checked = check(tree, catalog)
    assert _statuses(checked)["traj.c0.store"] is Status.CONTEXT_CHANGED
    assert exits.check_exit(checked) == exits.FAILED
    assert not verify(tree, catalog).ok
    assert _both_runs(tree, tmp_path) == BOTH_OK


def test_a_committed_fork_that_wraps_the_store_fails_check_in_every_format(
    instrumented_090: Path, catalog: Catalog, tmp_path: Path
) -> None:
    tree = _copy(instrumented_090, tmp_path)
    text = (tree / AGENT_LOOP).read_text(encoding="utf-8")
    start, end = text.index(INIT), text.index(STORE_END) + len(STORE_END)
    guard_line = text[:start].count("\n") + 1
    (tree / AGENT_LOOP).write_text(text[:start] + GUARD + _indented(text[start:end]) + text[end:], encoding="utf-8")
    result = check(tree, catalog)
    store = _point(result, "traj.c0.store")
    assert (store.status, store.line) == (Status.CONTEXT_CHANGED, guard_line)
    assert _statuses(result)["traj.c1.central-dump"] is Status.BROKEN
    assert exits.check_exit(result) == exits.FAILED
    annotations = github_annotations(result)
    assert f"file={AGENT_LOOP},line={guard_line},title=context-changed%3A traj.c0.store" in annotations
    assert re.search(
        r'<testcase [^>]*name="traj.c0.store"[^>]*>\s*<failure [^>]*type="context-changed"', junit_xml(result)
    )
    from trace_instrument.render import jsonout

    body = json.loads(jsonout.dumps(jsonout.check(result)))
    entry = next(p for p in body["points"] if p["id"] == "traj.c0.store")
    assert entry["status"] == "context-changed" and entry["context"][0]["statement_line"] == guard_line
    failed = [f for f in verify(tree, catalog).findings if f.check is Check.CONTEXT and not f.ok]
    assert [f.line for f in failed] == [guard_line]
    # and the failure is real: verl's worker, built with tracing off, cannot run a rollout
    assert _run_verl(tree, tmp_path, tracing=False).startswith("AttributeError")
    replanned = apply(tree, catalog, write=False)
    assert "move it" in _point(replanned, "traj.c0.store").message


# -- the tracker's anchor in a branch: text-only models get no tracker ------------------------------------


def test_the_trackers_anchor_in_a_branch_is_refused_and_the_result_runs(
    verl_090: Path, catalog: Catalog, tmp_path: Path
) -> None:
    tree = _copy(verl_090, tmp_path)
    branch_line = _edit(tree, AGENT_LOOP, MM, MM_BRANCH)
    result = apply(tree, catalog)
    tracker = _point(result, "traj.c0.tracker")
    assert (tracker.status, tracker.line) == (Status.CONTEXT_CHANGED, branch_line)
    statuses = _statuses(result)
    assert {statuses[p] for p in ("traj.c1.central-dump", "traj.c2.single-turn-record", "traj.c3.tool-record")} == {
        Status.SKIPPED
    }
    assert _statuses(check(tree, catalog))["traj.c0.tracker"] is Status.CONTEXT_CHANGED
    for tracing in (False, True):
        assert _run_verl(tree, tmp_path, tracing=tracing, processor=False) == "ok"


def test_a_committed_fork_that_puts_the_tracker_in_a_branch_fails_check(
    instrumented_090: Path, catalog: Catalog, tmp_path: Path
) -> None:
    tree = _copy(instrumented_090, tmp_path)
    text = (tree / AGENT_LOOP).read_text(encoding="utf-8")
    tracker = "        # Turn records of each run() are collected here under the trajectory's key.\n"
    tracker += "        self._traj_tracker = TrajectoryTracker()\n"
    assert text.count(MM + tracker) == 1
    branch_line = text[: text.index(MM)].count("\n") + 1
    wrapped = "        if self.processor is not None:\n" + _indented(MM + tracker)
    wrapped += "        else:\n            self.mm_processor_kwargs = {}\n"
    (tree / AGENT_LOOP).write_text(text.replace(MM + tracker, wrapped), encoding="utf-8")
    result = check(tree, catalog)
    assert (_point(result, "traj.c0.tracker").status, _point(result, "traj.c0.tracker").line) == (
        Status.CONTEXT_CHANGED,
        branch_line,
    )
    assert exits.check_exit(result) == exits.FAILED
    # text-only model (no processor), tracing on: C1 reads the tracker that was never made
    assert _run_verl(tree, tmp_path, tracing=True, processor=False).startswith("AttributeError")
    assert _run_verl(tree, tmp_path, tracing=True, processor=True) == "ok"


# -- the rollout slice moved into the gen timer: the throughput line reads timing_raw["gen"] too early ---


def _slice_into_gen_timer(tree: Path) -> int:
    """Move the three slice lines to the end of the `with marked_timer("gen", ...)` block; its line."""
    path = tree / RAY_TRAINER
    text = path.read_text(encoding="utf-8")
    moved = (
        "                    gen_batch_output = combined_gen_output.slice(0, num_sampled_prompts)\n"
        '                    if "__do_sample__" in gen_batch_output.non_tensor_batch:\n'
        '                        gen_batch_output.pop(non_tensor_batch_keys=["__do_sample__"])\n'
    )
    timed_end = '                        combined_gen_output.meta_info.pop("timing", None)\n'
    assert text.count(moved) == 1 and text.count(timed_end) == 1
    text = text.replace(moved, "").replace(timed_end, timed_end + _indented(moved))
    path.write_text(text, encoding="utf-8")
    return next(
        n for n, line in enumerate(text.splitlines(), 1) if 'with marked_timer("gen", timing_raw' in line and n > 1400
    )


def test_the_throughput_line_is_never_put_inside_the_gen_timer(
    verl_090: Path, catalog: Catalog, tmp_path: Path
) -> None:
    tree = _copy(verl_090, tmp_path)
    timer_line = _slice_into_gen_timer(tree)
    result = apply(tree, catalog)
    throughput = _point(result, "progress.v0.gen-throughput")
    assert (throughput.status, throughput.reason) == (Status.CONTEXT_CHANGED, Reason.BEFORE_BLOCK_EXIT)
    assert throughput.line == timer_line and "timing_raw['gen']" in throughput.message
    assert _calls(tree, RAY_TRAINER, "log_gen_throughput") == 0
    assert _statuses(check(tree, catalog))["progress.v0.gen-throughput"] is Status.CONTEXT_CHANGED


def test_a_committed_fork_that_moves_the_slice_into_the_timer_fails_check(
    instrumented_090: Path, catalog: Catalog, tmp_path: Path
) -> None:
    tree = _copy(instrumented_090, tmp_path)
    path = tree / RAY_TRAINER
    text = path.read_text(encoding="utf-8")
    # the slice and the throughput line after it, as apply placed them, moved into the timer together
    start = text.index("                    gen_batch_output = combined_gen_output.slice(0, num_sampled_prompts)\n")
    end = text.index("log_gen_throughput(gen_batch_output", start)
    end = text.index("\n", end) + 1
    block = text[start:end]
    timed_end = '                        combined_gen_output.meta_info.pop("timing", None)\n'
    text = text[:start] + text[end:]
    text = text.replace(timed_end, timed_end + _indented(block))
    path.write_text(text, encoding="utf-8")
    timer_line = next(
        n for n, line in enumerate(text.splitlines(), 1) if 'with marked_timer("gen", timing_raw' in line and n > 1400
    )
    result = check(tree, catalog)
    throughput = _point(result, "progress.v0.gen-throughput")
    assert (throughput.status, throughput.line) == (Status.CONTEXT_CHANGED, timer_line)
    assert exits.check_exit(result) == exits.FAILED


# -- a late `import os` makes os local to the whole __init__ --------------------------------------------------


def test_a_late_local_import_refuses_the_store_and_breaks_a_placed_one(
    verl_090: Path, instrumented_090: Path, catalog: Catalog, tmp_path: Path
) -> None:
    late = INIT + "        import os  # the fork's own env handling\n"
    fork = _copy(verl_090, tmp_path, "fork")
    import_line = _edit(fork, AGENT_LOOP, INIT, late) + INIT.count("\n")
    result = apply(fork, catalog)
    store = _point(result, "traj.c0.store")
    assert (store.status, store.reason) == (Status.REFUSED, Reason.NAME_CONFLICT)
    assert [(n.name, n.binding_line) for n in store.names] == [("os", import_line)]
    assert _run_verl(fork, tmp_path, tracing=False) == "ok"
    committed = _copy(instrumented_090, tmp_path, "committed")
    _edit(committed, AGENT_LOOP, STORE_END, STORE_END + "        import os  # the fork's own env handling\n")
    checked = check(committed, catalog)
    assert _statuses(checked)["traj.c0.store"] is Status.BROKEN
    assert exits.check_exit(checked) == exits.FAILED
    assert _run_verl(committed, tmp_path, tracing=False).startswith("UnboundLocalError")


# -- no false alarms: what forks do that changes no control flow the points need ---------------------------


def _black_with_crlf(tree: Path, catalog: Catalog) -> None:
    if importlib.util.find_spec("black") is None:  # the format extra, which [test] does not bring
        pytest.fail("black is needed for this test: pip install -e '.[test,format]'", pytrace=False)
    files = [tree / f for f in catalog.files if (tree / f).exists()]
    for path in files:
        path.write_bytes(path.read_bytes().replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"))
    subprocess.run([sys.executable, "-m", "black", "-q", "--line-length", "100", *map(str, files)], check=True)
    assert all(b"\r\n" in path.read_bytes() for path in files)


def _reorder_independent_blocks(tree: Path) -> None:
    """Swap business statements the points do not depend on, around their anchors."""
    path = tree / AGENT_LOOP
    text = path.read_text(encoding="utf-8")
    chat = '        self.apply_chat_template_kwargs = self.data_config.get("apply_chat_template_kwargs", {})\n'
    assert text.count(chat + MM) == 1
    text = text.replace(chat + MM, MM + chat)
    tools_start = text.index("        # Load tools once per worker; each trajectory just reuses self.tools.\n")
    tools_end = text.index("        # Load custom agent loop implementations from config path\n")
    custom_end = text.index('        if self.model_config.get("custom_chat_template", None) is not None:\n')
    tools, custom = text[tools_start:tools_end], text[tools_end:custom_end]
    path.write_text(text[:tools_start] + custom + tools + text[custom_end:], encoding="utf-8")


@pytest.mark.parametrize("change", ["black-crlf", "reordered"])
def test_a_reformatted_or_reordered_fork_is_instrumented_as_the_release_and_clean(
    verl_090: Path, catalog: Catalog, tmp_path: Path, change: str
) -> None:
    tree = _copy(verl_090, tmp_path)
    if change == "black-crlf":
        _black_with_crlf(tree, catalog)
    else:
        _reorder_independent_blocks(tree)
    result = apply(tree, catalog)
    assert {p.status for p in result.points} == {Status.APPLIED}, [
        (p.point_id, p.status.value, p.message) for p in result.points if p.status is not Status.APPLIED
    ]
    checked = check(tree, catalog)
    assert exits.check_exit(checked) == exits.OK, [(p.point_id, p.status.value) for p in checked.points]
    assert verify(tree, catalog).ok
    again = apply(tree, catalog)
    assert not any(f.changed for f in again.files)


def test_a_trace_only_point_inside_a_new_branch_is_placed_and_clean(
    verl_090: Path, catalog: Catalog, tmp_path: Path
) -> None:
    """The reward point's anchor in a new `if`: a trace of what happens there, setting nothing up."""
    tree = _copy(verl_090, tmp_path)
    anchor = '                final_output.extra_fields["reward_extra_info"] = result["reward_extra_info"]\n'
    text = (tree / AGENT_LOOP).read_text(encoding="utf-8")
    assert text.count(anchor) == 1
    guarded = '                if result.get("reward_extra_info") is not None:\n    ' + anchor
    (tree / AGENT_LOOP).write_text(text.replace(anchor, guarded), encoding="utf-8")
    result = apply(tree, catalog)
    assert _statuses(result)["flow.v0.rollout-reward"] is Status.APPLIED
    assert exits.check_exit(check(tree, catalog)) == exits.OK


# -- remove keeps what the code that stays needs (issue 18) ---------------------------------------------

C1_LINE = '                kwargs.pop("trace_traj_key", None)\n'
FORK_LINE = "                fork_counter = 1  # the fork's own line\n"


def _with_hand_edited_c1(instrumented: Path, tmp_path: Path) -> Path:
    """The instrumented tree with a fork line inside C1's `try` (C1 edited by hand)."""
    tree = _copy(instrumented, tmp_path)
    _edit(tree, AGENT_LOOP, C1_LINE, C1_LINE + FORK_LINE)
    return tree


SET_UP = ("self._traj_tracker = TrajectoryTracker()", "self._trajectory_store = TrajectoryStore(")


def test_remove_only_of_a_point_another_point_needs_keeps_it_and_says_how(
    instrumented_090: Path, catalog: Catalog, tmp_path: Path
) -> None:
    tree = _copy(instrumented_090, tmp_path)
    before = (tree / AGENT_LOOP).read_bytes()
    result = remove(tree, catalog, Selection(only=frozenset({"traj.c0.store"})))
    store = _point(result, "traj.c0.store")
    assert (store.status, store.reason) == (Status.KEPT, Reason.REQUIRED_BY)
    assert "traj.c1.central-dump" in store.message and "--only traj.c1.central-dump" in store.message
    assert exits.remove_exit(result) == exits.FAILED
    assert (tree / AGENT_LOOP).read_bytes() == before
    together = remove(tree, catalog, Selection(only=frozenset({"traj.c0.store", "traj.c1.central-dump"})))
    assert {p.point_id: p.status for p in together.points} == {
        "traj.c0.store": Status.REMOVED,
        "traj.c1.central-dump": Status.REMOVED,
    }
    assert _both_runs(tree, tmp_path) == BOTH_OK


def test_remove_keeps_the_set_up_a_hand_edited_point_reads(
    instrumented_090: Path, catalog: Catalog, tmp_path: Path
) -> None:
    tree = _with_hand_edited_c1(instrumented_090, tmp_path)
    result = remove(tree, catalog)
    statuses = {p.point_id: (p.status, p.reason) for p in result.points}
    assert statuses["traj.c1.central-dump"] == (Status.KEPT, Reason.EDITED_BY_HAND)
    assert statuses["traj.c0.store"] == statuses["traj.c0.tracker"] == (Status.KEPT, Reason.REQUIRED_BY)
    assert exits.remove_exit(result) == exits.FAILED
    text = (tree / AGENT_LOOP).read_text(encoding="utf-8")
    assert all(text.count(set_up) == 1 for set_up in SET_UP)
    assert _both_runs(tree, tmp_path) == BOTH_OK


def test_remove_force_on_a_hand_edited_rewrite_says_what_it_cannot_take_out(
    instrumented_090: Path, catalog: Catalog, tmp_path: Path
) -> None:
    tree = _with_hand_edited_c1(instrumented_090, tmp_path)
    result = remove(tree, catalog, force=True)
    assert not [f.error for f in result.files if f.error] and Status.ERROR not in {p.status for p in result.points}
    c1 = _point(result, "traj.c1.central-dump")
    assert (c1.status, c1.reason) == (Status.KEPT, Reason.EDITED_BY_HAND)
    assert "not a hand-edited rewrite" in c1.message
    assert {_point(result, p).reason for p in ("traj.c0.store", "traj.c0.tracker")} == {Reason.REQUIRED_BY}
    assert FORK_LINE in (tree / AGENT_LOOP).read_text(encoding="utf-8")
    assert _both_runs(tree, tmp_path) == BOTH_OK


def test_a_hand_edited_point_whose_import_a_merge_dropped_is_broken_and_repaired(
    instrumented_090: Path, catalog: Catalog, tmp_path: Path
) -> None:
    tree = _with_hand_edited_c1(instrumented_090, tmp_path)
    _edit(tree, AGENT_LOOP, "    log_rollout_completed,\n", "")
    assert "log_rollout_completed" not in _module_imports(tree / AGENT_LOOP), "the merge must drop the import"
    c1 = _point(check(tree, catalog), "traj.c1.central-dump")
    assert (c1.status, c1.reason) == (Status.BROKEN, Reason.MISSING_IMPORT)
    assert "edited by hand" in c1.message and "log_rollout_completed" in c1.message
    repaired = _point(apply(tree, catalog), "traj.c1.central-dump")
    assert repaired.status is Status.REPAIRED
    assert _point(check(tree, catalog), "traj.c1.central-dump").status is Status.DRIFTED
    assert "log_rollout_completed" in _module_imports(tree / AGENT_LOOP)
    assert FORK_LINE in (tree / AGENT_LOOP).read_text(encoding="utf-8")
    assert _both_runs(tree, tmp_path) == BOTH_OK


def _module_imports(path: Path) -> set[str]:
    """The names the module's top-level imports bind (read here, not by the tool)."""
    module = ast.parse(path.read_bytes())
    return {a.asname or a.name for n in module.body if isinstance(n, ast.ImportFrom) for a in n.names}


RAY_TRAINER = "verl/trainer/ppo/ray_trainer.py"
EXTRACTED = "                        reward_tensor, reward_extra_infos_dict = extract_reward(batch)\n"
REWARD_UIDS = (
    EXTRACTED
    + '                        _traj_uids = batch.non_tensor_batch.get("traj_uid", np.array(["N/A"] * len(batch)))\n'
)
REWARD_CALL = "                        trace_flow(uid=batch.non_tensor_batch['uid']"
REWARD_FORK_LINE = "                        print('fork')\n"


def test_a_fork_line_inside_one_block_drifts_that_point_alone_with_one_diff(
    verl_090: Path, instrumented_090: Path, catalog: Catalog, tmp_path: Path
) -> None:
    """A fork line between two statements of flow.v0.train-reward's block: that point is drifted,
    with one diff of its whole block; its neighbour progress.v0.reward, which follows the block,
    is not `moved`. remove --force takes the point's statements out and leaves the fork's line."""
    tree = _copy(instrumented_090, tmp_path)
    _edit(tree, RAY_TRAINER, REWARD_UIDS + REWARD_CALL, REWARD_UIDS + REWARD_FORK_LINE + REWARD_CALL)
    checked = check(tree, catalog)
    assert {p: s for p, s in _statuses(checked).items() if s is not Status.PRESENT} == {
        "flow.v0.train-reward": Status.DRIFTED
    }
    diff = _point(checked, "flow.v0.train-reward").diff
    assert diff.count("--- template") == 1 and "+print('fork')" in diff.splitlines()

    removed = remove(tree, catalog, force=True)
    assert Status.KEPT not in set(_statuses(removed).values())
    pristine = (verl_090 / RAY_TRAINER).read_text(encoding="utf-8")
    assert pristine.count(EXTRACTED) == 1
    assert (tree / RAY_TRAINER).read_text(encoding="utf-8") == pristine.replace(EXTRACTED, EXTRACTED + REWARD_FORK_LINE)


DISPATCH = "flow.v0.dispatch-worker"
DISPATCH_UIDS = (
    '                _traj_uids = _chunk.non_tensor_batch.get("traj_uid", np.array(["N/A"] * len(_chunk)))\n'
)
CHUNKED = "        chunkes = prompts.chunk(len(self.agent_loop_workers))\n"


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("fork_line", "where"),
    [
        ('                logger.info("fork: dispatching a chunk")\n', "inside the loop"),
        ('            logger.info("fork: a training batch")\n', "inside the if"),
    ],
)
def test_remove_force_takes_the_dispatch_block_out_whole_around_a_fork_line(
    verl_090: Path, instrumented_090: Path, catalog: Catalog, tmp_path: Path, fork_line: str, where: str
) -> None:
    """A fork line inside flow.v0.dispatch-worker's `if` (or its loop): remove --force took out the
    trace_flow call alone and left the `if`, the `for` and `_traj_uids`, and the point could never be
    applied again (its own locals conflicted). The block goes whole, the fork's line stays where the
    block stood: the tree is verl's but for that line, and apply places the point again."""
    tree = _copy(instrumented_090, tmp_path)
    loop = "            for _worker_idx, _chunk in enumerate(chunkes):\n"
    if where == "inside the loop":
        _edit(tree, AGENT_LOOP, DISPATCH_UIDS, DISPATCH_UIDS + fork_line)
    else:
        _edit(tree, AGENT_LOOP, loop, fork_line + loop)
    assert _statuses(check(tree, catalog))[DISPATCH] is Status.DRIFTED
    removed = remove(tree, catalog, force=True)
    assert exits.remove_exit(removed) == exits.OK
    assert set(_statuses(removed).values()) <= {Status.REMOVED, Status.MISSING}
    pristine = (verl_090 / AGENT_LOOP).read_text(encoding="utf-8")
    assert pristine.count(CHUNKED) == 1
    hoisted = "        " + fork_line.lstrip()  # the block's own indentation: the fork's line runs where it stood
    assert (tree / AGENT_LOOP).read_text(encoding="utf-8") == pristine.replace(CHUNKED, CHUNKED + hoisted)
    again = apply(tree, catalog)
    assert exits.apply_exit(again) == exits.OK and _statuses(again)[DISPATCH] is Status.APPLIED
    assert exits.check_exit(check(tree, catalog)) == exits.OK
