"""Real verl trees `port` must reach (issue 38), and the oracle that judges it: for every point plain `apply` cannot
place as shipped in a tree, where it belongs, read off the tree's code by hand (tests/fixtures/port_trees/README.md).
Shared by tests/test_port_trees.py and benchmarks/port.py."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from trace_instrument.engine.apply import apply
from trace_instrument.engine.port import port
from trace_instrument.model import Catalog, Confidence, PortStatus, Selection
from trace_instrument.spec import load_catalog
from trace_instrument.wheels import verl_tree

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "port_trees"
ORACLES = FIXTURES / "oracle"
# the PyPI releases (their wheels, fetched and cached as the other real-tree tests do), then verl's history
TREES = ("0.6.0", "0.6.1", "0.7.0", "0.7.1", "866a1eaa5", "3c5f6e049", "3d66a3d7c", "45632b5fa", "a5ca1290a")
# commits of verl's history vendored and read after port's work on the trees above, never tuned to
HELD_OUT = ("b6380df8d", "e40da0564")


@dataclass(frozen=True)
class Place:
    """Where the oracle puts one point: the lines apply may report for it (none: it has no place)."""

    point_id: str
    file: str
    line: int  # the first of the statements its edits are placed against (0: no place)
    lines: frozenset[int]  # that line and the others as right (an edit that may go anywhere in its block)
    statement: str = ""  # the text of the first line, as the oracle's reader saw it
    reason: str = ""  # no place: why


def tree_root(name: str) -> Path:
    """A tree's pristine checkout: a release's cached wheel, or a vendored commit's catalog files."""
    return verl_tree(name) if "." in name else FIXTURES / name


def oracle(name: str) -> dict[str, Place]:
    """The oracle of one tree, by point id."""
    data = yaml.safe_load((ORACLES / f"{name}.yaml").read_text(encoding="utf-8"))
    places = {}
    for point_id, entry in data["points"].items():
        if entry.get("place") == "none":
            places[point_id] = Place(point_id, entry["file"], 0, frozenset(), reason=entry["reason"])
        else:
            lines = frozenset([entry["line"], *entry.get("also", ())])
            places[point_id] = Place(point_id, entry["file"], entry["line"], lines, statement=entry["statement"])
    return places


def misread(root: Path, places: dict[str, Place]) -> list[str]:
    """Oracle entries whose statement is not the text at their line in the tree (the oracle read another tree)."""
    wrong = []
    for place in places.values():
        if place.line:
            text = (root / place.file).read_text(encoding="utf-8").splitlines()[place.line - 1].strip()
            if text != place.statement:
                wrong.append(f"{place.point_id}: line {place.line} is {text!r}, not {place.statement!r}")
    return wrong


@dataclass
class Judged:
    """One tree against its oracle."""

    lost: int  # points plain apply cannot place as shipped
    with_place: int  # of them, those the oracle gives a place
    likely: list[str] = field(default_factory=list)  # right, placed by port's default run (`likely` and surer)
    guesses: list[str] = field(default_factory=list)  # right only with `--min-confidence guess`
    wrong: list[str] = field(default_factory=list)  # "id (confidence): line N, oracle M"
    left: list[str] = field(default_factory=list)  # a place, and port did not put it there

    @property
    def wrong_at_likely(self) -> list[str]:
        return [w for w in self.wrong if "(guess)" not in w]


def _placed(tree: Path, catalog: Catalog, sure: Confidence, out: Path) -> tuple[dict[str, int], dict[str, str]]:
    """The line apply reports for each point in place after port at `sure` writes its overrides into `out`, and
    port's confidence per point it wrote (a point placed without an override of its own: carried)."""
    result = port(tree, catalog, Selection(), lambda folder: load_catalog([folder]), out=out, min_confidence=sure)
    written = {
        s.point_id: s.confidence.value if s.confidence is not None else "?"
        for s in result.suggestions
        if s.status is PortStatus.PORTED
    }
    ported = load_catalog([out]) if written else catalog
    lines = {r.point_id: r.line for r in apply(tree, ported, Selection(), write=False).points if r.status.in_place}
    return lines, written


def judge(name: str, catalog: Catalog, work: Path) -> Judged:
    """port on one tree (a copy), at the default confidence and with guesses, judged against the oracle."""
    tree = work / f"verl-{name}"
    shutil.copytree(tree_root(name), tree, ignore=shutil.ignore_patterns("__pycache__"))
    places = oracle(name)
    shipped = {r.point_id for r in apply(tree, catalog, Selection(), write=False).points if r.status.in_place}
    default, sure = _placed(tree, catalog, Confidence.LIKELY, work / f"{name}-likely")
    guessing, _ = _placed(tree, catalog, Confidence.GUESS, work / f"{name}-guess")
    judged = Judged(lost=len(places), with_place=sum(1 for p in places.values() if p.lines))
    for point_id, place in places.items():
        assert point_id not in shipped, f"{name}: the oracle has {point_id}, which apply places as shipped"
        run, line = ("default", default[point_id]) if point_id in default else ("guess", guessing.get(point_id, 0))
        if line and line in place.lines:
            (judged.likely if run == "default" else judged.guesses).append(point_id)
        elif line:
            how = sure.get(point_id, "carried") if run == "default" else "guess"
            judged.wrong.append(f"{point_id} ({how}): line {line}, oracle {sorted(place.lines) or 'no place'}")
        elif place.lines:
            judged.left.append(point_id)
    return judged
