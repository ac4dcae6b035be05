"""Upgrading an instrumented fork to a new verl release, on real git repositories.

One repository holds upstream's history as commits made from the released wheels
(v0.8.0 -> v0.9.0 -> v0.9.1, tagged). A fork branches from a release, commits an
edit of its own in a file the catalog touches and in one it does not, instruments
itself with `apply` and commits the instrumentation with `.trace-instrument.json`.
Then it upgrades the two ways a fork does, with real `git merge`:

  (a) `remove`, commit, merge the release, `apply`, commit;
  (b) merge the release with the instrumentation committed, every conflict resolved
      by taking upstream's side, then one `apply`.

The tool runs as a user runs it (`python -m trace_instrument ...`); what the tests
expect comes from git (its view of the trees and the merge) and from plain `ast`
over the files and the catalog's templates, never from the tool's own output.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from support import REPOSITORY, copy_tree, tree_bytes

from trace_instrument.engine.apply import apply
from trace_instrument.engine.check import check
from trace_instrument.engine.remove import remove
from trace_instrument.engine.verify import verify
from trace_instrument.model import Catalog, EditKind, Point, Reason, Status

RAY_TRAINER = "verl/trainer/ppo/ray_trainer.py"  # the catalog touches it
MAIN_PPO = "verl/trainer/main_ppo.py"  # the catalog does not
MANIFEST = ".trace-instrument.json"
RUNTIME_DIR = "verl/utils/tracing"
RUNTIME_TEMPLATES = REPOSITORY / "templates" / "runtime"
SHIPPED_TEMPLATES = REPOSITORY / "trace_instrument" / "spec" / "shipped_templates.json"

# The fork's own business edits (the same text in 0.8.0, 0.9.0 and 0.9.1, and far from anything
# upstream changes between them, so git merges them cleanly).
FORK_EDIT_OLD = "    response_length = responses.size(1)\n"
FORK_EDIT_NEW = "    response_length = responses.shape[1]  # fork: shape, not size()\n"
FORK_FUNCTION = "\n\ndef fork_only_helper():\n    return 'kept by the fork'\n"

# A business edit made after the last apply, which verify must catch.
LATE_EDIT_OLD = "    batch_size = data.batch.batch_size[0]\n"
LATE_EDIT_NEW = "    batch_size = len(data)\n"


@dataclass(frozen=True)
class Upgrade:
    old: str
    new: str
    resolve: str  # how the fork takes upstream's side: "-X theirs" or "checkout --theirs"

    def __str__(self) -> str:
        return f"{self.old}-to-{self.new}"


UPGRADES = [Upgrade("0.9.0", "0.9.1", "checkout --theirs"), Upgrade("0.8.0", "0.9.0", "-X theirs")]


# -- running git and the tool -------------------------------------------------------------------------

_GIT_ENV = {
    **os.environ,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,  # the user's settings (autocrlf, rerere, ...) stay out of it
    "GIT_AUTHOR_NAME": "Fork Maintainer",
    "GIT_AUTHOR_EMAIL": "fork@example.invalid",
    "GIT_COMMITTER_NAME": "Fork Maintainer",
    "GIT_COMMITTER_EMAIL": "fork@example.invalid",
}


def git(cwd: Path, *args: str, expect: tuple[int, ...] = (0,)) -> str:
    done = subprocess.run(
        ["git", *args], check=False, cwd=cwd, env=_GIT_ENV, capture_output=True, text=True, timeout=300
    )
    assert done.returncode in expect, f"git {' '.join(args)} exited {done.returncode}:\n{done.stdout}{done.stderr}"
    return done.stdout


def commit_all(cwd: Path, message: str) -> None:
    git(cwd, "add", "-A")
    git(cwd, "commit", "-q", "-m", message)


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str

    def json(self) -> dict[str, Any]:
        try:
            data: dict[str, Any] = json.loads(self.out)
        except json.JSONDecodeError:
            pytest.fail(f"not JSON (exit {self.code}):\n{self.out}\n{self.err}")
        return data


def tool(cwd: Path, *args: str) -> Run:
    """`python -m trace_instrument ARGS` in the checkout, as a user runs it."""
    env = {**os.environ, "NO_COLOR": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "trace_instrument", *args],
        check=False,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return Run(done.returncode, done.stdout, done.stderr)


def expect(run: Run, code: int) -> Run:
    assert run.code == code, f"exit {run.code}, expected {code}:\n{run.out[-4000:]}\n{run.err[-2000:]}"
    return run


def statuses(report: dict[str, Any]) -> dict[str, str]:
    """Point id -> status in a JSON report (the runtime's own items left out)."""
    return {p["id"]: p["status"] for p in report["points"] if p["id"] != "runtime"}


def failures(report: dict[str, Any]) -> list[tuple[str, str, int]]:
    return sorted((f["check"], f["subject"], f["line"]) for f in report["findings"] if not f["ok"])


def line_of(path: Path, text: str) -> int:
    """The 1-based line where `text` (one line) stands; it must stand there once."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    found = [number for number, line in enumerate(lines, 1) if line == text]
    assert len(found) == 1, f"{text!r} stands {len(found)} times in {path}"
    return found[0]


def replace_once(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times in {path}"
    path.write_text(text.replace(old, new), encoding="utf-8")


# -- what the catalog's points look like in a file, recomputed with plain ast ------------------------


def core_points(catalog: Catalog) -> list[Point]:
    return [p for p in catalog.points if p.extra is None]


def _has_placeholder(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Name) and n.id.startswith("__anchor_") for n in ast.walk(node))


def _chunks(nodes: list[Any]) -> Iterator[str]:
    """ast dumps of a template's statements; around a placeholder (business code a rewrite keeps),
    the statements inside it instead."""
    for node in nodes:
        if not _has_placeholder(node):
            yield ast.dump(node)
            continue
        for name in ("body", "handlers", "orelse", "finalbody"):
            yield from _chunks(getattr(node, name, []))


def template_chunks(point: Point) -> list[str]:
    chunks: list[str] = []
    for edit in point.edits:
        text = textwrap.dedent(edit.template.text)
        if edit.kind is EditKind.REPLACE_EXPR:
            chunks.append(ast.dump(ast.parse(text.strip(), mode="eval").body))
        else:
            chunks.extend(_chunks(ast.parse(text).body))
    return chunks


def file_chunks(tree: ast.Module) -> set[str]:
    kinds = (ast.stmt, ast.excepthandler, ast.expr)
    return {ast.dump(node) for node in ast.walk(tree) if isinstance(node, kinds)}


def runtime_exports(checkout: Path) -> set[str]:
    tree = ast.parse((checkout / RUNTIME_DIR / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return set(ast.literal_eval(node.value))
    raise AssertionError("the runtime package has no __all__")


def imported_names(point: Point, exports: set[str]) -> set[str]:
    """Names the point's code needs imported at module level: runtime names and its declared imports."""
    used: set[str] = set()
    for edit in point.edits:
        template = ast.parse(textwrap.dedent(edit.template.text).strip(), mode="exec")
        used |= {n.id for n in ast.walk(template) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    declared: set[str] = set()
    for text in point.imports:
        stmt = ast.parse(text).body[0]
        assert isinstance(stmt, (ast.Import, ast.ImportFrom))
        declared |= {alias.asname or alias.name.split(".")[0] for alias in stmt.names}
    return used & (exports | declared)


def module_imports(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {alias.asname or alias.name.split(".")[0] for alias in node.names}
    return names


@dataclass
class Expected:
    """What check must say about a checkout, recomputed from the files."""

    applicable: set[str] = field(default_factory=set)  # core points whose file exists
    gone: set[str] = field(default_factory=set)  # some code of theirs is not in the file
    unrunnable: set[str] = field(default_factory=set)  # code there, but an import or a required point is not

    @property
    def not_present(self) -> set[str]:
        return self.gone | self.unrunnable


def expected_state(checkout: Path, catalog: Catalog) -> Expected:
    exports = runtime_exports(checkout)
    expected = Expected()
    files: dict[str, tuple[set[str], set[str]]] = {}  # file -> (its chunks, the names it imports)
    for point in core_points(catalog):
        path = checkout / point.file
        if not path.exists():
            continue
        expected.applicable.add(point.id)
        if point.file not in files:
            tree = ast.parse(path.read_bytes())
            files[point.file] = (file_chunks(tree), module_imports(tree))
        chunks, imports = files[point.file]
        if not set(template_chunks(point)) <= chunks:
            expected.gone.add(point.id)
        elif not imported_names(point, exports) <= imports:
            expected.unrunnable.add(point.id)
    for point in core_points(catalog):
        if point.id in expected.applicable and point.id not in expected.gone and set(point.requires) & expected.gone:
            expected.unrunnable.add(point.id)
    return expected


def call_sites(checkout: Path, files: set[str], name: str) -> int:
    count = 0
    for relative in files:
        tree = ast.parse((checkout / relative).read_bytes())
        count += sum(
            1 for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name
        )
    return count


def template_call_sites(points: list[Point], name: str) -> int:
    count = 0
    for point in points:
        for edit in point.edits:
            tree = ast.parse(textwrap.dedent(edit.template.text).strip())
            count += sum(
                1
                for n in ast.walk(tree)
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name
            )
    return count


# -- the repository and the fork ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory, verl_080: Path, verl_090: Path, verl_091: Path) -> Path:
    """upstream's history: one commit per release, tagged v0.8.0, v0.9.0, v0.9.1."""
    root = tmp_path_factory.mktemp("upgrades") / "verl"
    root.mkdir()
    git(root, "init", "-q", "-b", "upstream")
    for version, pristine in (("0.8.0", verl_080), ("0.9.0", verl_090), ("0.9.1", verl_091)):
        shutil.rmtree(root / "verl", ignore_errors=True)
        shutil.copytree(pristine / "verl", root / "verl")
        commit_all(root, f"verl {version}")
        git(root, "tag", f"v{version}")
        tracked = set(git(root, "ls-files").splitlines())
        on_disk = {p.relative_to(pristine).as_posix() for p in (pristine / "verl").rglob("*") if p.is_file()}
        assert tracked == on_disk, f"the v{version} commit is not the wheel's tree"
    return root


@dataclass(frozen=True)
class Fork:
    repository: Path
    upgrade: Upgrade
    branch: str


@pytest.fixture(scope="module", params=UPGRADES, ids=str)
def fork(request: pytest.FixtureRequest, repository: Path, catalog: Catalog) -> Fork:
    """A fork of the old release with edits of its own, instrumented, the instrumentation committed."""
    upgrade: Upgrade = request.param
    branch = _unused_branch(repository, f"fork-{upgrade.old}")
    checkout = repository.parent / branch
    git(repository, "worktree", "add", "-q", "-b", branch, str(checkout), f"v{upgrade.old}")
    replace_once(checkout / RAY_TRAINER, FORK_EDIT_OLD, FORK_EDIT_NEW)
    with (checkout / MAIN_PPO).open("a", encoding="utf-8") as handle:
        handle.write(FORK_FUNCTION)
    commit_all(checkout, "fork: our own changes")

    applied = expect(tool(checkout, "apply", ".", "--format", "json"), 0).json()
    absent = {p.id for p in core_points(catalog) if not (checkout / p.file).exists()}
    assert {i for i, s in statuses(applied).items() if s == "not-applicable"} == absent
    assert {i for i, s in statuses(applied).items() if s == "applied"} == {p.id for p in core_points(catalog)} - absent
    commit_all(checkout, "instrument with trace-instrument")

    committed = set(git(checkout, "ls-files").splitlines())
    runtime = {f"{RUNTIME_DIR}/{p.name}" for p in RUNTIME_TEMPLATES.glob("*.py")}
    assert {MANIFEST, *runtime} <= committed, "the manifest and the runtime package are committed with the code"
    assert git(checkout, "status", "--porcelain") == ""
    return Fork(repository, upgrade, branch)


def _unused_branch(repository: Path, name: str) -> str:
    """`name`, or `name-2`, `name-3`...: pytest may set a module-scoped parametrized fixture up a second
    time in one process (its tests interleaved with another parameter's), and git refuses a branch twice."""
    taken = set(git(repository, "branch", "--format=%(refname:short)").splitlines())
    candidates = (name if n == 1 else f"{name}-{n}" for n in range(1, len(taken) + 2))
    return next(c for c in candidates if c not in taken)


def branch_off(fork: Fork, name: str) -> Path:
    checkout = fork.repository.parent / _unused_branch(fork.repository, f"{name}-{fork.upgrade.old}")
    git(fork.repository, "worktree", "add", "-q", "-b", checkout.name, str(checkout), fork.branch)
    return checkout


# -- (a) remove, merge, apply ----------------------------------------------------------------------------


@dataclass
class WayA:
    checkout: Path
    applied: dict[str, Any]
    check: dict[str, Any]
    verify: dict[str, Any]


@pytest.fixture(scope="module")
def way_a(fork: Fork) -> WayA:
    upgrade, checkout = fork.upgrade, branch_off(fork, "a")
    expect(tool(checkout, "remove", "."), 0)
    git(checkout, "add", "-A")
    restored = set(git(checkout, "diff", "--cached", "--name-only", f"v{upgrade.old}").splitlines())
    assert restored == {RAY_TRAINER, MAIN_PPO}, "remove gives back the release's bytes, the fork's edits kept"
    git(checkout, "commit", "-q", "-m", "take the instrumentation out for the upgrade")

    git(checkout, "merge", "-q", "--no-edit", f"v{upgrade.new}")
    assert git(checkout, "diff", "--name-only", "--diff-filter=U") == ""
    merged = set(git(checkout, "diff", "--name-only", f"v{upgrade.new}", "HEAD").splitlines())
    assert merged == {RAY_TRAINER, MAIN_PPO}, "the merge is the release plus the fork's edits"

    applied = expect(tool(checkout, "apply", ".", "--format", "json"), 0).json()
    commit_all(checkout, f"instrument verl {upgrade.new}")
    check = expect(tool(checkout, "check", ".", "--format", "json"), 0).json()
    verify = expect(tool(checkout, "verify", ".", "--format", "json"), 0).json()
    return WayA(checkout, applied, check, verify)


@pytest.mark.slow
def test_a_remove_merge_apply_leaves_check_and_verify_clean(way_a: WayA, catalog: Catalog):
    expected = expected_state(way_a.checkout, catalog)
    assert expected.applicable == {p.id for p in core_points(catalog)}, "every core point's file is in the release"
    assert set(statuses(way_a.applied).values()) == {"applied"}
    assert set(statuses(way_a.applied)) == expected.applicable
    assert statuses(way_a.check) == dict.fromkeys(expected.applicable, "present")
    assert way_a.check["summary"]["clean"] is True and way_a.check["exit_code"] == 0
    assert way_a.verify["ok"] is True and failures(way_a.verify) == []
    touched = {p.file for p in core_points(catalog)}
    for call in ("trace_flow", "log_progress"):
        counted = sum(c["actual"] for c in way_a.verify["counts"] if c["call"] == call)
        assert counted == call_sites(way_a.checkout, touched, call) == template_call_sites(core_points(catalog), call)
    assert git(way_a.checkout, "status", "--porcelain") == ""


# -- (b) merge with the instrumentation committed, taking upstream's side ---------------------------------


@dataclass
class WayB:
    checkout: Path
    conflicts: set[str]
    expected: Expected  # recomputed from the merged files
    changed: set[str]  # files the merge changed on the fork
    check_before: Run
    applied: dict[str, Any]
    check_after: dict[str, Any]
    verify_after: dict[str, Any]


def merge_taking_upstream_side(checkout: Path, upgrade: Upgrade) -> set[str]:
    """Merge the new release; every conflict resolved with upstream's side, as a user does it."""
    tag = f"v{upgrade.new}"
    if upgrade.resolve == "-X theirs":
        git(checkout, "merge", "-q", "--no-edit", "-X", "theirs", tag)
        assert git(checkout, "diff", "--name-only", "--diff-filter=U") == ""
        return set()
    git(checkout, "merge", "-q", "--no-edit", tag, expect=(1,))
    conflicts = set(git(checkout, "diff", "--name-only", "--diff-filter=U").splitlines())
    assert conflicts, "this upgrade is meant to conflict"
    for path in sorted(conflicts):
        git(checkout, "checkout", "--theirs", "--", path)
    git(checkout, "add", "-A")
    git(checkout, "commit", "-q", "--no-edit")
    return conflicts


@pytest.fixture(scope="module")
def way_b(fork: Fork, catalog: Catalog) -> WayB:
    upgrade, checkout = fork.upgrade, branch_off(fork, "b")
    conflicts = merge_taking_upstream_side(checkout, upgrade)
    assert git(checkout, "status", "--porcelain") == ""
    changed = set(git(checkout, "diff", "--name-only", fork.branch, "HEAD").splitlines())
    expected = expected_state(checkout, catalog)
    check_before = tool(checkout, "check", ".", "--format", "json")
    applied = expect(tool(checkout, "apply", ".", "--format", "json"), 0).json()
    commit_all(checkout, f"instrumentation back after merging verl {upgrade.new}")
    check_after = expect(tool(checkout, "check", ".", "--format", "json"), 0).json()
    verify_after = expect(tool(checkout, "verify", ".", "--format", "json"), 0).json()
    return WayB(checkout, conflicts, expected, changed, check_before, applied, check_after, verify_after)


def test_b_check_names_what_the_merge_took_away(way_b: WayB, catalog: Catalog):
    expected = way_b.expected
    assert expected.applicable == {p.id for p in core_points(catalog)}
    assert expected.gone, "taking upstream's side loses some instrumentation"
    files_of = {p.id: p.file for p in catalog.points}
    assert {files_of[i] for i in expected.not_present} <= way_b.changed, "only files the merge changed lose points"
    assert way_b.conflicts <= {files_of[i] for i in expected.gone}, "each conflicted file lost points"
    report = expect(way_b.check_before, 1).json()
    found = statuses(report)
    assert {i for i, s in found.items() if s != "present"} == expected.not_present
    assert {i for i, s in found.items() if s == "missing"} == expected.gone
    assert {i for i, s in found.items() if s == "broken"} == expected.unrunnable
    advice = {p["id"]: p["message"] for p in report["points"] if p["id"] in expected.not_present}
    assert all("apply" in message for message in advice.values()), advice
    runtime_files = len(list(RUNTIME_TEMPLATES.glob("*.py")))  # the package is committed; the merge leaves it
    assert report["summary"]["by_status"]["present"] == len(expected.applicable - expected.not_present) + runtime_files


@pytest.mark.slow
def test_b_one_apply_puts_it_back_and_check_and_verify_are_clean(way_b: WayB, catalog: Catalog):
    expected = way_b.expected
    applied = statuses(way_b.applied)
    assert {i for i, s in applied.items() if s == "applied"} == expected.gone
    assert {i for i, s in applied.items() if s == "repaired"} == expected.unrunnable
    assert {i for i, s in applied.items() if s == "present"} == expected.applicable - expected.not_present
    assert statuses(way_b.check_after) == dict.fromkeys(expected.applicable, "present")
    assert way_b.verify_after["ok"] is True and failures(way_b.verify_after) == []
    assert expected_state(way_b.checkout, catalog).not_present == set(), "every point's code and imports are back"
    again = expect(tool(way_b.checkout, "apply", ".", "--format", "json"), 0).json()
    assert again["written"] is False and set(statuses(again).values()) == {"present"}
    assert git(way_b.checkout, "status", "--porcelain") == "", "a second apply changes no byte"


@pytest.mark.slow
def test_b_arrives_at_the_same_code_as_a(way_a: WayA, way_b: WayB):
    differing = set(git(way_b.checkout, "diff", "--name-only", way_a.checkout.name, way_b.checkout.name).splitlines())
    # the manifests differ only if the fork's own code ended up differently (it does not: both keep it)
    assert differing == set()
    assert FORK_EDIT_NEW in (way_b.checkout / RAY_TRAINER).read_text(encoding="utf-8")
    assert FORK_FUNCTION in (way_b.checkout / MAIN_PPO).read_text(encoding="utf-8")


@pytest.mark.slow
def test_b_business_edit_after_apply_is_caught_by_verify(way_b: WayB):
    target = way_b.checkout / RAY_TRAINER
    replace_once(target, LATE_EDIT_OLD, LATE_EDIT_NEW)
    try:
        report = expect(tool(way_b.checkout, "verify", ".", "--format", "json"), 1).json()
        assert failures(report) == [("zero-intrusion", RAY_TRAINER, line_of(target, LATE_EDIT_NEW))]
    finally:
        git(way_b.checkout, "checkout", "--", RAY_TRAINER)
    assert git(way_b.checkout, "status", "--porcelain") == ""


def test_b_verify_against_the_upstream_tag_finds_the_forks_own_edit(way_b: WayB, fork: Fork):
    tag = f"v{fork.upgrade.new}"
    report = expect(tool(way_b.checkout, "verify", ".", "--baseline", tag, "--format", "json"), 1).json()
    fork_line = line_of(way_b.checkout / RAY_TRAINER, FORK_EDIT_NEW)
    assert failures(report) == [("zero-intrusion", RAY_TRAINER, fork_line)]
    proofs = [f for f in report["findings"] if f["check"] == "zero-intrusion" and f["ok"]]
    assert proofs and all(tag in f["message"] for f in proofs), "the other files are proven against the tag"


# -- what a merge leaves behind, one thing at a time (0.9.0, in process) ------------------------------------

AGENT_LOOP = "verl/experimental/agent_loop/agent_loop.py"
TRACKER_CODE = (
    "        # Turn records of each run() are collected here under the trajectory's key.\n"
    "        self._traj_tracker = TrajectoryTracker()\n"
)
TRACING_IMPORT = (
    "from verl.utils.tracing import (\n    TrajectoryStore,\n    TrajectoryTracker,\n    get_trace_dir,\n"
    "    log_rollout_completed,\n    suppress_sample_trace,\n    trace_flow,\n)\n"
)


@pytest.fixture
def instrumented_090(verl_090: Path, tmp_path: Path, catalog: Catalog) -> tuple[Path, dict[str, bytes]]:
    checkout = copy_tree(verl_090, tmp_path / "checkout")
    assert apply(checkout, catalog).written
    return checkout, {**tree_bytes(checkout), MANIFEST: (checkout / MANIFEST).read_bytes()}


def all_bytes(checkout: Path) -> dict[str, bytes]:
    return {**tree_bytes(checkout), MANIFEST: (checkout / MANIFEST).read_bytes()}


def by_id(result: Any) -> dict[str, Any]:
    return {p.point_id: p for p in result.points}


def test_a_point_with_one_edit_lost_is_missing_and_apply_completes_it(instrumented_090, catalog: Catalog, verl_090):
    checkout, fresh = instrumented_090
    trainer = checkout / RAY_TRAINER
    replace_once(trainer, "                        log_progress('end compute adv')\n", "")
    lost = by_id(check(checkout, catalog))["progress.v0.adv"]
    assert (lost.status, lost.message) == (
        Status.MISSING,
        "edit 2 of 2 missing, the others in place; `apply` adds it here",
    )
    assert {p.point_id for p in check(checkout, catalog).points if p.status is not Status.PRESENT} == {
        "progress.v0.adv"
    }
    assert by_id(apply(checkout, catalog))["progress.v0.adv"].status is Status.APPLIED
    assert all_bytes(checkout) == fresh
    replace_once(trainer, "                        log_progress('end compute adv')\n", "")
    assert by_id(remove(checkout, catalog))["progress.v0.adv"].status is Status.REMOVED
    assert tree_bytes(checkout) == tree_bytes(verl_090), "the half left of it goes too"


def test_points_whose_requirement_is_gone_are_broken_until_apply_puts_it_back(instrumented_090, catalog: Catalog):
    checkout, fresh = instrumented_090
    replace_once(checkout / AGENT_LOOP, TRACKER_CODE, "")
    needing = {p.id for p in catalog.points if "traj.c0.tracker" in p.requires and p.extra is None}
    assert needing == {"traj.c1.central-dump", "traj.c2.single-turn-record", "traj.c3.tool-record"}
    checked = by_id(check(checkout, catalog))
    assert checked["traj.c0.tracker"].status is Status.MISSING
    assert {i for i, p in checked.items() if p.status is Status.BROKEN} == needing
    assert all(checked[i].reason is Reason.REQUIREMENT and "traj.c0.tracker" in checked[i].message for i in needing)
    applied = by_id(apply(checkout, catalog))
    assert applied["traj.c0.tracker"].status is Status.APPLIED
    assert {i for i, p in applied.items() if p.status is Status.REPAIRED} == needing
    assert all_bytes(checkout) == fresh


def test_a_lost_import_block_is_repaired_for_every_point_even_one_nesting_another(instrumented_090, catalog):
    checkout, fresh = instrumented_090
    replace_once(checkout / AGENT_LOOP, TRACING_IMPORT, "")
    in_file = {p.id for p in core_points(catalog) if p.file == AGENT_LOOP}
    exports = runtime_exports(checkout)
    needing = {p.id for p in core_points(catalog) if p.file == AGENT_LOOP and imported_names(p, exports)}
    checked = by_id(check(checkout, catalog))
    assert {i for i in in_file if checked[i].status is Status.BROKEN} == needing
    # C1's try holds flow.v0.run-completed's trace_flow: C1 answers for its own names only
    central = checked["traj.c1.central-dump"]
    assert [(n.name, n.problem) for n in central.names] == [("log_rollout_completed", Reason.MISSING_IMPORT)]
    applied = by_id(apply(checkout, catalog))
    assert {i for i in in_file if applied[i].status is Status.REPAIRED} == needing
    assert all_bytes(checkout) == fresh


# -- stale points: applied with an older template ---------------------------------------------------------

STALE_POINT = "flow.v0.uid-generated"
NEWER_TAIL = "detail='uid_generated',\n           global_step=self.global_steps)\n"  # as the template has it
OLDER_TAIL = "detail='uid_generated')\n"  # the simulated older template left global_step out
PLACED_NEWER = "detail='uid_generated',\n                           global_step=self.global_steps)"
PLACED_OLDER = "detail='uid_generated')"


def make_stale(checkout: Path) -> None:
    """Turn the point into what an older template (without global_step) put there, manifest included."""
    manifest_path = checkout / MANIFEST
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    # the manifest names the template by digest; its text is the one the tool ships
    file, key = manifest["points"][STALE_POINT]
    template = "\n".join(json.loads(SHIPPED_TEMPLATES.read_text(encoding="utf-8"))["templates"][key])
    assert template.count(NEWER_TAIL) == 1 and hashlib.sha256(template.encode()).hexdigest()[:16] == key
    older = template.replace(NEWER_TAIL, OLDER_TAIL)  # a text no release shipped: the manifest keeps it
    older_key = hashlib.sha256(older.encode()).hexdigest()[:16]
    manifest["points"][STALE_POINT] = [file, older_key]
    manifest["templates"][older_key] = older.split("\n")
    manifest_path.write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    replace_once(checkout / RAY_TRAINER, PLACED_NEWER, PLACED_OLDER)


@pytest.fixture
def stale_checkout(instrumented_090: tuple[Path, dict[str, bytes]]) -> tuple[Path, dict[str, bytes]]:
    """An instrumented 0.9.0 copy with one stale point, and the bytes a fresh apply gave."""
    checkout, fresh = instrumented_090
    make_stale(checkout)
    return checkout, fresh


def test_a_stale_point_is_refreshed_in_place_by_apply_update(stale_checkout: tuple[Path, dict[str, bytes]]):
    checkout, fresh = stale_checkout
    text = expect(tool(checkout, "check", "."), 1).out
    stale_lines = [line for line in text.splitlines() if STALE_POINT in line]
    assert len(stale_lines) == 1 and stale_lines[0].split()[0] == "stale"
    assert "`trace-instrument apply --update`" in text
    assert "remove then apply" not in text
    report = expect(tool(checkout, "check", ".", "--format", "json"), 1).json()
    stale = [p for p in report["points"] if p["status"] != "present"]
    assert [(p["id"], p["status"]) for p in stale] == [(STALE_POINT, "stale")]
    assert "trace-instrument apply --update" in stale[0]["message"]

    plain = expect(tool(checkout, "apply", ".", "--format", "json"), 1).json()
    assert plain["written"] is False and statuses(plain)[STALE_POINT] == "stale", "plain apply leaves it alone"

    updated = expect(tool(checkout, "apply", ".", "--update", "--format", "json"), 0).json()
    assert updated["written"] is True
    assert {i: s for i, s in statuses(updated).items() if s != "present"} == {STALE_POINT: "updated"}
    assert all_bytes(checkout) == fresh, "apply --update gives the bytes of a fresh apply (manifest included)"

    again = expect(tool(checkout, "apply", ".", "--update", "--format", "json"), 0).json()
    assert again["written"] is False and set(statuses(again).values()) == {"present"}
    assert all_bytes(checkout) == fresh
    expect(tool(checkout, "check", "."), 0)


def test_remove_takes_a_stale_point_out(stale_checkout: tuple[Path, dict[str, bytes]], verl_090: Path):
    checkout, _fresh = stale_checkout
    removed = expect(tool(checkout, "remove", ".", "--format", "json"), 0).json()
    assert statuses(removed)[STALE_POINT] == "removed"
    assert tree_bytes(checkout) == tree_bytes(verl_090)
    assert not (checkout / MANIFEST).exists()


# -- a release the catalog was not validated on ------------------------------------------------------------

VALIDATED_ON = ("0.8.0", "0.9.0", "0.9.1")  # anchors/_catalog.yaml


def version_line_count(output: str, version: str) -> int:
    wanted = f"verl {version} is not a release this catalog was validated on ({', '.join(VALIDATED_ON)})"
    return sum(wanted in line for line in output.splitlines())


def test_a_release_outside_validated_on_gets_one_line(verl_091: Path, tmp_path: Path):
    checkout = copy_tree(verl_091, tmp_path / "checkout")
    (checkout / "verl/version/version").write_text("0.10.0\n", encoding="utf-8")
    outputs = {
        "apply": expect(tool(checkout, "apply", "."), 0),
        "check": expect(tool(checkout, "check", "."), 0),
        "check --format github": expect(tool(checkout, "check", ".", "--format", "github"), 0),
        "report": expect(tool(checkout, "report", "."), 0),
    }
    for command, run in outputs.items():
        assert version_line_count(run.out + run.err, "0.10.0") == 1, f"{command}:\n{run.out}{run.err}"
    assert version_line_count(outputs["check"].out, "0.9.1") == 0
    report = expect(tool(checkout, "check", ".", "--format", "json"), 0).json()
    assert (report["verl_version"], report["validated"]) == ("0.10.0", False)


@pytest.mark.slow
def test_verify_baseline_takes_a_tag_when_the_checkout_is_a_subfolder(verl_090: Path, tmp_path: Path, catalog):
    repository = tmp_path / "monorepo"
    checkout = copy_tree(verl_090, repository / "third_party" / "verl")
    git(repository, "init", "-q", "-b", "main")
    commit_all(repository, "vendor verl 0.9.0")
    git(repository, "tag", "verl-0.9.0")
    assert apply(checkout, catalog).written
    replace_once(checkout / RAY_TRAINER, FORK_EDIT_OLD, FORK_EDIT_NEW)
    result = verify(checkout, catalog, baseline="verl-0.9.0")
    failed = [(f.check.value, f.subject, f.line) for f in result.findings if not f.ok]
    assert failed == [("zero-intrusion", RAY_TRAINER, line_of(checkout / RAY_TRAINER, FORK_EDIT_NEW))]
    touched = {p.file for p in core_points(catalog)}
    proven = {f.subject for f in result.findings if f.check.value == "zero-intrusion" and f.ok}
    assert proven == touched - {RAY_TRAINER}
