"""apply / remove / check on the real verl 0.9.0 wheel, against golden snapshots."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest
from support import TESTS, copy_tree, tree_bytes

from trace_instrument.engine.apply import apply
from trace_instrument.engine.check import check
from trace_instrument.engine.patch import unified_patch
from trace_instrument.engine.remove import remove
from trace_instrument.model import EXTRAS, Selection, Status

GOLDEN = TESTS / "golden"
UPDATE = os.environ.get("TRACE_INSTRUMENT_UPDATE_GOLDEN") == "1"
WITH_EXTRAS = Selection(extras=frozenset(EXTRAS))


def _changed(before: dict[str, bytes], after: dict[str, bytes]) -> dict[str, bytes]:
    return {path: data for path, data in after.items() if before.get(path) != data}


def _golden(name: str) -> dict[str, bytes]:
    folder = GOLDEN / name
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def _compare_to_golden(name: str, changed: dict[str, bytes], base: str | None) -> None:
    """The snapshot `name` holds only what differs from snapshot `base` (when given)."""
    under = _golden(base) if base else {}
    if UPDATE:
        shutil.rmtree(GOLDEN / name, ignore_errors=True)
        for path, data in changed.items():
            if under.get(path) != data:
                (GOLDEN / name / path).parent.mkdir(parents=True, exist_ok=True)
                (GOLDEN / name / path).write_bytes(data)
    expected = {**under, **_golden(name)}
    assert sorted(changed) == sorted(expected)
    for path, data in expected.items():
        assert changed[path] == data, f"{path} differs from its golden snapshot"


@pytest.mark.parametrize(
    ("name", "selection", "base"),
    [
        pytest.param("v0.9.0", Selection(), None, id="core"),
        pytest.param("v0.9.0-extras", WITH_EXTRAS, "v0.9.0", id="extras"),
    ],
)
def test_apply_matches_golden_snapshot(verl_090, tmp_path, catalog, name, selection, base):
    root = copy_tree(verl_090, tmp_path / "c")
    result = apply(root, catalog, selection)
    assert result.written and not result.error
    assert {p.status for p in result.points} == {Status.APPLIED}
    changed = _changed(tree_bytes(verl_090), tree_bytes(root))
    runtime = {path: data for path, data in changed.items() if path.startswith("verl/utils/tracing/")}
    assert sorted(runtime) == sorted(f"verl/utils/tracing/{n}" for n, _ in catalog.runtime.files)
    _compare_to_golden(name, {k: v for k, v in changed.items() if k not in runtime}, base)


def test_counts_and_compile(checkout_090, catalog):
    apply(checkout_090, catalog)
    flow = progress = 0
    for path in (checkout_090 / "verl").rglob("*.py"):
        if "utils/tracing" in path.as_posix():
            continue
        text = path.read_text(encoding="utf-8")
        flow += sum(1 for line in text.splitlines() if "trace_flow(" in line)
        progress += sum(1 for line in text.splitlines() if "log_progress(" in line)
    assert (flow, progress) == (31, 82)
    for path in {p.file for p in catalog.points}:
        if (checkout_090 / path).exists():
            compile((checkout_090 / path).read_bytes(), path, "exec")
    for path in (checkout_090 / "verl/utils/tracing").glob("*.py"):
        compile(path.read_bytes(), str(path), "exec")


@pytest.mark.parametrize("selection", [Selection(), WITH_EXTRAS], ids=["core", "extras"])
def test_second_apply_changes_no_byte(checkout_090, catalog, selection):
    apply(checkout_090, catalog, selection)
    once = tree_bytes(checkout_090)
    again = apply(checkout_090, catalog, selection)
    assert not again.written
    assert {p.status for p in again.points} == {Status.PRESENT}
    assert tree_bytes(checkout_090) == once


def test_dry_run_changes_no_byte_and_shows_the_change(checkout_090, catalog):
    before = tree_bytes(checkout_090)
    dry = apply(checkout_090, catalog, write=False)
    assert not dry.written and tree_bytes(checkout_090) == before
    real = apply(checkout_090, catalog)
    assert [f.updated for f in dry.files] == [f.updated for f in real.files]


@pytest.mark.parametrize("selection", [Selection(), WITH_EXTRAS], ids=["core", "extras"])
def test_remove_restores_pristine_bytes(verl_090, checkout_090, catalog, selection):
    apply(checkout_090, catalog, selection)
    result = remove(checkout_090, catalog)
    assert result.written and not result.error
    assert tree_bytes(checkout_090) == tree_bytes(verl_090)
    assert not (checkout_090 / ".trace-instrument.json").exists()


@pytest.mark.parametrize("facility", ["sample_flow", "progress", "trajectory", "env"])
def test_single_facility_apply_then_remove(verl_090, checkout_090, catalog, facility):
    selection = Selection(facilities=frozenset({facility}))
    result = apply(checkout_090, catalog, selection)
    assert all(status == "created" for _, status in result.runtime_files), "the runtime comes along"
    assert all(p.facility == facility for p in result.points)
    assert {p.status for p in result.points} <= {Status.APPLIED, Status.SKIPPED}
    remove(checkout_090, catalog)
    assert tree_bytes(checkout_090) == tree_bytes(verl_090)


@pytest.mark.parametrize(
    "order",
    [
        ["trajectory", "progress", "env", "sample_flow", "runtime"],
        ["sample_flow", "trajectory", "runtime", "progress", "env"],
        ["progress", "sample_flow", "trajectory", "env", "runtime"],
    ],
    ids=lambda order: "-".join(order),
)
def test_facilities_applied_one_after_another_equal_one_run(verl_090, tmp_path, catalog, order):
    one_run = copy_tree(verl_090, tmp_path / "one")
    apply(one_run, catalog)
    stepwise = copy_tree(verl_090, tmp_path / "steps")
    for facility in order:
        apply(stepwise, catalog, Selection(facilities=frozenset({facility})))
    assert tree_bytes(stepwise) == tree_bytes(one_run)


@pytest.mark.parametrize("facility", ["sample_flow", "progress", "trajectory"])
def test_removing_one_facility_leaves_what_applying_the_others_gives(verl_090, tmp_path, catalog, facility):
    others = frozenset({"sample_flow", "progress", "trajectory", "env", "runtime"} - {facility})
    full = copy_tree(verl_090, tmp_path / "full")
    apply(full, catalog)
    remove(full, catalog, Selection(facilities=frozenset({facility})))
    partial = copy_tree(verl_090, tmp_path / "partial")
    apply(partial, catalog, Selection(facilities=others))
    full_files, partial_files = tree_bytes(full), tree_bytes(partial)
    assert sorted(full_files) == sorted(partial_files)
    for path in full_files:
        assert full_files[path] == partial_files[path], path


def test_patch_applies_with_git_on_the_pristine_tree(verl_090, tmp_path, catalog):
    planned = apply(copy_tree(verl_090, tmp_path / "plan"), catalog, write=False)
    patch = tmp_path / "trace.patch"
    patch.write_text(unified_patch(planned), encoding="utf-8")
    target = copy_tree(verl_090, tmp_path / "target")
    subprocess.run(["git", "apply", "--whitespace=nowarn", str(patch)], cwd=target, check=True)
    applied = copy_tree(verl_090, tmp_path / "applied")
    apply(applied, catalog)
    assert tree_bytes(target) == tree_bytes(applied)


def test_check_pristine_reports_missing_and_instrumented_is_present(checkout_090, catalog):
    pristine = check(checkout_090, catalog)
    assert {p.status for p in pristine.points} == {Status.MISSING}
    apply(checkout_090, catalog)
    done = check(checkout_090, catalog)
    assert {p.status for p in done.points} == {Status.PRESENT}
    assert all(status == "present" for _, status in done.runtime_files)


def test_import_lines_are_merged_once(checkout_090, catalog):
    apply(checkout_090, catalog)
    for path in {p.file for p in catalog.points}:
        text = (checkout_090 / path).read_text(encoding="utf-8")
        assert len(re.findall(r"^from verl\.utils\.tracing import", text, re.MULTILINE)) <= 1, path
