"""A run killed before it finished: tracing code without its manifest, or the staged copies it left.

apply writes the manifest last: a SIGKILL after the last file's rename and before the manifest's
leaves an instrumented tree with no manifest and the manifest's staged copy. check used to call it
clean. Now check names it (status `unfinished`, reasons `no-manifest` and `staging-leftovers`, exit
1, in every format), and apply finishes the job: the leftovers go, and the manifest it writes is
byte for byte the one a clean apply writes (the originals of the rewrites and the imports apply
added included, which the tree alone does not tell). A tree with no tracing code and no manifest
is simply not instrumented.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import jsonschema
import pytest
from support import copy_tree, tree_bytes
from typer.testing import CliRunner

from trace_instrument.cli import app
from trace_instrument.engine.apply import apply, clean_manifest
from trace_instrument.engine.check import check
from trace_instrument.engine.files import PAUSE_AT_ENV, PAUSE_ENV, checkout_lock
from trace_instrument.engine.manifest import MANIFEST_NAME
from trace_instrument.engine.remove import remove
from trace_instrument.engine.report import report
from trace_instrument.model import Catalog, Reason, Selection, Status
from trace_instrument.render import exits, jsonout
from trace_instrument.render.ci import github_annotations, junit_xml
from trace_instrument.spec import load_catalog

# a rewrite (the manifest records the exact text it replaced) and an insert that imports `time`
# (the manifest records that apply added the import): what a tree without its manifest cannot tell
SPEC = """\
file: verl/target.py
points:
  - id: t.timed
    facility: progress
    title: the step is timed
    scope: Trainer.fit
    imports: ["import time"]
    after: |
      batch = next(self.loader)
    code: |
      _started = time.time()
      log_progress(f'step started at {_started}')
  - id: t.wrapped
    facility: progress
    title: the loader is logged
    scope: Trainer.fit
    changes_behaviour: the batches come through the logging wrapper, unchanged
    replace_expr: |
      batch = next(self.loader)
    expr: self.loader
    code: self._logged(self.loader)
    marker: |
      self._logged(self.loader)
"""
TRAINER = """\
class Trainer:
    def __init__(self, loader):
        self.loader = loader

    def _logged(self, loader):
        return loader

    def fit(self):
        batch = next(self.loader)  # the fork's comment
        return batch
"""
STAGED = "..trace-instrument.json.k1ll3d.ti-tmp"  # `.NAME.XXXX.ti-tmp`, NAME the manifest's


def _catalog(tmp_path: Path) -> Catalog:
    folder = tmp_path / "spec"
    folder.mkdir(exist_ok=True)
    (folder / "spec.yaml").write_text(SPEC, encoding="utf-8")
    return load_catalog([folder], shipped=False)


def _checkout(tmp_path: Path, name: str = "checkout") -> Path:
    root = tmp_path / name
    (root / "verl").mkdir(parents=True)
    (root / "verl" / "target.py").write_text(TRAINER, encoding="utf-8")
    return root


def _unfinished(root: Path, catalog: Catalog) -> list[tuple[Reason | None, str]]:
    return [(p.reason, p.file) for p in check(root, catalog).unfinished]


def test_a_tree_without_tracing_code_nor_manifest_is_not_instrumented(tmp_path: Path) -> None:
    catalog = _catalog(tmp_path)
    root = _checkout(tmp_path)
    result = check(root, catalog)
    assert result.unfinished == ()
    assert {p.status for p in result.points} == {Status.MISSING}


def test_tracing_code_without_a_manifest_is_unfinished_and_apply_writes_a_clean_applys_manifest(
    tmp_path: Path,
) -> None:
    catalog = _catalog(tmp_path)
    clean = _checkout(tmp_path, "clean")
    assert exits.apply_exit(apply(clean, catalog)) == exits.OK
    reference = (clean / MANIFEST_NAME).read_bytes()
    recorded = json.loads(reference)
    assert recorded["imports"] and recorded["replaced"], "what the tree alone does not tell"

    root = tmp_path / "lost"
    shutil.copytree(clean, root)
    (root / MANIFEST_NAME).unlink()
    checked = check(root, catalog)
    assert {p.status for p in checked.points} == {Status.PRESENT}
    assert [(p.status, p.reason, p.file) for p in checked.unfinished] == [
        (Status.UNFINISHED, Reason.NO_MANIFEST, MANIFEST_NAME)
    ]
    assert exits.check_exit(checked) == exits.FAILED
    repaired = apply(root, catalog)
    assert exits.apply_exit(repaired) == exits.OK and repaired.written
    assert (root / MANIFEST_NAME).read_bytes() == reference
    assert tree_bytes(root) == tree_bytes(clean)
    assert exits.check_exit(check(root, catalog)) == exits.OK


def test_staging_leftovers_are_unfinished_and_apply_removes_them(tmp_path: Path) -> None:
    catalog = _catalog(tmp_path)
    root = _checkout(tmp_path)
    apply(root, catalog)
    complete = tree_bytes(root)
    leftovers = [STAGED, "verl/.target.py.a1b2c3.ti-tmp", "verl/utils/tracing/.trace.py.d4e5f6.ti-tmp"]
    for leftover in leftovers:
        (root / leftover).parent.mkdir(parents=True, exist_ok=True)  # (this catalog ships no runtime)
        (root / leftover).write_text("half a file", encoding="utf-8")
    (root / "verl" / ".cache.ti-tmp.bak").write_text("not ours: another name", encoding="utf-8")
    found = check(root, catalog).unfinished
    assert [(p.status, p.reason) for p in found] == [(Status.UNFINISHED, Reason.STAGING_LEFTOVERS)]
    assert all(path in found[0].message for path in leftovers) and "3 staged copies" in found[0].message
    assert exits.check_exit(check(root, catalog)) == exits.FAILED
    with checkout_lock(root):  # a run writing now: its staged copies are work in progress
        assert _unfinished(root, catalog) == []
    dry = apply(root, catalog, write=False)
    assert sorted(c.path for c in dry.other_changes) == sorted(leftovers)  # shown, never in a patch
    assert apply(root, catalog).written
    assert not [p for p in tree_bytes(root) if p.endswith(".ti-tmp")] and not (root / STAGED).exists()
    assert tree_bytes(root) == {**complete, "verl/.cache.ti-tmp.bak": b"not ours: another name"}
    assert _unfinished(root, catalog) == []


def test_the_report_does_not_vouch_for_a_tree_a_killed_run_left(tmp_path: Path) -> None:
    catalog = _catalog(tmp_path)
    root = _checkout(tmp_path)
    apply(root, catalog)
    (root / STAGED).write_text("{", encoding="utf-8")
    rep = report(root, catalog)
    assert [(p.status, p.reason) for p in rep.not_in_place] == [(Status.UNFINISHED, Reason.STAGING_LEFTOVERS)]
    assert not rep.ok


def test_remove_takes_the_leftovers_out_with_the_code(tmp_path: Path) -> None:
    catalog = _catalog(tmp_path)
    root = _checkout(tmp_path)
    apply(root, catalog)
    (root / STAGED).write_text("{", encoding="utf-8")
    (root / "verl" / ".target.py.a1b2c3.ti-tmp").write_text("half a file", encoding="utf-8")
    assert exits.remove_exit(remove(root, catalog)) == exits.OK
    assert tree_bytes(root) == {"verl/target.py": TRAINER.encode()}
    assert sorted(p.name for p in root.iterdir()) == ["verl"]


def test_check_json_names_the_problem_and_validates(tmp_path: Path) -> None:
    catalog_dir = tmp_path / "spec"
    catalog = _catalog(tmp_path)
    root = _checkout(tmp_path)
    apply(root, catalog)
    (root / MANIFEST_NAME).unlink()
    (root / STAGED).write_text("{", encoding="utf-8")
    outcome = CliRunner().invoke(app, ["check", "--format", "json", "--anchors", str(catalog_dir), str(root)])
    body = json.loads(outcome.output)
    jsonschema.validate(body, jsonout.schema("check"), cls=jsonschema.Draft202012Validator)
    tree = [(p["id"], p["status"], p["reason"], p["file"]) for p in body["points"] if p["status"] == "unfinished"]
    assert tree == [
        ("tree", "unfinished", "no-manifest", MANIFEST_NAME),
        ("tree", "unfinished", "staging-leftovers", STAGED),
    ]
    assert outcome.exit_code == body["exit_code"] == exits.FAILED
    assert body["summary"]["by_status"]["unfinished"] == 2 and not body["summary"]["clean"]
    text = CliRunner().invoke(app, ["check", "--quiet", "--anchors", str(catalog_dir), str(root)])
    assert "unfinished" in text.output and "tree: 2 unfinished" in text.output
    checked = check(root, load_catalog([catalog_dir], shipped=False))
    annotations = [line for line in github_annotations(checked).splitlines() if "title=unfinished%3A tree" in line]
    assert [line.split(",", 1)[0] for line in annotations] == [
        f"::error file={MANIFEST_NAME}",
        f"::error file={STAGED}",
    ]
    failing = ElementTree.fromstring(junit_xml(checked)).findall(".//testcase[@classname='tree']/failure")
    assert [f.get("type") for f in failing] == ["unfinished", "unfinished"]


def test_without_a_clean_apply_that_gives_the_tree_back_apply_records_what_the_tree_tells(tmp_path: Path) -> None:
    """A hand edit of a point's code: no clean apply gives this tree back (remove keeps the point),
    so the manifest is the one apply writes from the tree, and the tree is left as it is."""
    catalog = _catalog(tmp_path)
    root = _checkout(tmp_path)
    apply(root, catalog)
    (root / MANIFEST_NAME).unlink()
    target = root / "verl" / "target.py"
    target.write_text(target.read_text(encoding="utf-8").replace("_started = ", "_started  =  "), encoding="utf-8")
    edited = tree_bytes(root)
    assert clean_manifest(root, catalog, Selection(), {"verl/target.py": edited["verl/target.py"]}) is None
    apply(root, catalog)
    assert tree_bytes(root) == edited
    assert json.loads((root / MANIFEST_NAME).read_bytes())["points"]


@pytest.mark.e2e
def test_an_instrumented_090_without_its_manifest_gets_the_clean_manifest_back(
    instrumented_090: Path, applied_090: Path, catalog: Catalog
) -> None:
    (instrumented_090 / MANIFEST_NAME).unlink()
    checked = check(instrumented_090, catalog)
    assert [p.reason for p in checked.unfinished] == [Reason.NO_MANIFEST]
    assert exits.check_exit(checked) == exits.FAILED
    assert apply(instrumented_090, catalog).written
    assert (instrumented_090 / MANIFEST_NAME).read_bytes() == (applied_090 / MANIFEST_NAME).read_bytes()
    assert exits.check_exit(check(instrumented_090, catalog)) == exits.OK


@pytest.mark.slow
@pytest.mark.e2e
def test_a_sigkill_between_the_last_rename_and_the_manifests_is_named_and_repaired(
    verl_090: Path, applied_090: Path, catalog: Catalog, tmp_path: Path
) -> None:
    """The tool's pause hook after each rename: a first run counts them, a second is killed in the
    pause after the last file's rename (the manifest's is the last). The tree then holds every
    file complete, no manifest and the manifest's staged copy."""
    counted = copy_tree(verl_090, tmp_path / "counted")
    env = {**os.environ, PAUSE_AT_ENV: "renames", PAUSE_ENV: "0"}
    run = subprocess.run(
        [sys.executable, "-m", "trace_instrument", "apply", str(counted)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    renames = run.stderr.count("trace-instrument: paused at renames\n")
    assert run.returncode == 0 and renames > 2

    root = copy_tree(verl_090, tmp_path / "killed")
    env[PAUSE_ENV] = "0.3"
    process = subprocess.Popen(
        [sys.executable, "-m", "trace_instrument", "apply", str(root)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    for _ in range(renames - 1):  # every rename but the manifest's done: killed in that pause
        assert process.stderr.readline() == "trace-instrument: paused at renames\n"
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=60)
    assert tree_bytes(root) == tree_bytes(applied_090)  # every file complete, none staged under verl/
    staged = [p.name for p in root.iterdir() if p.name.endswith(".ti-tmp")]
    assert len(staged) == 1 and staged[0].startswith(f".{MANIFEST_NAME}.")
    assert not (root / MANIFEST_NAME).exists()

    checked = check(root, catalog)
    assert sorted(p.reason.value for p in checked.unfinished if p.reason) == ["no-manifest", "staging-leftovers"]
    assert exits.check_exit(checked) == exits.FAILED
    assert apply(root, catalog).written
    assert (root / MANIFEST_NAME).read_bytes() == (applied_090 / MANIFEST_NAME).read_bytes()
    assert not [p for p in root.iterdir() if p.name.endswith(".ti-tmp")]
    assert tree_bytes(root) == tree_bytes(applied_090)
    assert exits.check_exit(check(root, catalog)) == exits.OK
