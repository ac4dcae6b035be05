"""How well `port` carries the catalog to a verl it was not validated on, judged by an oracle.

    python benchmarks/port.py [--rounds 3] [--releases 0.7.1 0.7.0 0.6.1] [--verl-git DIR [--commits SHA...]]
                              [--refactors WORD...] [--trees NAME...] [--no-corpus]

The corpus (tests/refactors.py): refactors of verl 0.9.0 written as edits that apply alike to the
pristine tree and to the instrumented one (rename a method, a class, a local a template reads, a
local an anchor names; move a method into a mixin, or a mixin of another module; split a method;
extract statements into a helper; reorder methods; requote). For each refactor R:

  oracle   R(apply(pristine)): where every point's code must be after the refactor
  ported   apply(R(pristine)) with the catalog and the overrides port wrote for R(pristine)

Of the points the refactor keeps apply from placing as shipped (lost, ambiguous, refused, or
skipped for a lost point they require), a point is ported *exactly* when it is in place in the
ported tree and `check` on the oracle, with port's overrides, finds the oracle's code there (the
ported anchors put it exactly where the refactored instrumented tree has it), *wrongly* when it is
in place and the oracle's code is elsewhere, *left* when it is not in place (for a person). The
files of the two trees are compared too: every verl file, byte for byte ("imports differ": equal
but for import statements, as when a module the refactor made took the instrumented imports).

Then real releases (PyPI wheels, fetched and cached as the tests do): the points lost before and
in place after `port` + `apply --anchors`, with `check --anchors` and `verify --anchors` on what
was placed. With --verl-git (a git directory of verl), the same for commits of verl's history,
each judged against the places pinned in PINNED_COMMITS. And port's whole-process time against
apply's on the same tree (`--dry-run` both: each reads the tree and writes nothing), medians of
`--rounds`.

Then the real trees of issue 38 (tests/port_oracle.py: PyPI releases and vendored commits of verl's history, each with
an oracle read off its code by hand): per tree, the points plain apply cannot place as shipped, those the oracle gives
a place, those port puts there at the default confidence (`likely`: its default run, carried points included), those
only its `--min-confidence guess` run puts there, the wrong ones (placed elsewhere, or placed where the oracle says
there is no place), the ones left; and port's whole-process time against apply's on that tree.

Targets (issue 38, the real trees): >= 80% of the points with a place put there at `likely`; 0 wrong at `likely`
and above; port <= 2x apply's time.
Targets (issue 19): >= 90% of the points that need it ported exactly; 0 wrong at `likely` and
above; port <= 2x apply's time.
"""

from __future__ import annotations

import argparse
import ast
import io
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from common import byte_compile_the_tool, timed

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import port_oracle
from refactors import CORPUS, Refactor

from trace_instrument.engine.apply import apply
from trace_instrument.engine.check import check
from trace_instrument.engine.port import DEFAULT_OUT, port
from trace_instrument.engine.verify import verify
from trace_instrument.model import Catalog, Confidence, PortStatus, PortSuggestion, Selection, Status
from trace_instrument.spec import load_catalog
from trace_instrument.wheels import verl_tree


@dataclass
class Judged:
    needing: int  # points not placeable as shipped after the refactor
    exact: int
    wrong: list[str]  # "id (confidence)"
    left: int
    files: str  # how the ported tree's files compare with the oracle's (_compared)


def _copy(source: Path, target: Path) -> Path:
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


def _verl_files(tree: Path) -> dict[str, bytes]:
    return {str(p.relative_to(tree)): p.read_bytes() for p in sorted((tree / "verl").rglob("*.py"))}


def _compared(tree: Path, oracle: Path) -> str:
    """How the trees compare: "equal", "imports differ" (the files equal but for their import statements: a module the
    refactor made took the instrumented module's imports), or "DIFFER"."""
    ours, theirs = _verl_files(tree), _verl_files(oracle)
    if ours == theirs:
        return "equal"
    if ours.keys() == theirs.keys() and all(_code(ours[k]) == _code(theirs[k]) for k in ours):
        return "imports differ"
    return "DIFFER"


def _code(source: bytes) -> str:
    body = [n for n in ast.parse(source).body if not isinstance(n, (ast.Import, ast.ImportFrom))]
    return ast.dump(ast.Module(body, []))


def _judge(
    name: str,
    refactor: Refactor,
    pristine: Path,
    instrumented: Path,
    catalog: Catalog,
    work: Path,
    sure: Confidence = Confidence.LIKELY,
) -> Judged:
    slug = re.sub(r"\W+", "-", name).strip("-") + f"-{sure.value}"
    oracle = _copy(instrumented, work / f"{slug}-oracle")
    refactor(oracle)
    tree = _copy(pristine, work / f"{slug}-tree")
    refactor(tree)
    needing = [
        r.point_id for r in check(tree, catalog).points if r.status not in (Status.MISSING, Status.NOT_APPLICABLE)
    ]
    result = port(tree, catalog, Selection(), lambda folder: load_catalog([folder]), min_confidence=sure)
    written = {s.point_id: s for s in result.suggestions if s.status is PortStatus.PORTED}
    ported = load_catalog([tree / DEFAULT_OUT]) if written else catalog
    placed = {r.point_id for r in apply(tree, ported).points if r.status.in_place}
    in_oracle = {r.point_id: r.status for r in check(oracle, ported).points}
    exact = [p for p in needing if p in placed and in_oracle.get(p) is Status.PRESENT]
    wrong = [f"{p} ({_sure(written.get(p))})" for p in needing if p in placed and p not in exact]
    left = sum(1 for p in needing if p not in placed)
    return Judged(len(needing), len(exact), wrong, left, _compared(tree, oracle))


def _sure(suggestion: PortSuggestion | None) -> str:
    """How sure port was of a place (a point carried along by one it requires: 'carried')."""
    if suggestion is None:
        return "carried"
    return suggestion.confidence.value if suggestion.confidence is not None else "?"


def _release(version: str, catalog: Catalog, work: Path) -> dict[str, object]:
    return _measured(_copy(verl_tree(version), work / f"verl-{version}"), catalog)


def _commit(repository: Path, commit: str, work: Path) -> Path:
    """verl's package at one commit of a git repository (`git archive`: the files as committed)."""
    tree = work / f"verl-{commit}"
    tree.mkdir()
    archive = subprocess.run(
        ["git", "--git-dir", str(repository), "archive", "--format=tar", commit, "verl"],
        check=True,
        capture_output=True,
    )
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(tree, filter="data")
    return tree


# Where port must put the points of verl main commits before the catalog's validation (2026-07-23), read off the
# code: at 45632b5fa (2026-06-12, the unified trainer) `PPOTrainer._step_once` does not exist and `step` holds its
# statements; `_pp`'s separate_async mode (`self.trainer_mode`) does not exist either, so the points that read it
# have no place. Tests cannot fetch git history (CI reaches package registries only), so the pins live here.
# The uid and dispatch traces fit `_add_batch_to_generate` and `_validate` alike; the seed silences validation, so
# the training one is their place (tests/fixtures/port_trees/oracle/ has every tree's places, line by line).
_TRAINING_BATCH = {
    p: "PPOTrainer._add_batch_to_generate" for p in ("flow.v1.uid-generated", "flow.v1.dispatch-manager")
}
PINNED_COMMITS: dict[str, dict[str, str]] = {
    "a5ca1290a": _TRAINING_BATCH,
    "45632b5fa": _TRAINING_BATCH
    | {
        point: "PPOTrainer.step"
        for point in (
            "progress.v1.rollout-window",
            "flow.v1.train-reward",
            "flow.v1.train-logprob",
            "flow.v1.train-ref-logprob",
            "flow.v1.train-advantage",
            "flow.v1.train-update",
        )
    },
}


def _measured(tree: Path, catalog: Catalog, pinned: dict[str, str] | None = None) -> dict[str, object]:
    """The points lost as shipped, in place before and after port + apply --anchors, and check and verify on them;
    with pins, whether port wrote exactly the pinned scopes."""
    work = tree.parent
    version = tree.name.removeprefix("verl-")
    lost = [
        r for r in check(tree, catalog).points if r.status in (Status.ANCHOR_LOST, Status.AMBIGUOUS, Status.REFUSED)
    ]
    before = sum(
        1 for r in apply(_copy(tree, work / f"verl-{version}-as-shipped"), catalog).points if r.status.in_place
    )
    result = port(tree, catalog, Selection(), lambda folder: load_catalog([folder]))
    ported = [s for s in result.suggestions if s.status is PortStatus.PORTED]
    with_overrides = load_catalog([tree / DEFAULT_OUT]) if ported else catalog
    placed = apply(tree, with_overrides)
    after = sum(1 for r in placed.points if r.status.in_place)
    checked = check(tree, with_overrides)
    placed_ids = frozenset(r.point_id for r in checked.points if r.status.in_place)
    verified = verify(tree, with_overrides, Selection(only=placed_ids))
    return {
        "lost": len(lost),
        "in place as shipped": before,
        "ported (likely+)": len(ported),
        "in place after port": after,
        "check on placed": "clean"
        if all(r.status.in_place for r in checked.points if r.point_id in placed_ids)
        else "drift",
        "verify on placed": "ok" if verified.ok else f"{sum(not f.ok for f in verified.findings)} failed",
        "unsure": sum(1 for s in result.suggestions if s.status is PortStatus.UNSURE),
        "not found": sum(1 for s in result.suggestions if s.status is PortStatus.NOT_FOUND),
        **({} if pinned is None else {"as pinned": _against(pinned, {s.point_id: s.new_scope for s in ported})}),
    }


def _against(pinned: dict[str, str], written: dict[str, str]) -> str:
    if written == pinned:
        return "yes"
    wrong = sorted(p for p in written if written[p] != pinned.get(p))
    missing = sorted(p for p in pinned if p not in written)
    return f"NO (wrong: {', '.join(wrong) or '-'}; missing: {', '.join(missing) or '-'})"


def _timing(tree: Path, rounds: int) -> tuple[float, float]:
    """Medians of port's and apply's whole-process wall time (`--dry-run` both), run in turns."""
    command = [sys.executable, "-m", "trace_instrument"]
    ports, applies = [], []
    for _ in range(rounds):
        ports.append(timed([*command, "port", "--dry-run", str(tree)], ok=(0, 1)).seconds)
        applies.append(timed([*command, "apply", "--dry-run", str(tree)], ok=(0, 1)).seconds)
    return statistics.median(ports), statistics.median(applies)


def _trees(names: list[str], catalog: Catalog, work: Path, rounds: int) -> None:
    """Each real tree against its oracle (tests/port_oracle.py), and the sums."""
    print(f"{'tree':<10} {'lost':>5} {'place':>6} {'likely':>7} {'guess':>6} {'wrong':>6} {'left':>5}  port / apply")
    sums = [0, 0, 0, 0, 0, 0]
    for name in names:
        (work / name).mkdir()
        judged = port_oracle.judge(name, catalog, work / name)
        port_s, apply_s = _timing(work / name / f"verl-{name}", rounds)
        row = [
            judged.lost,
            judged.with_place,
            len(judged.likely),
            len(judged.guesses),
            len(judged.wrong),
            len(judged.left),
        ]
        sums = [a + b for a, b in zip(sums, row)]
        print(
            f"{name:<10} {row[0]:>5} {row[1]:>6} {row[2]:>7} {row[3]:>6} {row[4]:>6} {row[5]:>5}  "
            f"{port_s:.2f} s / {apply_s:.2f} s = {port_s / apply_s:.2f}x"
            + (f"  wrong: {'; '.join(judged.wrong)}" if judged.wrong else "")
        )
    place = sums[1] or 1
    print(
        f"{'total':<10} {sums[0]:>5} {sums[1]:>6} {sums[2]:>7} {sums[3]:>6} {sums[4]:>6} {sums[5]:>5}  "
        f"at likely {sums[2] / place:.0%} (target >= 80%), with guesses {(sums[2] + sums[3]) / place:.0%}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--releases", nargs="*", default=["0.7.1"])
    parser.add_argument("--verl-git", type=Path, help="a git directory of verl, for --commits")
    parser.add_argument(
        "--commits", nargs="*", default=["a5ca1290a", "45632b5fa"], help="verl commits (with --verl-git)"
    )
    parser.add_argument("--refactors", nargs="*", default=[], help="only the refactors whose name holds one of these")
    parser.add_argument("--trees", nargs="*", default=list(port_oracle.TREES), help="real trees judged by the oracle")
    parser.add_argument(
        "--held-out", nargs="*", default=list(port_oracle.HELD_OUT), help="real trees read after the work, apart"
    )
    parser.add_argument("--no-corpus", action="store_true", help="only the real trees (no corpus, releases, timing)")
    args = parser.parse_args()
    byte_compile_the_tool()
    catalog = load_catalog()
    with tempfile.TemporaryDirectory(prefix="trace-instrument-port-bench-") as scratch:
        work = Path(scratch)
        _trees(args.trees, catalog, work, args.rounds)
        if args.held_out:
            print("\nheld out (vendored and read after port's work, never tuned to):")
            _trees(args.held_out, catalog, work, args.rounds)
        print()
        if args.no_corpus:
            return
        pristine = verl_tree("0.9.0")
        instrumented = _copy(pristine, work / "instrumented")
        apply(instrumented, catalog)
        print(
            f"{'refactor of verl 0.9.0':<52} {'need':>5} {'exact':>6} {'wrong':>6} {'left':>5}  files  | with guesses"
        )
        totals = [0, 0, 0, 0, 0]
        chosen = {n: r for n, r in CORPUS.items() if not args.refactors or any(w in n for w in args.refactors)}
        for name, refactor in chosen.items():
            judged = _judge(name, refactor, pristine, instrumented, catalog, work)
            guessing = _judge(name, refactor, pristine, instrumented, catalog, work, Confidence.GUESS)
            totals = [
                a + b
                for a, b in zip(
                    totals,
                    [judged.needing, judged.exact, len(judged.wrong), guessing.exact, len(guessing.wrong)],
                )
            ]
            print(
                f"{name:<52} {judged.needing:>5} {judged.exact:>6} {len(judged.wrong):>6} {judged.left:>5}  "
                f"{judged.files}  | exact {guessing.exact}, wrong {len(guessing.wrong)}"
                + (f"  wrong: {', '.join(judged.wrong + guessing.wrong)}" if judged.wrong or guessing.wrong else "")
            )
        share = totals[1] / totals[0] if totals[0] else 1.0
        print(
            f"{'total':<52} {totals[0]:>5} {totals[1]:>6} {totals[2]:>6}   exact {share:.0%} (target >= 90%)"
            f"  | with guesses: exact {totals[3]}, wrong {totals[4]}"
        )
        print()
        for version in args.releases:
            print(f"verl {version}: {_release(version, catalog, work)}")
        for commit in args.commits if args.verl_git else []:
            print(
                f"verl main at {commit}: {_measured(_commit(args.verl_git, commit, work), catalog, PINNED_COMMITS.get(commit))}"
            )
        print()
        timing_tree = _copy(pristine, work / "timing")
        CORPUS["rename a method (RayPPOTrainer.fit)"](timing_tree)
        port_s, apply_s = _timing(timing_tree, args.rounds)
        print(
            f"port {port_s:.2f} s, apply {apply_s:.2f} s: port / apply {port_s / apply_s:.2f}x (target <= 2), "
            f"verl 0.9.0 with fit renamed, medians of {args.rounds}"
        )


if __name__ == "__main__":
    main()
