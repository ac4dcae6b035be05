"""How well `port` carries the catalog to a verl it was not validated on, judged by an oracle.

    python benchmarks/port.py [--rounds 3] [--releases 0.7.1 0.7.0 0.6.1]

The corpus: refactors of verl 0.9.0 written as edits that apply alike to the pristine tree and to
the instrumented one (rename a method, a class, a local a template reads, a local an anchor names;
move a method into a mixin; reorder methods; requote). For each refactor R:

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
was placed. And port's whole-process time against apply's on the same tree (`--dry-run` both: each
reads the tree and writes nothing), medians of `--rounds`.

Targets (issue 19): >= 90% of the points that need it ported exactly; 0 wrong at `likely` and
above; port <= 2x apply's time.
"""

from __future__ import annotations

import argparse
import ast
import re
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from common import byte_compile_the_tool, timed

from trace_instrument.engine.apply import apply
from trace_instrument.engine.check import check
from trace_instrument.engine.port import DEFAULT_OUT, port
from trace_instrument.engine.verify import verify
from trace_instrument.model import Catalog, Confidence, PortStatus, PortSuggestion, Selection, Status
from trace_instrument.spec import load_catalog
from trace_instrument.wheels import verl_tree

RAY_TRAINER = "verl/trainer/ppo/ray_trainer.py"
AGENT_LOOP = "verl/experimental/agent_loop/agent_loop.py"
Refactor = Callable[[Path], None]


def _sub(relative: str, pattern: str, replacement: str) -> Refactor:
    """A regular-expression edit of one file (it must match at least once)."""

    def edit(tree: Path) -> None:
        path = tree / relative
        text = path.read_text(encoding="utf-8")
        new, count = re.subn(pattern, replacement, text, flags=re.MULTILINE)
        if not count:
            raise SystemExit(f"{relative}: {pattern!r} matches nothing in {tree}")
        path.write_text(new, encoding="utf-8")

    return edit


def _method_lines(text: str, cls: str, method: str) -> tuple[ast.ClassDef, int, int]:
    """The class, and the first and last line (1-based) of one of its methods, decorators included."""
    module = ast.parse(text)
    owner = next(n for n in module.body if isinstance(n, ast.ClassDef) and n.name == cls)
    node = next(n for n in owner.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == method)
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    assert node.end_lineno is not None
    return owner, first, node.end_lineno


def _to_mixin(relative: str, cls: str, method: str, mixin: str) -> Refactor:
    """Move a method out of its class into a new base class defined just above it."""

    def edit(tree: Path) -> None:
        path = tree / relative
        text = path.read_text(encoding="utf-8")
        owner, first, last = _method_lines(text, cls, method)
        lines = text.splitlines(keepends=True)
        body = lines[first - 1 : last]
        del lines[first - 1 : last]
        header = owner.lineno - 1 + len(owner.decorator_list)
        lines[header] = lines[header].replace(f"class {cls}:", f"class {cls}({mixin}):", 1)
        lines[owner.lineno - 1 : owner.lineno - 1] = [f"class {mixin}:\n", *body, "\n\n"]
        path.write_text("".join(lines), encoding="utf-8")

    return edit


def _to_module(relative: str, cls: str, method: str, module: str, mixin: str) -> Refactor:
    """Move a method into a mixin class of a new module (with the source module's imports, which
    the method's code reads), imported by the source module just above the class."""

    def edit(tree: Path) -> None:
        path = tree / relative
        text = path.read_text(encoding="utf-8")
        owner, first, last = _method_lines(text, cls, method)
        lines = text.splitlines(keepends=True)
        body = lines[first - 1 : last]
        imports = [
            "".join(lines[n.lineno - 1 : n.end_lineno])
            for n in ast.parse(text).body
            if isinstance(n, ast.Import) or (isinstance(n, ast.ImportFrom) and n.module != "__future__")
        ]
        new = ["from __future__ import annotations\n\n", *imports, f"\n\nclass {mixin}:\n", *body]
        (tree / module.replace(".", "/")).with_suffix(".py").write_text("".join(new), encoding="utf-8")
        del lines[first - 1 : last]
        header = owner.lineno - 1 + len(owner.decorator_list)
        lines[header] = lines[header].replace(f"class {cls}:", f"class {cls}({mixin}):", 1)
        lines[owner.lineno - 1 : owner.lineno - 1] = [f"from {module} import {mixin}\n\n\n"]
        path.write_text("".join(lines), encoding="utf-8")

    return edit


def _to_end(relative: str, cls: str, method: str) -> Refactor:
    """Move a method to the end of its class (nothing else changes)."""

    def edit(tree: Path) -> None:
        path = tree / relative
        text = path.read_text(encoding="utf-8")
        owner, first, last = _method_lines(text, cls, method)
        lines = text.splitlines(keepends=True)
        assert owner.end_lineno is not None
        body = ["\n", *lines[first - 1 : last]]
        end = owner.end_lineno
        lines[end:end] = body
        del lines[first - 1 : last]
        path.write_text("".join(lines), encoding="utf-8")

    return edit


CORPUS: dict[str, Refactor] = {
    "rename a method (RayPPOTrainer.fit)": _sub(RAY_TRAINER, r"^    def fit\(self", "    def fit_loop(self"),
    "rename a class (AgentLoopWorker)": _sub(
        AGENT_LOOP, r"(?<=^class )AgentLoopWorker\b|(?<=ray\.remote\()AgentLoopWorker\b", "RolloutWorker"
    ),
    "rename a local a template reads (rollout_n)": _sub(RAY_TRAINER, r"(?<!['\"])\brollout_n\b", "n_samples"),
    "rename a local an anchor names (final_output)": _sub(AGENT_LOOP, r"\bfinal_output\b", "last_output"),
    "move a method into a mixin (_compute_score)": _to_mixin(
        AGENT_LOOP, "AgentLoopWorker", "_compute_score", "_ScoringMixin"
    ),
    "move a method into another module (_compute_score)": _to_module(
        AGENT_LOOP, "AgentLoopWorker", "_compute_score", "verl.experimental.agent_loop.scoring", "ScoringMixin"
    ),
    "reorder methods (_compute_score last)": _to_end(AGENT_LOOP, "AgentLoopWorker", "_compute_score"),
    "requote (reward_extra_info)": _sub(AGENT_LOOP, r'"reward_extra_info"', "'reward_extra_info'"),
}


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
    tree = _copy(verl_tree(version), work / f"verl-{version}")
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
    }


def _timing(tree: Path, rounds: int) -> tuple[float, float]:
    """Medians of port's and apply's whole-process wall time (`--dry-run` both), run in turns."""
    command = [sys.executable, "-m", "trace_instrument"]
    ports, applies = [], []
    for _ in range(rounds):
        ports.append(timed([*command, "port", "--dry-run", str(tree)], ok=(0, 1)).seconds)
        applies.append(timed([*command, "apply", "--dry-run", str(tree)], ok=(0, 1)).seconds)
    return statistics.median(ports), statistics.median(applies)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--releases", nargs="*", default=["0.7.1"])
    args = parser.parse_args()
    byte_compile_the_tool()
    catalog = load_catalog()
    with tempfile.TemporaryDirectory(prefix="trace-instrument-port-bench-") as scratch:
        work = Path(scratch)
        pristine = verl_tree("0.9.0")
        instrumented = _copy(pristine, work / "instrumented")
        apply(instrumented, catalog)
        print(
            f"{'refactor of verl 0.9.0':<52} {'need':>5} {'exact':>6} {'wrong':>6} {'left':>5}  files  | with guesses"
        )
        totals = [0, 0, 0, 0, 0]
        for name, refactor in CORPUS.items():
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
