"""Attributes the inserted code reads on `self` must be set by its class or a base in the checkout.

A fork that renames `self.global_steps` leaves the tracing reading an attribute nothing sets: an
AttributeError on every step that no name check sees. apply refuses such a point, check calls a
placed one broken, also when the rename is in a base class in another file (and a cached result
of the subclass's file is not used once that file changed); an unknown base means "cannot tell".
"""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

import pytest

from trace_instrument.caches import PickleCache
from trace_instrument.engine import check as check_module
from trace_instrument.engine.apply import apply
from trace_instrument.engine.check import check
from trace_instrument.engine.verify import verify
from trace_instrument.model import Catalog, Check, Reason, Status
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


def _reads(stmts: tuple[ast.stmt, ...], name: str) -> bool:
    """Does the code read `self.<name>`, where it is placed or in a method it defines?"""
    return any(
        isinstance(node, ast.Attribute) and node.attr == name and getattr(node.value, "id", "") == "self"
        for stmt in stmts
        for node in ast.walk(stmt)
    )


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
        and any(_reads(e.template.stmts, "global_steps") for e in p.edits)
    }
    # every point of RayPPOTrainer whose code reads self.global_steps, where it is placed or in a
    # method it defines (progress.v0.fetch-method: it raises when called as surely), but those whose
    # anchor went with the rename (the record-metrics anchor names self.global_steps itself)
    lost = {p.point_id for p in result.points if p.status is Status.ANCHOR_LOST}
    assert refused == readers - lost and refused
    statuses = {p.point_id: p.status for p in check(tree, catalog).points}
    assert {statuses[point_id] for point_id in refused} == {Status.REFUSED}  # nothing of them was written


# -- a method a point inserts: the fork renames global_steps in both trainers ------------------------

TRAINERS = ("verl/trainer/ppo/ray_trainer.py", "verl/experimental/separation/ray_trainer.py")
FETCH_METHOD, FETCH_WRAPPER = "progress.v0.fetch-method", "progress.sep.fetch-wrapper"


def _rename_global_steps(root: Path, pristine: Path) -> None:
    """The fork renames self.global_steps in its own code: the lines verl has (tracing code's stay)."""
    for relative in TRAINERS:
        verl_lines = {line for line in (pristine / relative).read_text(encoding="utf-8").splitlines()}
        path = root / relative
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        renamed = [
            line.replace("self.global_steps", "self.global_step") if line.rstrip("\r\n") in verl_lines else line
            for line in lines
        ]
        assert renamed != lines, relative
        path.write_text("".join(renamed), encoding="utf-8")


def _cli(*args: object):  # type: ignore[no-untyped-def]
    from typer.testing import CliRunner

    from trace_instrument.cli import app

    return CliRunner().invoke(app, [str(a) for a in args])


@pytest.mark.e2e
def test_the_fetch_method_of_a_fork_renaming_global_steps_is_refused_and_its_loop_with_it(
    checkout_090: Path, verl_090: Path, catalog: Catalog
) -> None:
    """The issue's fork: the inline readers refused and skipped in the project configuration, the
    method that reads self.global_steps in its log lines was placed and the separated trainer looped
    over it (AttributeError on the first batch). Now the method is refused as the inline code is,
    the loop's rewrite with it, and nothing written reads the attribute the fork renamed."""
    _rename_global_steps(checkout_090, verl_090)
    planned = {p.point_id: p for p in check(checkout_090, catalog).points}
    method = planned[FETCH_METHOD]
    assert (method.status, method.reason) == (Status.REFUSED, Reason.UNSET_ATTRIBUTE)
    assert [n.name for n in method.names] == ["self.global_steps"]
    assert (planned[FETCH_WRAPPER].status, planned[FETCH_WRAPPER].reason) == (Status.SKIPPED, Reason.REQUIREMENT)
    # the points the fork skips in its configuration, as the fork did: all apply does not place
    unplaced = {Status.REFUSED, Status.ANCHOR_LOST, Status.SKIPPED}
    inline = sorted(p for p, r in planned.items() if r.status in unplaced and p not in (FETCH_METHOD, FETCH_WRAPPER))
    assert inline
    (checkout_090 / ".trace-instrument.toml").write_text(f"skip = {inline!r}\n".replace("'", '"'), encoding="utf-8")
    applied = _cli("apply", "--format", "json", checkout_090)
    assert applied.exit_code == exits.FAILED, applied.output  # the method is refused still
    by_id = {p["id"]: p for p in json.loads(applied.output)["points"]}
    assert (by_id[FETCH_METHOD]["status"], by_id[FETCH_METHOD]["reason"]) == ("refused", "unset-attribute")
    assert by_id[FETCH_WRAPPER]["status"] == "skipped"
    for relative in TRAINERS:  # counted in the text, apart from the engine
        text = (checkout_090 / relative).read_text(encoding="utf-8")
        assert "self.global_steps" not in text and "_logged_train_dataloader" not in text, relative
        assert "log_progress(" in text, relative  # the other points were written
    # skipping the method and the loop over it too: a clean tree, and nothing in it can raise for the rename
    (checkout_090 / ".trace-instrument.toml").write_text(
        f"skip = {[*inline, FETCH_METHOD, FETCH_WRAPPER]!r}\n".replace("'", '"'), encoding="utf-8"
    )
    outcome = _cli("apply", checkout_090)
    assert outcome.exit_code == exits.OK, outcome.output
    assert _cli("check", checkout_090).exit_code == exits.OK


@pytest.mark.e2e
def test_an_instrumented_tree_whose_fork_renames_global_steps_fails_check_and_verify_on_the_method(
    instrumented_090: Path, verl_090: Path, catalog: Catalog
) -> None:
    """The rename after apply: the method in place is broken (not clean), the loop that goes through
    it broken by its requirement, and verify's name proof fails on the method."""
    _rename_global_steps(instrumented_090, verl_090)
    found = {p.point_id: p for p in check(instrumented_090, catalog).points}
    method, wrapper = found[FETCH_METHOD], found[FETCH_WRAPPER]
    assert (method.status, method.reason) == (Status.BROKEN, Reason.UNSET_ATTRIBUTE)
    assert method.message.startswith("'self.global_steps' is read by the code")
    assert (wrapper.status, wrapper.reason) == (Status.BROKEN, Reason.REQUIREMENT)
    assert FETCH_METHOD in wrapper.message
    assert _cli("check", instrumented_090).exit_code == exits.FAILED
    result = verify(instrumented_090, catalog)
    failing = [f for f in result.findings if not f.ok and f.check is Check.NAMES]
    assert any(f.message.startswith(f"{FETCH_METHOD}: 'self.global_steps'") for f in failing)
