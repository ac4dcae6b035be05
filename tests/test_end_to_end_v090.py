"""apply / remove / check on the real verl 0.9.0 wheel, against reviewable patch snapshots.

tests/golden/v0.9.0.patch is the patch `apply` makes to the instrumented verl
files of a pristine 0.9.0 tree; tests/golden/v0.9.0-extras.patch is the patch
that adding the opt-in extras to that instrumented tree makes. The runtime
package and the manifest are left out of both: the runtime is a byte copy of
templates/runtime/ (checked here against those files) and the manifest is
bookkeeping.

The full apply of the catalog is made once per worker (`applied_090_run`, conftest.py) and once
with the extras (`extras_090`, below); each test reads them or changes a copy of its own.
"""

from __future__ import annotations

import ast
import re
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from support import REPOSITORY, TESTS, assert_snapshot, copy_checkout, copy_tree, tree_bytes

from trace_instrument.engine.apply import apply
from trace_instrument.engine.check import check
from trace_instrument.engine.patch import unified_patch
from trace_instrument.engine.remove import remove
from trace_instrument.model import EXTRAS, RunResult, Selection, Status

GOLDEN = TESTS / "golden"
CORE_SNAPSHOT = GOLDEN / "v0.9.0.patch"
EXTRAS_SNAPSHOT = GOLDEN / "v0.9.0-extras.patch"
WITH_EXTRAS = Selection(extras=frozenset(EXTRAS))
RUNTIME_SOURCE = REPOSITORY / "templates" / "runtime"
RUNTIME_DIR = "verl/utils/tracing/"
MANIFEST = ".trace-instrument.json"
CORE_FACILITIES = ("sample_flow", "progress", "trajectory", "env")


def _runtime_files() -> dict[str, bytes]:
    """What the runtime package must be once installed: the template files, byte for byte."""
    files = {f"{RUNTIME_DIR}{path.name}": path.read_bytes() for path in sorted(RUNTIME_SOURCE.glob("*.py"))}
    assert files, f"no runtime templates found in {RUNTIME_SOURCE}"
    return files


def _instrumented(tree: dict[str, bytes]) -> dict[str, bytes]:
    """The verl files of a tree, the runtime package left out."""
    return {path: data for path, data in tree.items() if not path.startswith(RUNTIME_DIR)}


def _snapshot_patch(result: RunResult) -> str:
    """The run's patch over the instrumented verl files (runtime and manifest are checked on their own)."""
    return unified_patch(replace(result, other_changes=()))


def _git_apply(pristine: Path, destination: Path, patches: list[str]) -> dict[str, bytes]:
    """The tree `git apply` makes of a pristine copy (a git repository of its own) with the patches applied in order."""
    tree = copy_tree(pristine, destination)
    assert _git(tree, "init", "-q").returncode == 0
    for index, patch in enumerate(patches):
        patch_file = destination.parent / f"{destination.name}-{index}.patch"
        patch_file.write_text(patch, encoding="utf-8")
        outcome = _git(tree, "apply", "--whitespace=nowarn", str(patch_file))
        assert outcome.returncode == 0, f"git apply refused patch {index}:\n{outcome.stderr}"
    return tree_bytes(tree)


def _git(where: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(["git", *arguments], cwd=where, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        pytest.fail("git is needed to check that the snapshots apply; install git", pytrace=False)


def _other_changes(result: RunResult) -> dict[str, str | None]:
    return {change.path: change.after for change in result.other_changes}


@pytest.fixture(scope="module")
def extras_090(verl_090: Path, catalog, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, RunResult]:
    """verl 0.9.0 with the catalog and every extra applied in one run (read only: copy to change)."""
    root = copy_tree(verl_090, tmp_path_factory.mktemp("extras_090"))
    result = apply(root, catalog, WITH_EXTRAS)
    assert result.written and not result.error
    return root, result


@pytest.fixture(scope="module")
def planned_090(verl_090: Path, catalog, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, RunResult]:
    """A dry run of the catalog on a copy of verl 0.9.0 (the copy's bytes before, and the result)."""
    root = copy_tree(verl_090, tmp_path_factory.mktemp("planned_090"))
    return root, apply(root, catalog, write=False)


def test_core_patch_matches_its_snapshot(verl_090, applied_090_run, tmp_path, catalog):
    root, result = applied_090_run
    assert result.written and not result.error
    assert {p.point_id for p in result.points} == {p.id for p in catalog.points if p.extra is None}
    assert {p.status for p in result.points} == {Status.APPLIED}
    assert sorted(_other_changes(result)) == sorted([*_runtime_files(), MANIFEST])
    written = tree_bytes(root)
    assert {path: written[path] for path in _runtime_files()} == _runtime_files()

    patch = _snapshot_patch(result)
    assert_snapshot(CORE_SNAPSHOT, patch)
    assert _git_apply(verl_090, tmp_path / "git", [patch]) == _instrumented(written)


def test_extras_patch_matches_its_snapshot(verl_090, applied_090_run, extras_090, instrumented_090, tmp_path, catalog):
    root, (_, core) = instrumented_090, applied_090_run
    assert core.written
    result = apply(root, catalog, WITH_EXTRAS)
    assert result.written and not result.error
    statuses = {p.point_id: p.status for p in result.points}
    expected = {p.id: Status.PRESENT if p.extra is None else Status.APPLIED for p in catalog.points}
    assert statuses == expected
    assert Status.APPLIED in statuses.values(), "the catalog must have extras for this test to mean anything"
    assert sorted(_other_changes(result)) == [MANIFEST], "the runtime is already in place"

    patch = _snapshot_patch(result)
    assert_snapshot(EXTRAS_SNAPSHOT, patch)
    one_run, one_result = extras_090
    assert one_result.written
    core_then_extras = [_snapshot_patch(core), patch]
    assert _git_apply(verl_090, tmp_path / "git", core_then_extras) == _instrumented(tree_bytes(one_run))


def test_counts_and_compile(verl_090, applied_090):
    flow = progress = 0
    for path in (applied_090 / "verl").rglob("*.py"):
        if "utils/tracing" in path.as_posix():
            continue
        text = path.read_text(encoding="utf-8")
        flow += sum(1 for line in text.splitlines() if "trace_flow(" in line)
        progress += sum(1 for line in text.splitlines() if "log_progress(" in line)
    assert (flow, progress) == (31, 82)
    pristine = tree_bytes(verl_090)
    changed = [path for path, data in tree_bytes(applied_090).items() if pristine.get(path) != data]
    assert len(changed) == 12 + len(_runtime_files())
    for path in changed:
        compile((applied_090 / path).read_bytes(), path, "exec")


def _applied(selection: Selection, applied_090_run, extras_090) -> tuple[Path, RunResult]:
    return applied_090_run if selection == Selection() else extras_090


@pytest.mark.parametrize("selection", [Selection(), WITH_EXTRAS], ids=["core", "extras"])
def test_second_apply_changes_no_byte(verl_090, applied_090_run, extras_090, tmp_path, catalog, selection):
    applied, first = _applied(selection, applied_090_run, extras_090)
    assert first.written
    checkout = copy_checkout(applied, tmp_path / "checkout")
    once = tree_bytes(checkout)
    assert once != tree_bytes(verl_090)
    again = apply(checkout, catalog, selection)
    assert not again.written and not again.error
    assert {p.status for p in again.points} == {Status.PRESENT}
    assert tree_bytes(checkout) == once


def test_dry_run_changes_no_byte_and_shows_the_change(verl_090, planned_090, applied_090):
    checkout, dry = planned_090
    assert not dry.written and tree_bytes(checkout) == tree_bytes(verl_090)
    planned = {f.path: f.updated for f in dry.files if f.changed}
    assert len(planned) == 12
    on_disk = {path: (applied_090 / path).read_text(encoding="utf-8") for path in planned}  # the real apply's
    assert planned == on_disk


@pytest.mark.parametrize("selection", [Selection(), WITH_EXTRAS], ids=["core", "extras"])
def test_remove_restores_pristine_bytes(verl_090, applied_090_run, extras_090, tmp_path, catalog, selection):
    applied, first = _applied(selection, applied_090_run, extras_090)
    assert first.written
    checkout = copy_checkout(applied, tmp_path / "checkout")
    assert (checkout / MANIFEST).exists()
    result = remove(checkout, catalog)
    assert result.written and not result.error
    assert tree_bytes(checkout) == tree_bytes(verl_090)
    assert not (checkout / MANIFEST).exists()


@pytest.mark.parametrize("facility", CORE_FACILITIES)
def test_single_facility_apply_then_remove(verl_090, checkout_090, catalog, facility):
    selection = Selection(facilities=frozenset({facility}))
    result = apply(checkout_090, catalog, selection)
    assert result.written and not result.error
    created = sorted((f.path, f.status.value) for f in result.runtime_files)
    assert created == [(path, "created") for path in sorted(_runtime_files())], "the runtime comes along"
    expected = {p.id for p in catalog.points if p.facility == facility and p.extra is None}
    assert expected, f"the catalog has no {facility} point"
    assert {p.point_id for p in result.points} == expected
    assert {p.status for p in result.points} == {Status.APPLIED}
    assert remove(checkout_090, catalog).written
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
def test_facilities_applied_one_after_another_equal_one_run(verl_090, applied_090, tmp_path, catalog, order):
    one_run = applied_090
    stepwise = copy_tree(verl_090, tmp_path / "steps")
    for facility in order:
        step = apply(stepwise, catalog, Selection(facilities=frozenset({facility})))
        assert not step.error, f"{facility}: {step.error}"
    assert tree_bytes(stepwise) == tree_bytes(one_run)
    assert tree_bytes(one_run) != tree_bytes(verl_090)


@pytest.mark.parametrize("facility", ["sample_flow", "progress", "trajectory"])
def test_removing_one_facility_leaves_what_applying_the_others_gives(
    verl_090, instrumented_090, tmp_path, catalog, facility
):
    others = frozenset({"sample_flow", "progress", "trajectory", "env", "runtime"} - {facility})
    full = instrumented_090
    assert remove(full, catalog, Selection(facilities=frozenset({facility}))).written
    partial = copy_tree(verl_090, tmp_path / "partial")
    assert apply(partial, catalog, Selection(facilities=others)).written
    full_files, partial_files = tree_bytes(full), tree_bytes(partial)
    assert sorted(full_files) == sorted(partial_files)
    for path in full_files:
        assert full_files[path] == partial_files[path], path


def test_whole_patch_applies_with_git_on_the_pristine_tree(verl_090, planned_090, applied_090, tmp_path):
    _, planned = planned_090
    patched = _git_apply(verl_090, tmp_path / "target", [unified_patch(planned)])
    applied = applied_090
    assert patched == tree_bytes(applied)
    assert sorted(set(patched) - set(tree_bytes(verl_090))) == sorted(_runtime_files())
    assert (tmp_path / "target" / MANIFEST).read_bytes() == (applied / MANIFEST).read_bytes()


def test_check_pristine_reports_missing_and_instrumented_is_present(checkout_090, applied_090, tmp_path, catalog):
    core = {p.id for p in catalog.points if p.extra is None}
    pristine = check(checkout_090, catalog)
    assert {p.point_id: p.status for p in pristine.points} == dict.fromkeys(core, Status.MISSING)
    done = check(copy_checkout(applied_090, tmp_path / "instrumented"), catalog)
    assert {p.point_id: p.status for p in done.points} == dict.fromkeys(core, Status.PRESENT)
    assert sorted((f.path, f.status.value) for f in done.runtime_files) == [
        (path, "present") for path in sorted(_runtime_files())
    ]


def _tracing_exports() -> set[str]:
    """The runtime package's __all__, read from its source."""
    tree = ast.parse((RUNTIME_SOURCE / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            return set(ast.literal_eval(node.value))
    raise AssertionError("templates/runtime/__init__.py has no literal __all__")


def test_each_instrumented_file_imports_exactly_the_tracing_names_it_uses(verl_090, extras_090):
    checkout_090, applied = extras_090
    assert applied.written
    exports = _tracing_exports()
    pristine = tree_bytes(verl_090)
    changed = [path for path, data in _instrumented(tree_bytes(checkout_090)).items() if pristine.get(path) != data]
    assert len(changed) == 13, changed
    without_runtime_calls = set()
    for path in changed:
        text = (checkout_090 / path).read_text(encoding="utf-8")
        tree = ast.parse(text)
        used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} & exports
        lines = re.findall(r"^from verl\.utils\.tracing import", text, re.MULTILINE)
        imported = {
            alias.asname or alias.name
            for node in tree.body
            if isinstance(node, ast.ImportFrom) and node.module == "verl.utils.tracing"
            for alias in node.names
        }
        assert len(lines) == (1 if used else 0), path
        assert imported == used, path
        if not used:
            without_runtime_calls.add(path)
    # two files only pass VERL_TRACE_DIR on (env), one extra only copies sglang's timings
    assert without_runtime_calls == {
        "verl/trainer/constants_ppo.py",
        "verl/single_controller/ray/base.py",
        "verl/workers/rollout/sglang_rollout/async_sglang_server.py",
    }
