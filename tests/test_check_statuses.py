"""Statuses of `check` made to happen on a real verl 0.9.0 copy.

The refusals (anchor-lost with its candidates, ambiguous, refused, skipped) are fixtures on small
synthetic files: tests/fixtures/apply/ (see tests/test_fixtures.py).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from xml.etree import ElementTree

import pytest

from trace_instrument.engine.apply import apply
from trace_instrument.engine.check import check
from trace_instrument.engine.remove import remove
from trace_instrument.model import RuntimeStatus, Selection, Status
from trace_instrument.render import ci

FORMAT_1_090 = Path(__file__).parent / "fixtures" / "manifests" / "format-1-verl-0.9.0.json"

RAY_TRAINER = "verl/trainer/ppo/ray_trainer.py"
UID_POINT = "flow.v0.uid-generated"


def _status(result, point_id: str):
    return next(p for p in result.points if p.point_id == point_id)


def _edit(root: Path, relative: str, old: str, new: str) -> None:
    """Replace the one occurrence of `old` (failing when it is absent or not unique)."""
    path = root / relative
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times in {relative}, not once"
    path.write_text(text.replace(old, new), encoding="utf-8")


def test_present_and_missing(checkout_090, catalog):
    assert _status(check(checkout_090, catalog), UID_POINT).status is Status.MISSING
    apply(checkout_090, catalog)
    assert _status(check(checkout_090, catalog), UID_POINT).status is Status.PRESENT


def test_drifted_shows_a_diff_and_is_never_duplicated(instrumented_090, catalog):
    _edit(
        instrumented_090,
        RAY_TRAINER,
        "from_module='DataLoader', to_module='RayPPOTrainer'",
        "from_module='Loader', to_module='RayPPOTrainer'",
    )
    result = _status(check(instrumented_090, catalog), UID_POINT)
    assert result.status is Status.DRIFTED
    assert "-           from_module='DataLoader'" in result.diff and "+           from_module='Loader'" in result.diff
    again = apply(instrumented_090, catalog)
    assert _status(again, UID_POINT).status is Status.DRIFTED and not again.written
    assert (instrumented_090 / RAY_TRAINER).read_text().count("detail='uid_generated'") == 1
    kept = remove(instrumented_090, catalog)
    assert _status(kept, UID_POINT).status is Status.KEPT
    assert "detail='uid_generated'" in (instrumented_090 / RAY_TRAINER).read_text()
    kept_runtime = {f.path: f.status for f in kept.runtime_files}
    assert len(kept_runtime) == _runtime_file_count(), "the drifted point still calls the runtime: all of it stays"
    assert set(kept_runtime.values()) == {RuntimeStatus.KEPT_IN_USE}
    forced = remove(instrumented_090, catalog, force=True)
    assert _status(forced, UID_POINT).status is Status.REMOVED
    assert "trace_flow" not in (instrumented_090 / RAY_TRAINER).read_text()


@pytest.mark.parametrize("form", ["format-2", "format-1"])
def test_stale_when_the_code_is_an_older_template(instrumented_090, catalog, form: str):
    """The manifest names the older template: by digest with its text alongside (format 2, a
    template no release shipped), or by its text in the point's record (format 1, as releases up
    to 0.2.0 wrote it: the committed fixture, from the same tree)."""
    older = "trace_flow(uid=batch.non_tensor_batch[\"uid\"], traj_uid='N/A',\n           from_module='DataLoader', to_module='RayPPOTrainer',\n           stage='DATA_PREPROCESS', detail='uid_generated')\n"
    _edit(
        instrumented_090,
        RAY_TRAINER,
        "detail='uid_generated',\n                           global_step=self.global_steps)",
        "detail='uid_generated')",
    )
    manifest_path = instrumented_090 / ".trace-instrument.json"
    if form == "format-1":
        manifest = json.loads(FORMAT_1_090.read_text(encoding="utf-8"))
        manifest["points"][UID_POINT]["templates"] = [older]
    else:
        manifest = json.loads(manifest_path.read_text())
        key = hashlib.sha256(older.encode()).hexdigest()[:16]
        manifest["points"][UID_POINT] = [RAY_TRAINER, key]
        manifest["templates"][key] = older.split("\n")
    manifest_path.write_text(json.dumps(manifest))
    assert _status(check(instrumented_090, catalog), UID_POINT).status is Status.STALE
    files = {path: (instrumented_090 / path).read_bytes() for path in (RAY_TRAINER, ".trace-instrument.json")}
    again = apply(instrumented_090, catalog)
    assert _status(again, UID_POINT).status is Status.STALE
    # nothing of the tree changes; a format-1 manifest alone is written again, in format 2, still
    # naming the older template (so the point stays stale, its text kept: no release shipped it)
    assert again.written == (form == "format-1")
    assert (instrumented_090 / RAY_TRAINER).read_bytes() == files[RAY_TRAINER]
    if form == "format-1":
        rewritten = json.loads((instrumented_090 / ".trace-instrument.json").read_text(encoding="utf-8"))
        assert (
            rewritten["format"] == 2 and "\n".join(rewritten["templates"][rewritten["points"][UID_POINT][1]]) == older
        )
        assert _status(check(instrumented_090, catalog), UID_POINT).status is Status.STALE


def test_not_applicable_when_the_file_is_absent(checkout_090, catalog):
    (checkout_090 / "verl/trainer/ppo/v1/trainer_sync.py").unlink()
    result = check(checkout_090, catalog)
    assert _status(result, "flow.v1.sync-params.sync").status is Status.NOT_APPLICABLE


def test_unexpected_tracing_calls(instrumented_090, catalog):
    main_ppo = instrumented_090 / "verl/trainer/main_ppo.py"
    main_ppo.write_text(
        main_ppo.read_text() + "\ntrace_flow(uid='x', traj_uid='0', from_module='A', to_module='B', stage='CUSTOM')\n"
    )
    own_line = "                log_progress('my own line')\n"
    _edit(
        instrumented_090,
        RAY_TRAINER,
        "                batch: DataProto = DataProto.from_single_dict(batch_dict)\n",
        own_line + "                batch: DataProto = DataProto.from_single_dict(batch_dict)\n",
    )
    trainer_lines = (instrumented_090 / RAY_TRAINER).read_text(encoding="utf-8").splitlines(keepends=True)
    main_ppo_lines = main_ppo.read_text(encoding="utf-8").splitlines()
    result = check(instrumented_090, catalog)
    unexpected = {(p.file, p.line): p.message for p in result.points if p.status is Status.UNEXPECTED}
    custom_call = ("verl/trainer/main_ppo.py", len(main_ppo_lines))
    own_call = (RAY_TRAINER, trainer_lines.index(own_line) + 1)
    assert sorted(unexpected) == sorted([custom_call, own_call])
    assert "trace_flow" in unexpected[custom_call] and "CUSTOM" in unexpected[custom_call]
    assert "log_progress 'my own line'" in unexpected[own_call]


def _runtime_file_count() -> int:
    count = len(list((Path(__file__).parent.parent / "templates" / "runtime").glob("*.py")))
    assert count, "no runtime templates found"
    return count


def test_github_and_junit_formats(checkout_090, catalog):
    apply(checkout_090, catalog, Selection(facilities=frozenset({"sample_flow", "runtime"})))
    result = check(checkout_090, catalog)
    annotations = ci.github_annotations(result)
    assert re.search(
        r"^::error file=verl/trainer/ppo/ray_trainer.py,line=\d+,title=missing%3A progress\.v0\.",
        annotations,
        re.MULTILINE,
    )
    core = [p for p in catalog.points if p.extra is None]
    not_applied = {p.id for p in core if p.facility != "sample_flow"}
    suite = ElementTree.fromstring(ci.junit_xml(result))
    cases = suite.findall("testcase")
    assert len(cases) == len(core) + _runtime_file_count()
    failed = {c.get("name") for c in cases if c.find("failure") is not None}
    assert failed == not_applied
    assert int(suite.get("failures")) == len(not_applied)


@pytest.mark.parametrize("fmt", ["text", "json", "github", "junit"])
def test_check_formats_from_the_cli(checkout_090, catalog, fmt):
    from typer.testing import CliRunner

    from trace_instrument.cli import app

    # a pristine tree is never instrumented: --verbose lists every point (without it: one entry,
    # tests/test_one_line.py)
    outcome = CliRunner().invoke(app, ["check", "--verbose", "--format", fmt, str(checkout_090)])
    assert outcome.exit_code == 1
    core = [p.id for p in catalog.points if p.extra is None]
    missing = len(core) + _runtime_file_count()  # a pristine tree: every point and runtime file
    if fmt == "text":
        listed = {line.split()[1] for line in outcome.output.splitlines() if line.strip().startswith("missing ")}
        assert listed == set(core)
    elif fmt == "json":
        assert json.loads(outcome.output)["summary"]["by_status"] == {"missing": missing}
    elif fmt == "github":
        assert sum(line.startswith("::error ") for line in outcome.output.splitlines()) == missing
    else:
        suite = ElementTree.fromstring(outcome.output)
        assert (suite.get("tests"), suite.get("failures")) == (str(missing), str(missing))


SYNC = "verl/trainer/ppo/v1/trainer_sync.py"
SYNC_CALL = """        trace_flow(uid='*', traj_uid='*', from_module='CheckpointEngineManager',
                   to_module='RolloutReplica', stage='SYNC_PARAMS',
                   detail=f'weights_synced_global_step={self.global_steps}',
                   global_step=self.global_steps)
"""


def test_remove_names_tracing_code_the_fork_moved_into_a_helper_of_its_own(checkout_090, catalog):
    from trace_instrument.render.exits import FAILED, remove_exit

    apply(checkout_090, catalog)
    text = (checkout_090 / SYNC).read_text(encoding="utf-8")
    assert text.count(SYNC_CALL) == 1
    helper = "    def _traced_sync(self):\n" + SYNC_CALL + "\n"
    text = text.replace(SYNC_CALL, "        self._traced_sync()\n").replace(
        "    def on_step_end(self):\n", helper + "    def on_step_end(self):\n"
    )
    (checkout_090 / SYNC).write_text(text, encoding="utf-8")
    helper_line = text.splitlines().index("    def _traced_sync(self):") + 2
    result = remove(checkout_090, catalog)
    left = [(p.file, p.line) for p in result.points if p.status is Status.UNEXPECTED]
    assert left == [(SYNC, helper_line)]
    message = next(p.message for p in result.points if p.status is Status.UNEXPECTED)
    assert "SYNC_PARAMS" in message and "remove leaves it" in message and "override" in message
    assert remove_exit(result) == FAILED
    assert {f.status for f in result.runtime_files} == {RuntimeStatus.KEPT_IN_USE}
    after = (checkout_090 / SYNC).read_text(encoding="utf-8")
    compile(after, SYNC, "exec")
    assert "from verl.utils.tracing import trace_flow" in after and SYNC_CALL in after


def test_text_lists_each_failing_edit_under_its_point(tmp_path):
    """check's text names both failing edits of a two-edit point (fixture apply/two-edits-both-fail),
    each with its status, line and nearest places, under the point's own line."""
    import shutil

    from rich.console import Console

    from trace_instrument.render.text import check_lines
    from trace_instrument.spec import load_catalog

    case = Path(__file__).parent / "fixtures" / "apply" / "two-edits-both-fail"
    (tmp_path / "spec").mkdir()
    shutil.copy(case / "spec.yaml", tmp_path / "spec" / "spec.yaml")
    root = tmp_path / "checkout"
    (root / "verl").mkdir(parents=True)
    shutil.copy(case / "before.py", root / "verl" / "target.py")
    result = check(root, load_catalog([tmp_path / "spec"], shipped=False))
    console = Console(width=300, no_color=True, record=True)
    # verbose: a checkout never instrumented is otherwise one line and a count (issue 39)
    for line in check_lines(result, quiet=True, verdict="not clean", verbose=True):
        console.print(line)
    text = [line.strip() for line in console.export_text().splitlines()]
    head = next(i for i, line in enumerate(text) if line.startswith("anchor-lost") and "t.grow" in line)
    assert text[head].endswith("verl/target.py:1")
    assert text[head + 1] == "edit 1 of 2: anchor-lost (line 1): anchor not found in Loop: messages.append(added)"
    assert text[head + 2].startswith("nearest: line 3: messages.extend(added)")
    assert text[head + 3].startswith("nearest: line 7: messages.extend(added)")
    assert text[head + 4] == (
        "edit 2 of 2: ambiguous (line 3): anchor matches 2 places in Loop "
        "(lines 3 in Loop.generate, 7 in Loop.call_tools); refusing to guess"
    )
    assert text[head + 5].startswith("nearest: line 3: messages.extend(added)  (in Loop.generate)")
    assert text[head + 6].startswith("nearest: line 7: messages.extend(added)  (in Loop.call_tools)")
