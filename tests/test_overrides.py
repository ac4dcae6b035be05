"""A fork re-anchors a built-in point with `overrides: ID` (examples/overrides/).

The fork in these tests renamed `reward_extra_infos_dict` to `reward_extras` in
RayPPOTrainer.fit of the real verl 0.9.0 tree, which loses the anchors of two
shipped points. The refusals (unknown id, twice, template/code, missing edits,
...) are fixtures under tests/fixtures/spec/ (test_anchor_schema.py).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from support import TESTS, copy_tree, tree_bytes
from typer.testing import CliRunner

from trace_instrument.cli import app
from trace_instrument.engine.apply import apply
from trace_instrument.engine.check import check
from trace_instrument.engine.manifest import Manifest
from trace_instrument.engine.remove import remove
from trace_instrument.engine.verify import verify
from trace_instrument.model import Catalog, Status
from trace_instrument.spec import load_catalog

OVERRIDES = TESTS.parent / "examples" / "overrides"
TRAINER = "verl/trainer/ppo/ray_trainer.py"
OVERRIDDEN = {"flow.v0.train-reward", "progress.v0.reward"}


def _renamed(text: str) -> str:
    """The fork's edit: the name changes from `def fit` on (fit is the file's last method)."""
    start = text.index("    def fit(self):")
    assert text.count("reward_extra_infos_dict", start) == 6
    return text[:start] + text[start:].replace("reward_extra_infos_dict", "reward_extras")


def _fork(verl_090: Path, destination: Path) -> Path:
    root = copy_tree(verl_090, destination)
    trainer = root / TRAINER
    trainer.write_text(_renamed(trainer.read_text(encoding="utf-8")), encoding="utf-8")
    return root


def _core(catalog: Catalog) -> set[str]:
    return {p.id for p in catalog.points if p.extra is None}


def test_the_rename_loses_the_two_shipped_anchors(verl_090, tmp_path, catalog):
    root = _fork(verl_090, tmp_path / "fork")
    statuses = {p.point_id: p.status for p in check(root, catalog).points}
    assert {i for i, s in statuses.items() if s is Status.ANCHOR_LOST} == OVERRIDDEN
    result = apply(root, catalog)
    assert {p.point_id for p in result.points if p.status is Status.ANCHOR_LOST} == OVERRIDDEN


def test_the_overridden_points_keep_everything_but_their_place(catalog):
    mine = load_catalog([OVERRIDES])
    assert [p.id for p in mine.points] == [p.id for p in catalog.points]
    for point_id in OVERRIDDEN:
        shipped, moved = catalog.point(point_id), mine.point(point_id)
        assert (moved.facility, moved.title, moved.file, moved.scope) == (
            shipped.facility,
            shipped.title,
            shipped.file,
            shipped.scope,
        )
        assert [e.template.text for e in moved.edits] == [e.template.text for e in shipped.edits]
        assert [e.rank for e in moved.edits] == [e.rank for e in shipped.edits]
        assert (moved.markers, moved.requires, moved.imports, moved.extra) == (
            shipped.markers,
            shipped.requires,
            shipped.imports,
            shipped.extra,
        )
        assert moved.source.file.endswith("renamed_reward_extras.yaml")
    anchor_texts = [a.target.text for e in mine.point("progress.v0.reward").edits for a in e.anchors]
    assert anchor_texts == [
        'with marked_timer("reward", ...): ...',
        "reward_tensor, reward_extras = extract_reward(batch)",
    ]


def test_apply_check_verify_remove_with_the_override(verl_090, tmp_path, catalog):
    root = _fork(verl_090, tmp_path / "fork")
    renamed = tree_bytes(root)
    mine = load_catalog([OVERRIDES])

    result = apply(root, mine)
    assert result.written and not result.error
    assert {p.point_id for p in result.points} == _core(catalog)
    assert {p.status for p in result.points} == {Status.APPLIED}

    checked = check(root, mine)
    assert {p.point_id for p in checked.points} == _core(catalog)
    assert {p.status for p in checked.points} == {Status.PRESENT}
    verified = verify(root, mine)
    assert verified.ok, [f for f in verified.findings if not f.ok]

    remove(root, mine)
    assert tree_bytes(root) == renamed


def test_the_fork_gets_the_bytes_and_manifest_of_the_shipped_points(verl_090, tmp_path, catalog):
    """Instrumenting the fork with the override = instrumenting upstream, then renaming."""
    upstream = copy_tree(verl_090, tmp_path / "upstream")
    apply(upstream, catalog)
    fork = _fork(verl_090, tmp_path / "fork")
    apply(fork, load_catalog([OVERRIDES]))

    expected = tree_bytes(upstream)
    expected[TRAINER] = _renamed(expected[TRAINER].decode("utf-8")).encode("utf-8")
    assert tree_bytes(fork) == expected
    # the manifest identity of every point (id -> file and templates) is the shipped one
    assert Manifest.load(fork).points == Manifest.load(upstream).points
    assert OVERRIDDEN <= set(Manifest.load(fork).points)


def test_the_command_line_takes_the_override_folder(verl_090, tmp_path):
    root = _fork(verl_090, tmp_path / "fork")
    runner = CliRunner()
    plain = runner.invoke(app, ["check", str(root)], catch_exceptions=False)
    assert plain.exit_code == 1 and "anchor-lost" in plain.output
    applied = runner.invoke(app, ["apply", "--anchors", str(OVERRIDES), str(root)], catch_exceptions=False)
    assert applied.exit_code == 0, applied.output
    checked = runner.invoke(app, ["check", "--anchors", str(OVERRIDES), str(root)], catch_exceptions=False)
    assert checked.exit_code == 0, checked.output


def test_a_bad_override_is_refused_with_file_and_line(verl_090, tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "mine.yaml").write_text(
        "file: verl/trainer/ppo/ray_trainer.py\npoints:\n  - overrides: flow.v0.train-rewards\n    scope: f\n",
        encoding="utf-8",
    )
    result = CliRunner().invoke(app, ["points", "--anchors", str(folder)], catch_exceptions=False)
    assert result.exit_code == 2
    assert "mine.yaml:3 (overrides): overrides unknown point 'flow.v0.train-rewards'" in result.output
    assert "did you mean 'flow.v0.train-reward'" in result.output


# -- scope and file: a fork that moved a method to a file of its own ---------------------------------

BASE_SPEC = """
file: verl/trainer.py
points:
  - id: user.loaded
    facility: progress
    title: "after the data is loaded"
    scope: Trainer.fit
    after: |
      data = load()
    code: |
      log_progress('data loaded')
"""
FORK_SPEC = """
file: verl/fork/loop.py
points:
  - overrides: user.loaded
    scope: Loop.run
"""
FORK_CODE = """
class Loop:
    def run(self):
        data = load()
        return data
"""


def _spec_folder(root: Path, name: str, text: str) -> Path:
    folder = root / name
    folder.mkdir()
    (folder / f"{name}.yaml").write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return folder


def test_an_override_moves_a_point_to_another_file_and_scope(tmp_path):
    specs = tmp_path / "specs"
    specs.mkdir()
    catalog = load_catalog(
        [_spec_folder(specs, "base", BASE_SPEC), _spec_folder(specs, "fork", FORK_SPEC)], shipped=False
    )
    point = catalog.point("user.loaded")
    assert (point.file, point.scope) == ("verl/fork/loop.py", "Loop.run")

    root = tmp_path / "checkout"
    (root / "verl" / "fork").mkdir(parents=True)
    target = root / "verl" / "fork" / "loop.py"
    target.write_text(FORK_CODE.lstrip(), encoding="utf-8")
    before = target.read_bytes()
    result = apply(root, catalog)
    assert [(p.point_id, p.status) for p in result.points] == [("user.loaded", Status.APPLIED)]
    lines = [line.strip() for line in target.read_text(encoding="utf-8").splitlines()]
    assert lines[lines.index("data = load()") + 1] == "log_progress('data loaded')"
    assert "from verl.utils.tracing import log_progress" in lines
    assert [p.status for p in check(root, catalog).points] == [Status.PRESENT]
    remove(root, catalog)
    assert target.read_bytes() == before
