"""A reformatted checkout (another line length and quote style, extra comments and blank
lines around anchors) gets the same call sites as the original."""

from __future__ import annotations

import ast
import collections
import re
import subprocess
import sys

from support import copy_tree

from trace_instrument.engine.apply import apply
from trace_instrument.engine.verify import verify
from trace_instrument.locate.index import FileIndex
from trace_instrument.model import Status
from trace_instrument.spec.signatures import signatures_in


def _sites(root, catalog) -> collections.Counter:
    """(file, enclosing function, tracing-call signature) for every tracing call."""
    found = collections.Counter()
    for path in catalog.files:
        if not (root / path).exists():
            continue
        tree = ast.parse((root / path).read_bytes())
        index = FileIndex(tree)
        scopes = {id(n): name for name, nodes in index.scopes.items() for n in nodes}
        for site in index.sites:
            if any(isinstance(getattr(site.node, f, None), list) for f in ("body", "orelse", "handlers", "finalbody")):
                continue
            scope = next((scopes[id(a)] for a in reversed(site.ancestors) if id(a) in scopes), "<module>")
            for signature, _ in signatures_in([site.node], catalog.helpers):
                found[(path, scope, signature)] += 1
    return found


def _reformat(root, catalog) -> None:
    files = [str(root / f) for f in catalog.files if (root / f).exists()]
    config = ["--config", "line-length = 79", "--config", "format.quote-style = 'single'"]
    subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--no-cache", *config, *files], check=True, capture_output=True
    )
    trainer = root / "verl/trainer/ppo/ray_trainer.py"
    text = trainer.read_text()
    # comments and blank lines right above the anchors
    text = re.sub(r"^(\s*)(with marked_timer\()", r"\1# timed stage\n\n\1\2", text, flags=re.MULTILINE)
    trainer.write_text(text)


def test_reformatted_checkout_gets_the_same_call_sites(verl_090, tmp_path, catalog):
    original = copy_tree(verl_090, tmp_path / "original")
    assert apply(original, catalog).written
    reformatted = copy_tree(verl_090, tmp_path / "reformatted")
    _reformat(reformatted, catalog)
    present = [f for f in catalog.files if (verl_090 / f).exists()]
    changed = [f for f in present if (verl_090 / f).read_bytes() != (reformatted / f).read_bytes()]
    assert len(present) == 13 and changed == present, "the reformatting must really change every file"
    result = apply(reformatted, catalog)
    assert {p.status for p in result.points} == {Status.APPLIED}, [
        p for p in result.points if p.status is not Status.APPLIED
    ]
    assert _sites(reformatted, catalog) == _sites(original, catalog)
    assert sum(_sites(reformatted, catalog).values()) > 150
    assert verify(reformatted, catalog).ok
