"""A held-out check of the gate: other harmless edits, at other anchors, on other trees.

The harmless-edit family (issue 39) was built on verl 0.9.0 around `extract_reward(batch)` in
`RayPPOTrainer.fit`. Here the edits are others, at other anchors, on verl 0.9.1 and 0.8.0: a
comment above the `kwargs = ...` anchor of `flow.v0.task-started` in agent_loop.py, and a
business line (one the inserted code does not read) after the `_compute_ref_log_prob(batch)`
anchor of `flow.v0.train-ref-logprob` in ray_trainer.py. check stays clean, exit 0. Each has a red
twin at the same place: a line that changes what the inserted code reads, and that point alone is
`moved`, naming that line, exit 1.

The points each anchor serves are read from the catalog, and every line number from the edited text.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from support import copy_checkout, copy_tree
from typer.testing import CliRunner

from trace_instrument.cli import app
from trace_instrument.engine.apply import apply
from trace_instrument.engine.check import check
from trace_instrument.model import Catalog, Status

AGENT_LOOP = "verl/experimental/agent_loop/agent_loop.py"
RAY_TRAINER = "verl/trainer/ppo/ray_trainer.py"
KWARGS_ANCHOR = 'kwargs = {k: v[i] for k, v in batch.non_tensor_batch.items() if k != "__do_sample__"}'
REF_ANCHOR = "ref_log_prob = self._compute_ref_log_prob(batch)"
RELEASES = ("0.9.1", "0.8.0")


@pytest.fixture(scope="module")
def applied_trees(verl_release: Callable[[str], Path], catalog: Catalog, tmp_path_factory) -> dict[str, Path]:
    """Each release with the whole catalog applied, once for the module; never written by a test."""
    trees = {}
    for version in RELEASES:
        root = copy_tree(verl_release(version), tmp_path_factory.mktemp(f"applied-{version}"))
        assert apply(root, catalog).written
        trees[version] = root
    return trees


def _fresh(applied_trees: dict[str, Path], version: str, tmp_path: Path) -> Path:
    return copy_checkout(applied_trees[version], tmp_path / "checkout")


def _edit(root: Path, relative: str, anchor: str, line: str, *, above: bool) -> int:
    """`line` at the anchor's indentation, above or right after the anchor (found once); its line number."""
    path = root / relative
    lines = path.read_text(encoding="utf-8").splitlines(True)
    found = [number for number, text in enumerate(lines) if text.strip() == anchor]
    assert len(found) == 1, f"{anchor!r} occurs {len(found)} times in {relative}"
    at = found[0]
    indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
    index = at if above else at + 1
    lines.insert(index, indent + line + "\n")
    path.write_text("".join(lines), encoding="utf-8")
    return index + 1


def _served_by(catalog: Catalog, relative: str, anchor: str) -> set[str]:
    """The points of `relative` whose edits name `anchor` (from the catalog, not from check)."""
    return {p.id for p in catalog.points if p.file == relative and p.extra is None and anchor in str(p.edits)}


def _check_exit(root: Path) -> int:
    return CliRunner().invoke(app, ["check", "--quiet", str(root)], catch_exceptions=False).exit_code


@pytest.mark.parametrize("version", RELEASES)
def test_a_comment_above_an_anchor_and_a_business_line_after_another_keep_check_clean(
    applied_trees: dict[str, Path], catalog: Catalog, version: str, tmp_path: Path
) -> None:
    root = _fresh(applied_trees, version, tmp_path)
    before = {p.point_id: p.status for p in check(root, catalog).points}
    assert _served_by(catalog, AGENT_LOOP, KWARGS_ANCHOR) and _served_by(catalog, RAY_TRAINER, REF_ANCHOR)
    served = _served_by(catalog, AGENT_LOOP, KWARGS_ANCHOR) | _served_by(catalog, RAY_TRAINER, REF_ANCHOR)
    assert {before[i] for i in served} == {Status.PRESENT}
    _edit(root, AGENT_LOOP, KWARGS_ANCHOR, "# fork: each sample's own arguments", above=True)
    _edit(root, RAY_TRAINER, REF_ANCHOR, 'timing_raw["fork_ref_seen"] = 1.0', above=False)
    after = {p.point_id: p.status for p in check(root, catalog).points}
    assert after == before
    assert _check_exit(root) == 0


@pytest.mark.parametrize("version", RELEASES)
@pytest.mark.parametrize(
    ("relative", "anchor", "line", "reads"),
    [
        (AGENT_LOOP, KWARGS_ANCHOR, 'kwargs["uid"] = f"fork-{i}"', "`kwargs`"),
        (RAY_TRAINER, REF_ANCHOR, "self.global_steps += 1", "`self.global_steps`"),
    ],
    ids=["agent-loop-kwargs", "ray-trainer-global-steps"],
)
def test_a_line_after_the_anchor_that_changes_what_the_code_reads_is_moved(
    applied_trees: dict[str, Path],
    catalog: Catalog,
    version: str,
    relative: str,
    anchor: str,
    line: str,
    reads: str,
    tmp_path: Path,
) -> None:
    root = _fresh(applied_trees, version, tmp_path)
    number = _edit(root, relative, anchor, line, above=False)
    unclean = [p for p in check(root, catalog).points if p.status not in (Status.PRESENT, Status.NOT_APPLICABLE)]
    served = _served_by(catalog, relative, anchor)
    assert unclean and {p.point_id for p in unclean} <= served
    assert {p.status for p in unclean} == {Status.MOVED}
    assert all(f"(line {number})" in p.message and reads in p.message for p in unclean), [p.message for p in unclean]
    assert _check_exit(root) == 1
