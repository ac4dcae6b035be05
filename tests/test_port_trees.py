"""`port` on real verl trees (issue 38), judged by an oracle read off each tree's code by hand
(tests/fixtures/port_trees/): never a wrong place at `likely` or surer, and never fewer right places
than the figures recorded here (docs/benchmarks.md) — they only go up."""

from __future__ import annotations

from pathlib import Path

import port_oracle
import pytest

from trace_instrument.engine import neighbours
from trace_instrument.model import Catalog

# per tree: the points port puts where the oracle says at the default confidence, and with guesses too
# (python benchmarks/port.py --trees: the figures of docs/benchmarks.md)
RIGHT = {
    "0.6.0": (16, 21),
    "0.6.1": (19, 22),
    "0.7.0": (13, 18),
    "0.7.1": (11, 15),
    "866a1eaa5": (11, 14),
    "3c5f6e049": (13, 14),
    "3d66a3d7c": (20, 20),
    "45632b5fa": (9, 9),
    "a5ca1290a": (4, 4),
    # held out: 1 lost (the tracker, no mm_processor_kwargs line), 4 carried
    "b6380df8d": (5, 5),
    # held out: the agent loop's return without validate, no combined batch; guesses: task-started, the central
    # dump (its return changed), the tool record and the stop reason it carries
    "e40da0564": (11, 15),
}
COMMITS = [t for t in (*port_oracle.TREES, *port_oracle.HELD_OUT) if "." not in t]


@pytest.mark.parametrize("commit", COMMITS)
def test_the_oracle_reads_the_vendored_tree(commit: str) -> None:
    """Each place the oracle gives is the statement it names, in the vendored files (cheap: no port run)."""
    places = port_oracle.oracle(commit)
    assert places
    assert port_oracle.misread(port_oracle.FIXTURES / commit, places) == []
    assert all(p.lines or p.reason for p in places.values())


@pytest.mark.e2e
@pytest.mark.parametrize("name", (*port_oracle.TREES, *port_oracle.HELD_OUT))
def test_port_on_a_real_tree_against_the_oracle(name: str, catalog: Catalog, tmp_path: Path) -> None:
    assert port_oracle.misread(port_oracle.tree_root(name), port_oracle.oracle(name)) == []
    judged = port_oracle.judge(name, catalog, tmp_path)
    assert judged.wrong_at_likely == []
    likely, with_guesses = RIGHT[name]
    assert len(judged.likely) >= likely, judged.left
    assert len(judged.likely) + len(judged.guesses) >= with_guesses, judged.left
    assert len(judged.likely) + len(judged.guesses) + len(judged.wrong) + len(judged.left) == judged.with_place + sum(
        1 for w in judged.wrong if "no place" in w
    )


@pytest.mark.e2e
def test_the_shipped_neighbourhoods_are_the_validated_releases(verl_090: Path, catalog: Catalog) -> None:
    """neighbours.json is what tools/anchor_neighbours.py measures on verl 0.9.0 with the shipped catalog: an
    anchor changed without running the script again would leave port reading another anchor's neighbours."""
    assert neighbours.measured(verl_090, catalog) == neighbours.shipped()
    assert neighbours.shipped()["progress.v0.gen-throughput"] == [
        (
            "with marked_timer('gen', timing_raw, color='red'):",
            "if self.config.algorithm.adv_estimator == AdvantageEstimator.REMAX:",
        )
    ]


@pytest.mark.e2e
def test_the_shipped_attribute_reads_are_the_validated_releases(verl_090: Path, catalog: Catalog) -> None:
    """attribute_reads.json is what tools/anchor_neighbours.py measures on verl 0.9.0 (the statements of each
    point's scope reading an attribute of self its code reads): a template changed without running the script
    again would leave port binding from another statement."""
    assert neighbours.measured_attribute_reads(verl_090, catalog) == neighbours.shipped_attribute_reads()
    assert neighbours.shipped_attribute_reads()["progress.v1.step-banner"]["self.steps_per_epoch"] == [
        "current_epoch = self.global_steps // self.steps_per_epoch",
        "current_epoch = (self.global_steps - 1) // self.steps_per_epoch",
    ]
