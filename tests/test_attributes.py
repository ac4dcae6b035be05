"""Attributes the inserted code reads on `self` must be set by its class or a base in the checkout.

A fork that renames `self.global_steps` leaves the tracing reading an attribute nothing sets: an
AttributeError on every step that no name check sees. apply refuses such a point, check calls a
placed one broken, also when the rename is in a base class in another file (and a cached result
of the subclass's file is not used once that file changed); an unknown base means "cannot tell".
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

from trace_instrument.caches import PickleCache
from trace_instrument.engine import check as check_module
from trace_instrument.engine.apply import apply
from trace_instrument.engine.check import check
from trace_instrument.model import Catalog, Reason, Status
from trace_instrument.render import exits
from trace_instrument.spec import load_catalog

SPEC = """\
file: verl/trainer.py
points:
  - id: t.banner
    facility: progress
    title: the step banner (reads self.global_steps)
    scope: Trainer.fit
    after: |
      batch = next(self.loader)
    code: |
      log_progress(f'step {self.global_steps}')
"""
BASE = """\
class Base:
    def __init__(self):
        self.loader = iter(())
        self.global_steps = 0
"""
TRAINER = """\
from verl.base import Base


class Trainer(Base):
    def fit(self):
        batch = next(self.loader)
        return batch
"""


def _catalog(tmp_path: Path) -> Catalog:
    folder = tmp_path / "spec"
    folder.mkdir(exist_ok=True)
    (folder / "spec.yaml").write_text(SPEC, encoding="utf-8")
    return load_catalog([folder], shipped=False)


def _checkout(tmp_path: Path, base: str = BASE, trainer: str = TRAINER) -> Path:
    root = tmp_path / "checkout"
    (root / "verl").mkdir(parents=True)
    (root / "verl" / "base.py").write_text(base, encoding="utf-8")
    (root / "verl" / "trainer.py").write_text(trainer, encoding="utf-8")
    return root


def _reads_where_placed(stmts: tuple[ast.stmt, ...], name: str) -> bool:
    """Does the code read `self.<name>` outside the defs it defines?"""
    pending: list[ast.AST] = list(stmts)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if isinstance(node, ast.Attribute) and node.attr == name and getattr(node.value, "id", "") == "self":
            return True
        pending.extend(ast.iter_child_nodes(node))
    return False


def _banner(result):  # type: ignore[no-untyped-def]
    return next(p for p in result.points if p.point_id == "t.banner")


def test_an_attribute_set_by_a_base_in_another_file_is_set(tmp_path: Path) -> None:
    result = apply(_checkout(tmp_path), _catalog(tmp_path))
    assert _banner(result).status is Status.APPLIED


def test_a_renamed_attribute_in_a_base_in_another_file_refuses_the_point(tmp_path: Path) -> None:
    root = _checkout(tmp_path, base=BASE.replace("self.global_steps", "self.global_step"))
    result = apply(root, _catalog(tmp_path))
    banner = _banner(result)
    assert (banner.status, banner.reason) == (Status.REFUSED, Reason.UNSET_ATTRIBUTE)
    assert [(n.name, n.binding) for n in banner.names] == [("self.global_steps", "Trainer")]
    assert (root / "verl" / "trainer.py").read_text(encoding="utf-8") == TRAINER


def test_a_base_outside_the_checkout_cannot_tell_and_refuses_nothing(tmp_path: Path) -> None:
    trainer = TRAINER.replace("from verl.base import Base", "from somewhere_else import Base")
    result = apply(_checkout(tmp_path, trainer=trainer), _catalog(tmp_path))
    assert _banner(result).status is Status.APPLIED


def test_a_rename_in_the_base_after_apply_breaks_the_point_even_with_a_cached_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRACE_INSTRUMENT_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("TRACE_INSTRUMENT_NO_CACHE", raising=False)
    monkeypatch.setattr(check_module, "_CACHE", PickleCache("check"))
    catalog = _catalog(tmp_path)
    root = _checkout(tmp_path)
    assert exits.apply_exit(apply(root, catalog)) == exits.OK
    assert exits.check_exit(check(root, catalog)) == exits.OK  # and cached
    base = root / "verl" / "base.py"
    base.write_text(BASE.replace("self.global_steps", "self.global_step"), encoding="utf-8")
    banner = _banner(check(root, catalog))
    assert (banner.status, banner.reason) == (Status.BROKEN, Reason.UNSET_ATTRIBUTE)
    base.write_text(BASE, encoding="utf-8")
    assert _banner(check(root, catalog)).status is Status.PRESENT


def test_a_fork_that_renames_global_steps_gets_no_point_reading_it(
    verl_090: Path, catalog: Catalog, tmp_path: Path
) -> None:
    tree = tmp_path / "fork"
    shutil.copytree(verl_090, tree)
    trainer = tree / "verl" / "trainer" / "ppo" / "ray_trainer.py"
    text = trainer.read_text(encoding="utf-8")
    assert text.count("self.global_steps") > 10
    trainer.write_text(text.replace("self.global_steps", "self.global_step"), encoding="utf-8")
    result = apply(tree, catalog)
    refused = {p.point_id for p in result.points if p.reason is Reason.UNSET_ATTRIBUTE}
    readers = {
        p.id
        for p in catalog.points
        if p.file == "verl/trainer/ppo/ray_trainer.py"
        and p.scope.startswith("RayPPOTrainer")
        and any(_reads_where_placed(e.template.stmts, "global_steps") for e in p.edits)
    }
    # every point of RayPPOTrainer whose code reads self.global_steps where it is placed (a method it
    # defines reads it when called), but those whose anchor went with the rename (the record-metrics
    # anchor names self.global_steps itself)
    lost = {p.point_id for p in result.points if p.status is Status.ANCHOR_LOST}
    assert refused == readers - lost and refused
    statuses = {p.point_id: p.status for p in check(tree, catalog).points}
    assert {statuses[point_id] for point_id in refused} == {Status.REFUSED}  # nothing of them was written
