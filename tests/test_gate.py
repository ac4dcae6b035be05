"""check as the CI gate on real verl 0.9.0: it fails whenever instrumented code would fail at run time.

Every expectation here is computed from the tree itself (the lines a test edits,
the imports it deletes), not from the tool's output.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from xml.etree import ElementTree

import pytest
from support import instrument
from typer.testing import CliRunner

from trace_instrument.cli import app
from trace_instrument.engine.apply import apply
from trace_instrument.engine.check import check
from trace_instrument.engine.verify import verify
from trace_instrument.model import Reason, Selection, Status

RAY_TRAINER = "verl/trainer/ppo/ray_trainer.py"
TRACING_IMPORT = "from verl.utils.tracing import"
TRAIN_UPDATE = """\
                        _traj_uids = batch.non_tensor_batch.get("traj_uid", np.array(["N/A"] * len(batch)))
                        trace_flow(uid=batch.non_tensor_batch['uid'] if 'uid' in batch.non_tensor_batch else 'unknown',
                                   traj_uid=_traj_uids,
                                   from_module='ActorRolloutRefWorker', to_module='RayPPOTrainer',
                                   stage='TRAIN_UPDATE', detail='actor_parameters_updated',
                                   global_step=self.global_steps)
"""
START_UPDATE = "                        log_progress('start update actor')\n"


def _cli(*args: object):
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def _statuses(result) -> dict[str, Status]:
    return {p.point_id: p.status for p in result.points}


def _line_of(path: Path, needle: str) -> int:
    lines = path.read_text(encoding="utf-8").splitlines()
    found = [number for number, line in enumerate(lines, 1) if needle in line]
    assert len(found) == 1, f"{needle!r} occurs {len(found)} times"
    return found[0]


@pytest.fixture
def instrumented(checkout_090, applied_090):
    """checkout_090 after one apply: the worker's shared applied tree copied in its place."""
    return instrument(checkout_090, applied_090)


def test_a_deleted_tracing_import_breaks_every_point_that_uses_it_and_apply_repairs_it(instrumented, catalog):
    trainer = instrumented / RAY_TRAINER
    text = trainer.read_text(encoding="utf-8")
    wanted = {p.id for p in catalog.points if p.file == RAY_TRAINER and p.tracing_names and p.extra is None}
    trainer.write_text("".join(line for line in text.splitlines(True) if not line.startswith(TRACING_IMPORT)))
    checked = check(instrumented, catalog)
    broken = {p.point_id for p in checked.points if p.status is Status.BROKEN}
    assert broken == wanted
    assert {p.reason for p in checked.points if p.status is Status.BROKEN} == {Reason.MISSING_IMPORT}
    assert _cli("check", instrumented).exit_code == 1
    repaired = apply(instrumented, catalog)
    assert {p.point_id for p in repaired.points if p.status is Status.REPAIRED} == wanted
    assert trainer.read_text(encoding="utf-8") == text, "the import comes back exactly as apply first wrote it"
    assert _cli("check", instrumented).exit_code == 0
    assert not apply(instrumented, catalog).written, "a second apply changes no byte"


def test_a_business_rebinding_of_a_name_the_code_uses_breaks_the_point(instrumented, catalog):
    trainer = instrumented / RAY_TRAINER
    text = trainer.read_text(encoding="utf-8")
    # the fork's own code shadows trace_flow at module level, after the imports
    lines = text.splitlines(True)
    at = next(i for i, line in enumerate(lines) if line.startswith(TRACING_IMPORT)) + 1
    trainer.write_text("".join([*lines[:at], "trace_flow = print\n", *lines[at:]]))
    line = _line_of(trainer, "trace_flow = print")
    checked = check(instrumented, catalog)
    broken = [p for p in checked.points if p.status is Status.BROKEN]
    assert broken and {p.reason for p in broken} == {Reason.NAME_CONFLICT}
    issue = broken[0].names[0]
    assert (issue.name, issue.binding, issue.binding_line) == ("trace_flow", "trace_flow = print", line)
    before = trainer.read_bytes()
    applied = apply(instrumented, catalog)
    assert {p.point_id for p in applied.points if p.status is Status.BROKEN} == {p.point_id for p in broken}
    assert trainer.read_bytes() == before, "apply cannot repair a conflict: it leaves the code alone"


def test_a_missing_runtime_file_breaks_the_points_and_apply_puts_it_back(instrumented, catalog):
    runtime_file = instrumented / "verl/utils/tracing/trace.py"
    content = runtime_file.read_bytes()
    runtime_file.unlink()
    checked = check(instrumented, catalog)
    users = {p.id for p in catalog.points if p.tracing_names and p.extra is None}
    assert {p.point_id for p in checked.points if p.status is Status.BROKEN} == users
    assert _cli("check", instrumented).exit_code == 1
    applied = apply(instrumented, catalog)
    assert [(f.path, f.status.value) for f in applied.runtime_files if f.status.value != "present"] == [
        ("verl/utils/tracing/trace.py", "created")
    ]
    assert runtime_file.read_bytes() == content
    assert _cli("check", instrumented).exit_code == 0


def test_a_block_moved_away_from_its_anchor_is_moved_and_its_neighbour_is_not_blamed(instrumented, catalog):
    trainer = instrumented / RAY_TRAINER
    text = trainer.read_text(encoding="utf-8")
    assert text.count(TRAIN_UPDATE) == 1 and text.count(START_UPDATE) == 1
    moved = text.replace(TRAIN_UPDATE, "").replace(START_UPDATE, TRAIN_UPDATE + START_UPDATE)
    trainer.write_text(moved)
    lines = moved.splitlines()
    found_at = next(i for i, line in enumerate(lines, 1) if "stage='TRAIN_UPDATE'" in line) - 4
    anchor = next(i for i, line in enumerate(lines, 1) if 'with marked_timer("update_actor"' in line)
    # the with block ends where the next statement at its indentation starts
    indent = len(lines[anchor - 1]) - len(lines[anchor - 1].lstrip())
    expected_at = next(
        i for i, line in enumerate(lines, 1) if i > anchor and line.strip() and len(line) - len(line.lstrip()) <= indent
    )
    checked = check(instrumented, catalog)
    statuses = _statuses(checked)
    assert {k: v for k, v in statuses.items() if v is not Status.PRESENT} == {"flow.v0.train-update": Status.MOVED}
    moved_result = next(p for p in checked.points if p.point_id == "flow.v0.train-update")
    assert (moved_result.line, moved_result.expected_line) == (found_at, expected_at)
    assert f"line {found_at}" in moved_result.message and f"line {expected_at}" in moved_result.message
    assert not apply(instrumented, catalog).written, "a moved block is left where the user put it"


REWARD_ANCHOR = "                        reward_tensor, reward_extra_infos_dict = extract_reward(batch)\n"


def test_a_business_line_after_an_anchor_leaves_its_points_present(instrumented, catalog):
    """The fork's line right after `extract_reward(batch)` reads and changes nothing the two blocks
    apply put there read: both stay present, check and verify pass. A line there that writes into
    `batch` changes what the reward trace reads (it is moved, naming that line), not what the
    progress line reads (present)."""
    trainer = instrumented / RAY_TRAINER
    text = trainer.read_text(encoding="utf-8")
    assert text.count(REWARD_ANCHOR) == 1
    reward_points = {"flow.v0.train-reward", "progress.v0.reward"}
    assert {p.id for p in catalog.points if p.file == RAY_TRAINER and "extract_reward(batch)" in str(p.edits)} >= (
        reward_points
    )
    trainer.write_text(text.replace(REWARD_ANCHOR, REWARD_ANCHOR + " " * 24 + "reward_tensor = reward_tensor * 1.0\n"))
    checked = check(instrumented, catalog)
    assert {k: v for k, v in _statuses(checked).items() if v is not Status.PRESENT} == {}
    assert _cli("check", instrumented).exit_code == 0
    points = [f for f in verify(instrumented, catalog).findings if f.check.value == "points" and not f.ok]
    assert points == []

    written = " " * 24 + 'batch.meta_info["scaled"] = True\n'
    trainer.write_text(text.replace(REWARD_ANCHOR, REWARD_ANCHOR + written))
    line = _line_of(trainer, 'batch.meta_info["scaled"] = True')
    checked = check(instrumented, catalog)
    moved = [p for p in checked.points if p.status is not Status.PRESENT]
    assert [(p.point_id, p.status) for p in moved] == [("flow.v0.train-reward", Status.MOVED)]
    assert f"(line {line}) changes `batch.meta_info`, part of `batch`, which the code reads" in moved[0].message
    assert (moved[0].line, moved[0].expected_line) == (line + 1, line)
    result = _cli("check", instrumented)
    assert result.exit_code == 1
    assert result.output.count(f"its code is at line {line + 1}") == 1, "the fact is said once"
    points = [f for f in verify(instrumented, catalog).findings if f.check.value == "points" and not f.ok]
    assert [f.line for f in points] == [line + 1]


def test_a_business_line_between_every_block_and_its_anchor_leaves_every_point_present(instrumented, catalog):
    """One line of the fork's own (binding a name no point reads) between each inserted block and
    the statement its anchor names, on every anchor of the catalog (in business code: a line inside
    a rewrite's template is a hand edit of the rewrite): every point stays present."""
    from trace_instrument.engine.analysis import FileProblem, analyse
    from trace_instrument.engine.manifest import Manifest
    from trace_instrument.model import EditKind

    before = _statuses(check(instrumented, catalog))
    manifest = Manifest.load(instrumented)
    inserted = 0
    for relative in catalog.files:
        work = analyse(instrumented, relative, catalog, manifest=manifest)
        if isinstance(work, FileProblem):
            continue
        states = [work.state(p) for p in work.points]
        template = {
            id(s) for state in states for b in state.blocks if not b.edit.kind.inserts for s in b.instrumentation
        }
        lines: set[tuple[int, int]] = set()  # (index of the line the fork's line goes before, indent)
        for block in (b for state in states for b in state.blocks if b.edit.kind.inserts and b.exact):
            siblings = work.locator.finder.index.site(block.top[0]).siblings
            if any(id(s) in template for s in siblings):
                continue
            after = block.edit.anchors[0].kind in (EditKind.AFTER, EditKind.BODY_START)
            last = block.top[-1]
            lines.add((block.top[0].lineno - 1 if after else last.end_lineno or last.lineno, block.top[0].col_offset))
        if lines:
            path = instrumented / relative
            text = path.read_text(encoding="utf-8").splitlines(True)
            for index, indent in sorted(lines, reverse=True):
                text.insert(index, " " * indent + "_fork_note = 0\n")
            path.write_text("".join(text), encoding="utf-8")
            inserted += len(lines)
    assert inserted > 100
    checked = check(instrumented, catalog)
    assert _statuses(checked) == before and set(before.values()) == {Status.PRESENT}
    assert _cli("check", instrumented).exit_code == 0


def test_drift_diffs_show_exactly_what_differs(instrumented, catalog):
    trainer = instrumented / RAY_TRAINER
    text = trainer.read_text(encoding="utf-8")
    deleted = "log_progress('end generation')"
    deleted_line = _line_of(trainer, deleted)
    kept_lines = text.splitlines(True)
    del kept_lines[deleted_line - 1]
    edited = "".join(kept_lines).replace("detail='actor_parameters_updated'", "detail='actor_updated'")
    trainer.write_text(edited)
    checked = {p.point_id: p for p in check(instrumented, catalog).points}
    assert {k for k, p in checked.items() if p.status is not Status.PRESENT} == {
        "progress.v0.generation",
        "flow.v0.train-update",
    }
    generation = checked["progress.v0.generation"].diff.splitlines()
    assert f"+++ {RAY_TRAINER} (missing, expected at line {deleted_line})" in generation
    assert [line for line in generation if line.startswith("-") and not line.startswith("---")] == [f"-{deleted}"]
    update = checked["flow.v0.train-update"].diff.splitlines()
    removed = [line for line in update if line.startswith("-") and not line.startswith("---")]
    added = [line for line in update if line.startswith("+") and not line.startswith("+++")]
    assert [line[1:].strip() for line in removed] == ["stage='TRAIN_UPDATE', detail='actor_parameters_updated',"]
    assert [line[1:].strip() for line in added] == ["stage='TRAIN_UPDATE', detail='actor_updated',"]
    # the lines still in the file are context, never shown as deleted
    assert any(line.startswith(" trace_flow(uid=") for line in update)
    assert not any(line.startswith("-_traj_uids = ") for line in update)


def test_counts_agree_across_text_json_github_and_junit(instrumented, catalog):
    trainer = instrumented / RAY_TRAINER
    text = trainer.read_text(encoding="utf-8")
    trainer.write_text(
        text.replace("detail='actor_parameters_updated'", "detail='x'").replace(
            "log_progress('end generation')\n", "pass\n"
        )
    )
    (instrumented / "verl/utils/tracing/trace.py").unlink()
    body = json.loads(_cli("check", "--format", "json", instrumented).output)
    by_status: dict[str, int] = {}
    for point in body["points"]:
        by_status[point["status"]] = by_status.get(point["status"], 0) + 1
    assert body["summary"]["by_status"] == by_status and len(body["points"]) == body["summary"]["total"]
    unclean = sum(n for status, n in by_status.items() if status not in ("present", "not-applicable"))
    github = _cli("check", "--format", "github", instrumented).output
    assert len(re.findall(r"^::error file=[^,]+,line=[1-9]\d*,", github, re.MULTILINE)) == unclean
    suite = ElementTree.fromstring(_cli("check", "--format", "junit", instrumented).output)
    assert int(suite.get("tests") or 0) == len(body["points"])
    assert int(suite.get("failures") or 0) == unclean == len(suite.findall("testcase/failure"))
    summary = _cli("check", instrumented).output.strip().splitlines()[-1]
    points_part, runtime_part = summary.removeprefix("check: ").split(" — ")[0].split("; runtime: ")
    text_counts: dict[str, int] = {}
    for part in [*points_part.split(", "), *runtime_part.split(", ")]:
        number, status = part.split(" ", 1)
        text_counts[status] = text_counts.get(status, 0) + int(number)
    assert text_counts == by_status


def test_quiet_prints_problems_and_one_summary_line(instrumented, catalog):
    (instrumented / RAY_TRAINER).write_text(
        (instrumented / RAY_TRAINER)
        .read_text(encoding="utf-8")
        .replace("detail='actor_parameters_updated'", "detail='x'")
    )
    quiet = _cli("check", "--quiet", instrumented).output.rstrip().splitlines()
    assert quiet[-1].startswith("check: ") and quiet[-1].endswith(" — drift")
    status_lines = [line for line in quiet if re.match(r"^  \S", line)]
    assert [line.split()[:2] for line in status_lines] == [["drifted", "flow.v0.train-update"]]
    clean = _cli("check", "-q", instrumented.parent / "nothing")
    assert clean.exit_code == 2


@pytest.mark.slow
def test_github_paths_are_relative_to_the_repository_root(instrumented, catalog, tmp_path):
    repository = instrumented.parent
    subprocess.run(["git", "init", "-q", str(repository)], check=True)
    (instrumented / RAY_TRAINER).write_text(
        (instrumented / RAY_TRAINER)
        .read_text(encoding="utf-8")
        .replace("detail='actor_parameters_updated'", "detail='x'")
    )
    output = _cli("check", "--format", "github", instrumented).output
    prefix = instrumented.relative_to(repository).as_posix()
    assert f"::error file={prefix}/{RAY_TRAINER},line=" in output


def test_anchor_lost_annotations_carry_the_scope_line(checkout_090, catalog):
    trainer = checkout_090 / RAY_TRAINER
    lines = trainer.read_text(encoding="utf-8").splitlines(True)
    fit_line = next(i for i, line in enumerate(lines, 1) if line.startswith("    def fit(self):"))
    anchor = 'batch.non_tensor_batch["uid"] = np.array('
    at = next(i for i, line in enumerate(lines) if i >= fit_line and anchor in line)
    lines[at] = lines[at].replace(anchor, 'batch.non_tensor_batch["uid"] = make_uids(')
    trainer.write_text("".join(lines))
    output = _cli("check", "--format", "github", "--only", "flow.v0.uid-generated", checkout_090).output
    assert f"::error file={RAY_TRAINER},line={fit_line},title=anchor-lost%3A flow.v0.uid-generated::" in output


def test_remove_force_takes_a_hand_edited_block_whole_and_apply_puts_it_back_as_one_apply(
    instrumented, catalog, checkout_090, verl_090, tmp_path
):
    from support import copy_tree, tree_bytes

    from trace_instrument.engine.remove import remove

    trainer = instrumented / RAY_TRAINER
    once = trainer.read_bytes()
    trainer.write_text(once.decode().replace("detail='actor_parameters_updated'", "detail='actor_updated'"))
    kept = remove(instrumented, catalog, Selection(only=frozenset({"flow.v0.train-update"})))
    assert [p.status for p in kept.points] == [Status.KEPT] and not kept.written
    forced = remove(instrumented, catalog, Selection(only=frozenset({"flow.v0.train-update"})), force=True)
    assert [p.status for p in forced.points] == [Status.REMOVED]
    text = trainer.read_text(encoding="utf-8")
    # the whole block went: no orphan `_traj_uids = ...` line where TRAIN_UPDATE stood
    assert (
        text.count("_traj_uids = batch.non_tensor_batch.get")
        == once.decode().count("_traj_uids = batch.non_tensor_batch.get") - 1
    )
    assert "stage='TRAIN_UPDATE'" not in text
    apply(instrumented, catalog, Selection(only=frozenset({"flow.v0.train-update"})))
    assert trainer.read_bytes() == once, "remove then apply of one point gives the bytes of one apply"
    reference = copy_tree(verl_090, tmp_path / "reference")
    apply(reference, catalog)
    assert tree_bytes(instrumented) == tree_bytes(reference)


def test_an_outdated_runtime_file_is_updated_and_a_hand_edited_one_left_alone(instrumented, catalog):
    from trace_instrument.engine.runtime import digest

    runtime_file = instrumented / "verl/utils/tracing/trace.py"
    shipped = runtime_file.read_bytes()
    older = shipped + b"\n# as an older release of the tool shipped it\n"
    runtime_file.write_bytes(older)
    manifest_path = instrumented / ".trace-instrument.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    manifest["runtime"]["trace.py"] = digest(older)  # what that older apply recorded
    manifest_path.write_text(json.dumps(manifest), encoding="utf-8")
    body = json.loads(_cli("check", "--format", "json", instrumented).output)
    runtime_items = {p["file"]: p["status"] for p in body["points"] if p["id"] == "runtime"}
    assert runtime_items["verl/utils/tracing/trace.py"] == "stale" and body["exit_code"] == 1
    applied = apply(instrumented, catalog)
    assert {f.path: f.status.value for f in applied.runtime_files}["verl/utils/tracing/trace.py"] == "updated"
    assert runtime_file.read_bytes() == shipped and _cli("check", instrumented).exit_code == 0
    # an edit nobody recorded is the user's: apply leaves it, and the points that need it are broken
    runtime_file.write_bytes(shipped + b"\n# my own change\n")
    assert _cli("apply", instrumented).exit_code == 1
    assert runtime_file.read_bytes().endswith(b"# my own change\n")
    checked = check(instrumented, catalog)
    assert {p.reason for p in checked.points if p.status is Status.BROKEN} == {Reason.RUNTIME_INCOMPLETE}


def test_the_earlier_runtime_hashes_are_well_formed_and_none_is_todays(catalog):
    from trace_instrument.engine.runtime import digest

    today = {digest(content) for _name, content in catalog.runtime.files}
    earlier = {h for hashes in catalog.runtime.earlier.values() for h in hashes}
    assert earlier and not (earlier & today)
    assert all(re.fullmatch(r"[0-9a-f]{16}", h) for h in earlier)


def test_a_pasted_second_copy_of_a_points_code_is_unexpected(instrumented, catalog):
    """The point stays present (its block is where its anchor puts it); the copy is code nobody owns."""
    trainer = instrumented / RAY_TRAINER
    text = trainer.read_text(encoding="utf-8")
    assert text.count(START_UPDATE) == 1
    trainer.write_text(text.replace(START_UPDATE, START_UPDATE * 2))
    copy_line = text[: text.index(START_UPDATE)].count("\n") + 2  # the line below the original
    checked = check(instrumented, catalog)
    unexpected = [p for p in checked.points if p.status is Status.UNEXPECTED]
    assert [(p.file, p.line) for p in unexpected] == [(RAY_TRAINER, copy_line)]
    assert all(p.status is Status.PRESENT for p in checked.points if p.point_id.startswith("progress.v0.update-actor"))
    assert _cli("check", "--quiet", instrumented).exit_code == 1


def test_a_fork_function_named_like_an_inserted_helper_is_the_forks_and_never_removed(checkout_090, catalog):
    """Not the helper edited by hand (apply never placed it): a name conflict, and remove --force keeps it."""
    base = checkout_090 / "verl/trainer/ppo/v1/trainer_base.py"
    fork = base.read_text(encoding="utf-8") + '\n\ndef _trace_ids_from_batch(batch):\n    return "fork"\n'
    base.write_text(fork, encoding="utf-8")
    fork_line = fork.splitlines().index("def _trace_ids_from_batch(batch):") + 1
    applied = apply(checkout_090, catalog)
    helper = next(p for p in applied.points if p.point_id == "flow.v1.trace-ids-helper")
    assert (helper.status, helper.reason) == (Status.REFUSED, Reason.NAME_CONFLICT)
    assert [(i.name, i.binding_line) for i in helper.names] == [("_trace_ids_from_batch", fork_line)]
    needing = {p.id for p in catalog.points if "flow.v1.trace-ids-helper" in p.requires}
    assert {p.point_id for p in applied.points if p.status is Status.SKIPPED} == needing
    assert _statuses(check(checkout_090, catalog))["flow.v1.trace-ids-helper"] is Status.REFUSED
    assert _cli("remove", "--force", checkout_090).exit_code == 0
    assert base.read_text(encoding="utf-8") == fork, "the fork's function is left alone"


def _train_update_lines(trainer: Path) -> tuple[int, int]:
    """First and last line of the TRAIN_UPDATE block (its `_traj_uids` line and its call)."""
    text = trainer.read_text(encoding="utf-8")
    assert text.count(TRAIN_UPDATE) == 1
    first = text[: text.index(TRAIN_UPDATE)].count("\n") + 1  # the `_traj_uids` line is in five blocks
    return first, first + len(TRAIN_UPDATE.splitlines()) - 1


@pytest.mark.parametrize("edit", ["stage edited", "call deleted"])
def test_a_half_edited_block_is_its_points_drift_and_blames_no_neighbour(instrumented, catalog, verl_090, edit):
    """What is left of TRAIN_UPDATE's block is that point's hand-edited code: drifted, no other
    point broken or moved; remove --force takes it out whole and apply puts the point back."""
    trainer = instrumented / RAY_TRAINER
    fresh = trainer.read_bytes()
    first, last = _train_update_lines(trainer)
    lines = trainer.read_text(encoding="utf-8").splitlines(True)
    if edit == "stage edited":
        lines[last - 2] = lines[last - 2].replace("stage='TRAIN_UPDATE'", "stage='TRAIN_UPDATED'")
    else:
        del lines[first:last]  # the call's five lines; the `_traj_uids = ...` line stays
    trainer.write_text("".join(lines), encoding="utf-8")
    checked = check(instrumented, catalog)
    problems = {p.point_id: p.status for p in checked.points if p.status is not Status.PRESENT}
    assert problems == {"flow.v0.train-update": Status.DRIFTED}
    drifted = next(p for p in checked.points if p.point_id == "flow.v0.train-update")
    assert drifted.line == first
    assert _cli("remove", "--force", "--only", "flow.v0.train-update", instrumented).exit_code == 0
    assert "_traj_uids" not in "".join(trainer.read_text(encoding="utf-8").splitlines(True)[first - 2 : first + 2])
    assert apply(instrumented, catalog).written
    assert trainer.read_bytes() == fresh, "apply puts the point back exactly"


def test_a_module_the_inserted_code_uses_is_checked_for_what_it_means(instrumented, catalog):
    """env.worker-group calls os.environ: a fork's `os = None` breaks it, a lost `import os` is repaired."""
    base = instrumented / "verl/single_controller/ray/base.py"
    text = base.read_text(encoding="utf-8")
    base.write_text(text + "\nos = None\n", encoding="utf-8")
    rebinding_line = len(text.splitlines()) + 2
    point = next(p for p in check(instrumented, catalog).points if p.point_id == "env.worker-group")
    assert (point.status, [(i.name, i.binding_line) for i in point.names]) == (Status.BROKEN, [("os", rebinding_line)])
    assert "import os\n" in text
    base.write_text(text.replace("import os\n", "", 1), encoding="utf-8")
    point = next(p for p in check(instrumented, catalog).points if p.point_id == "env.worker-group")
    assert (point.status, point.reason) == (Status.BROKEN, Reason.MISSING_IMPORT)
    assert apply(instrumented, catalog).written
    assert _statuses(check(instrumented, catalog))["env.worker-group"] is Status.PRESENT


@pytest.mark.parametrize(
    ("module", "line"),
    [
        ("verl/utils/mine.py", "from .tracing import trace_flow"),
        ("verl/utils/mine.py", "from . import tracing"),
        ("verl/trainer/mine.py", "from ..utils.tracing import log_progress"),
        ("verl/trainer/ppo/mine.py", "from ...utils import tracing"),
    ],
)
def test_remove_keeps_the_runtime_a_relative_import_still_needs(instrumented, catalog, module, line):
    (instrumented / module).write_text(line + "\n", encoding="utf-8")
    result = _cli("remove", instrumented)
    assert result.exit_code == 1, result.output
    assert (instrumented / "verl/utils/tracing/__init__.py").is_file()
    assert module in result.output, "the importer is named"


def test_check_says_what_apply_would_do_when_a_requirement_in_another_file_is_refused(checkout_090, catalog):
    """A star import refuses the agent loop's points; the single-turn and tool records, in other
    files, require one of them: check calls them skipped, as apply does, not missing."""
    loop = checkout_090 / "verl/experimental/agent_loop/agent_loop.py"
    loop.write_text(
        loop.read_text(encoding="utf-8").replace("import random\n", "import random\nfrom math import *\n", 1)
    )
    checked = {p.point_id: p.status for p in check(checkout_090, catalog).points}
    planned = {p.point_id: p.status for p in apply(checkout_090, catalog, write=False).points}
    as_apply = {Status.MISSING: Status.APPLIED}
    assert {k: as_apply.get(v, v) for k, v in checked.items()} == planned
    refused = {k for k, v in planned.items() if v is Status.REFUSED}
    needing = {
        p.id
        for p in catalog.points
        if set(p.requires) & refused and p.file != "verl/experimental/agent_loop/agent_loop.py"
    }
    assert needing and all(checked[k] is Status.SKIPPED for k in needing)


def test_a_syntax_error_is_annotated_on_its_own_line(instrumented):
    sync = instrumented / "verl/trainer/ppo/v1/trainer_sync.py"
    text = sync.read_text(encoding="utf-8")
    sync.write_text(text + "\ndef oops(:\n", encoding="utf-8")
    bad_line = len(text.splitlines()) + 2
    github = _cli("check", "--format", "github", instrumented).output
    lines = re.findall(r"^::error file=([^,]+),line=(\d+),", github, re.MULTILINE)
    assert {int(n) for f, n in lines if f.endswith("trainer_sync.py")} == {bad_line}
