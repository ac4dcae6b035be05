"""Every status of `check`, each made to happen on a real verl 0.9.0 copy."""

from __future__ import annotations

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

RAY_TRAINER = "verl/trainer/ppo/ray_trainer.py"
UID_POINT = "flow.v0.uid-generated"


def _status(result, point_id: str):
    return next(p for p in result.points if p.point_id == point_id)


def _edit(root: Path, relative: str, old: str, new: str, count: int = 1) -> None:
    path = root / relative
    text = path.read_text(encoding="utf-8")
    assert text.count(old) >= count, f"{old!r} not in {relative}"
    path.write_text(text.replace(old, new, count), encoding="utf-8")


def test_present_and_missing(checkout_090, catalog):
    assert _status(check(checkout_090, catalog), UID_POINT).status is Status.MISSING
    apply(checkout_090, catalog)
    assert _status(check(checkout_090, catalog), UID_POINT).status is Status.PRESENT


def test_drifted_shows_a_diff_and_is_never_duplicated(checkout_090, catalog):
    apply(checkout_090, catalog)
    _edit(
        checkout_090,
        RAY_TRAINER,
        "from_module='DataLoader', to_module='RayPPOTrainer'",
        "from_module='Loader', to_module='RayPPOTrainer'",
    )
    result = _status(check(checkout_090, catalog), UID_POINT)
    assert result.status is Status.DRIFTED
    assert "-           from_module='DataLoader'" in result.diff and "+           from_module='Loader'" in result.diff
    again = apply(checkout_090, catalog)
    assert _status(again, UID_POINT).status is Status.DRIFTED and not again.written
    assert (checkout_090 / RAY_TRAINER).read_text().count("detail='uid_generated'") == 1
    kept = remove(checkout_090, catalog)
    assert _status(kept, UID_POINT).status is Status.KEPT
    assert "detail='uid_generated'" in (checkout_090 / RAY_TRAINER).read_text()
    assert {f.status for f in kept.runtime_files} == {RuntimeStatus.KEPT_IN_USE}
    forced = remove(checkout_090, catalog, force=True)
    assert _status(forced, UID_POINT).status is Status.REMOVED
    assert "trace_flow" not in (checkout_090 / RAY_TRAINER).read_text()


def test_stale_when_the_code_is_an_older_template(checkout_090, catalog):
    apply(checkout_090, catalog)
    older = "trace_flow(uid=batch.non_tensor_batch[\"uid\"], traj_uid='N/A',\n           from_module='DataLoader', to_module='RayPPOTrainer',\n           stage='DATA_PREPROCESS', detail='uid_generated')\n"
    _edit(
        checkout_090,
        RAY_TRAINER,
        "detail='uid_generated',\n                           global_step=self.global_steps)",
        "detail='uid_generated')",
    )
    manifest_path = checkout_090 / ".trace-instrument.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["points"][UID_POINT]["templates"] = [older]
    manifest_path.write_text(json.dumps(manifest))
    assert _status(check(checkout_090, catalog), UID_POINT).status is Status.STALE
    again = apply(checkout_090, catalog)
    assert _status(again, UID_POINT).status is Status.STALE and not again.written


def test_anchor_lost_names_the_nearest_candidates(checkout_090, catalog):
    _edit(
        checkout_090,
        RAY_TRAINER,
        '                batch.non_tensor_batch["uid"] = np.array(',
        '                batch.non_tensor_batch["uid"] = numpy.array(',
    )
    result = _status(check(checkout_090, catalog), UID_POINT)
    assert result.status is Status.ANCHOR_LOST
    assert result.candidates and "numpy.array" in result.candidates[0].code
    assert result.candidates[0].line == 1457
    applied = apply(checkout_090, catalog)
    assert _status(applied, UID_POINT).status is Status.ANCHOR_LOST
    assert "detail='uid_generated'" not in (checkout_090 / RAY_TRAINER).read_text()


def test_ambiguous_when_the_anchor_matches_twice(checkout_090, catalog):
    _edit(
        checkout_090,
        RAY_TRAINER,
        "                        self.checkpoint_manager.sleep_replicas()\n",
        "                        self.checkpoint_manager.sleep_replicas()\n                        self.checkpoint_manager.sleep_replicas()\n",
    )
    result = _status(check(checkout_090, catalog), "progress.v0.generation")
    assert result.status is Status.AMBIGUOUS
    assert "lines 1489, 1490" in result.message


def test_not_applicable_when_the_file_is_absent(checkout_090, catalog):
    (checkout_090 / "verl/trainer/ppo/v1/trainer_sync.py").unlink()
    result = check(checkout_090, catalog)
    assert _status(result, "flow.v1.sync-params.sync").status is Status.NOT_APPLICABLE


def test_unexpected_tracing_calls(checkout_090, catalog):
    apply(checkout_090, catalog)
    main_ppo = checkout_090 / "verl/trainer/main_ppo.py"
    main_ppo.write_text(
        main_ppo.read_text() + "\ntrace_flow(uid='x', traj_uid='0', from_module='A', to_module='B', stage='CUSTOM')\n"
    )
    _edit(
        checkout_090,
        RAY_TRAINER,
        "                batch_dict",
        "                log_progress('my own line')\n                batch_dict",
        0,
    )
    result = check(checkout_090, catalog)
    unexpected = [p for p in result.points if p.status is Status.UNEXPECTED]
    assert [(p.file, "CUSTOM" in p.message) for p in unexpected] == [("verl/trainer/main_ppo.py", True)]


def test_github_and_junit_formats(checkout_090, catalog):
    apply(checkout_090, catalog, Selection(facilities=frozenset({"sample_flow", "runtime"})))
    result = check(checkout_090, catalog)
    annotations = ci.github_annotations(result)
    assert re.search(
        r"^::error file=verl/trainer/ppo/ray_trainer.py,line=\d+,title=missing%3A progress\.v0\.",
        annotations,
        re.MULTILINE,
    )
    suite = ElementTree.fromstring(ci.junit_xml(result))
    cases = suite.findall("testcase")
    assert len(cases) == len(result.points) + len(result.runtime_files)
    failed = [c.get("name") for c in cases if c.find("failure") is not None]
    assert "progress.v0.reward" in failed and "flow.v0.uid-generated" not in failed
    assert int(suite.get("failures")) == len(failed)


@pytest.mark.parametrize("fmt", ["text", "json", "github", "junit"])
def test_check_formats_from_the_cli(checkout_090, fmt):
    from typer.testing import CliRunner

    from trace_instrument.cli import app

    outcome = CliRunner().invoke(app, ["check", "--format", fmt, str(checkout_090)])
    assert outcome.exit_code == 1 and outcome.output.strip()
