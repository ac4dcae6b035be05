"""Bad input gets a clear error and loses nothing."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from support import tree_bytes
from typer.testing import CliRunner

from trace_instrument.cli import app
from trace_instrument.engine.apply import apply
from trace_instrument.model import Status
from trace_instrument.spec import load_catalog

TRAINER = "verl/trainer/ppo/ray_trainer.py"
runner = CliRunner()


def _cli(*args):
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)


def test_not_a_verl_checkout(tmp_path):
    (tmp_path / "verl").mkdir()
    result = _cli("apply", tmp_path / "verl")
    assert result.exit_code == 2 and "did you mean its parent?" in result.output


def test_syntax_error_names_the_file_and_writes_nothing(checkout_090):
    target = checkout_090 / "verl/trainer/ppo/v1/trainer_sync.py"
    target.write_text(target.read_text() + "\nif True\n    pass\n")
    before = tree_bytes(checkout_090)
    result = _cli("apply", checkout_090)
    assert result.exit_code == 2
    assert "verl/trainer/ppo/v1/trainer_sync.py" in result.output and "syntax error" in result.output
    assert "--keep-going" in result.output
    assert tree_bytes(checkout_090) == before


def test_read_only_file_is_refused_with_advice(checkout_090):
    target = checkout_090 / TRAINER
    target.chmod(0o444)
    before = tree_bytes(checkout_090)
    result = _cli("apply", checkout_090)
    assert result.exit_code == 2
    assert "read-only" in result.output and "chmod u+w" in result.output
    assert tree_bytes(checkout_090) == before


def test_symlink_leading_outside_is_refused(checkout_090, tmp_path):
    outside = tmp_path / "elsewhere.py"
    target = checkout_090 / TRAINER
    outside.write_bytes(target.read_bytes())
    target.unlink()
    os.symlink(outside, target)
    result = apply(checkout_090, _catalog())
    trainer = next(f for f in result.files if f.path == TRAINER)
    assert "outside the checkout; refusing" in str(trainer.error)
    assert not result.written
    assert outside.read_bytes().count(b"trace_flow") == 0


def test_symlink_inside_the_checkout_stays_a_link(checkout_090):
    target = checkout_090 / TRAINER
    real = checkout_090 / "verl/trainer/ppo/real_ray_trainer.py"
    target.rename(real)
    os.symlink("real_ray_trainer.py", target)
    assert apply(checkout_090, _catalog()).written
    assert target.is_symlink() and b"trace_flow(" in real.read_bytes()


LINKED_SPEC = """\
file: verl/{name}.py
points:
  - id: user.{name}
    facility: progress
    title: a point in {name}.py (a.py is a link to b.py)
    scope: f
    {where}: |
      {anchor}
    code: |
      log_progress('{name}')
"""


def test_two_paths_to_one_file_are_refused_before_anything_is_written(tmp_path):
    """Each path's edit is made on its own, so neither holds the other: writing is refused, whole."""
    spec = tmp_path / "spec"
    spec.mkdir()
    (spec / "a.yaml").write_text(LINKED_SPEC.format(name="a", where="after", anchor="x = 1"))
    (spec / "b.yaml").write_text(LINKED_SPEC.format(name="b", where="before", anchor="return x"))
    root = tmp_path / "checkout"
    (root / "verl").mkdir(parents=True)
    (root / "verl/b.py").write_text("def f():\n    x = 1\n    return x\n")
    os.symlink("b.py", root / "verl/a.py")
    before = tree_bytes(root)
    result = apply(root, load_catalog([spec], shipped=False))
    assert not result.written and result.error is not None
    assert "are one file (a link)" in result.error.message
    assert tree_bytes(root) == before, "nothing written, not even the runtime package"


def test_non_utf8_bytes_are_reported(checkout_090):
    target = checkout_090 / TRAINER
    target.write_bytes(target.read_bytes().replace(b"# training metrics", b"# training m\xe9trics", 1))
    result = apply(checkout_090, _catalog())
    trainer = next(f for f in result.files if f.path == TRAINER)
    assert "not valid text in its declared encoding" in str(trainer.error)
    assert not result.written


def test_a_declared_encoding_is_kept(checkout_090):
    target = checkout_090 / "verl/trainer/ppo/v1/trainer_sync.py"
    text = target.read_text(encoding="utf-8").replace(
        "# update weights after", "# m\u00e9triques: update weights after", 1
    )
    target.write_bytes(b"# -*- coding: latin-1 -*-\n" + text.encode("latin-1", errors="strict"))
    result = apply(checkout_090, _catalog())
    assert result.written
    data = target.read_bytes()
    assert b"# m\xe9triques: update weights after" in data and b"trace_flow(" in data


@pytest.mark.slow
def test_the_patch_of_a_latin1_file_applies_with_git(checkout_090, tmp_path):
    """The patch holds each file's lines in its own encoding, so `git apply` finds its context."""
    target = checkout_090 / "verl/trainer/ppo/v1/trainer_sync.py"
    logger = "logger = logging.getLogger(__name__)\n"  # a context line of the import the patch adds
    text = target.read_text(encoding="utf-8").replace(logger, logger.replace("\n", "  # journal d'\u00e9tapes\n"), 1)
    target.write_bytes(b"# -*- coding: latin-1 -*-\n" + text.encode("latin-1", errors="strict"))
    pristine = tmp_path / "pristine"
    shutil.copytree(checkout_090, pristine)
    patch = tmp_path / "change.patch"
    assert _cli("apply", "--patch", patch, checkout_090).exit_code == 0
    assert tree_bytes(checkout_090) == tree_bytes(pristine), "--patch writes nothing else"
    subprocess.run(["git", "apply", "--unsafe-paths", "--directory", ".", str(patch)], cwd=pristine, check=True)
    assert apply(checkout_090, _catalog()).written
    assert (pristine / "verl/trainer/ppo/v1/trainer_sync.py").read_bytes() == target.read_bytes()


def test_overlapping_user_anchors_are_refused(checkout_090, tmp_path):
    anchors = tmp_path / "mine"
    anchors.mkdir()
    (anchors / "mine.yaml").write_text(
        """
file: verl/experimental/agent_loop/agent_loop.py
points:
  - id: mine.wrap-run
    facility: trajectory
    title: my own wrapper around the same two statements C1 rewrites
    scope: AgentLoopWorker._run_agent_loop
    changes_behaviour: times the agent run
    imports: ["from contextlib import nullcontext as my_timer"]
    rewrite: |
      output: AgentLoopOutput = await agent_loop.run(sampling_params, **kwargs)
    code: |
      with my_timer():
          __anchor_0__
    marker: |
      with my_timer(): ...
""".lstrip(),
        encoding="utf-8",
    )
    from trace_instrument.spec import load_catalog

    result = apply(checkout_090, load_catalog([anchors]))
    statuses = {p.point_id: p for p in result.points}
    for point_id in ("mine.wrap-run", "traj.c1.central-dump"):
        assert statuses[point_id].status is Status.AMBIGUOUS
        assert "overlaps point" in statuses[point_id].message


def test_user_anchor_folder_problems_exit_2(tmp_path, checkout_090):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "x.yaml").write_text("file: ../../etc/x.py\npoints: []\n")
    result = _cli("apply", "--anchors", bad, checkout_090)
    assert result.exit_code == 2
    assert "x.yaml:1 (file)" in result.output and "inside the checkout" in result.output
    missing = _cli("points", "--anchors", tmp_path / "nope")
    assert missing.exit_code == 2 and "anchor folder not found" in missing.output


def _catalog():
    from trace_instrument.spec import load_catalog

    return load_catalog()


def test_remove_keeps_a_users_own_import_that_apply_did_not_add(checkout_090):
    target = checkout_090 / "verl/experimental/agent_loop/agent_loop.py"
    text = target.read_text()
    assert "import time\n" not in text
    target.write_text(text.replace("import random\n", "import random\nimport time\n", 1))  # unused, the user's
    mine = target.read_bytes()
    catalog = _catalog()
    assert apply(checkout_090, catalog).written
    instrumented = target.read_text()
    assert "TrajectoryTracker" in instrumented and instrumented.count("import time\n") == 1, "apply uses the user's"
    from trace_instrument.engine.remove import remove

    assert remove(checkout_090, catalog).written
    assert target.read_bytes() == mine


def test_a_crlf_file_stays_crlf_even_inside_inserted_docstrings(checkout_090):
    target = checkout_090 / "verl/trainer/ppo/v1/trainer_base.py"  # gets a helper with a multi-line docstring
    original = target.read_bytes().replace(b"\n", b"\r\n")
    target.write_bytes(original)
    catalog = _catalog()
    apply(checkout_090, catalog)
    data = target.read_bytes()
    assert b"_trace_ids_from_batch" in data and data.count(b"\r\n") == data.count(b"\n")
    from trace_instrument.engine.remove import remove

    remove(checkout_090, catalog)
    assert target.read_bytes() == original
