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


def _with_other_separators(root, catalog) -> None:
    """Form feeds between top-level definitions (as GNU-style code has them) and comments holding
    characters `str.splitlines` breaks at but Python's tokenizer does not (U+2028, NEL, \\x1c)."""
    for relative in catalog.files:
        path = root / relative
        if not path.exists():
            continue
        text = path.read_text(encoding="utf-8")
        text = re.sub(r"^(class |def |async def )", "\x0c\n\\1", text, flags=re.MULTILINE)
        comment = "# a line\u2028 that\x85 goes\x1c on"
        text = re.sub(r"^(\s*)(def |async def )", f"\\1{comment}\n\\1\\2", text, flags=re.MULTILINE)
        path.write_text(text, encoding="utf-8")


def test_a_checkout_with_form_feeds_and_unicode_separators_is_handled_as_python_reads_it(verl_090, tmp_path, catalog):
    from trace_instrument.engine.check import check
    from trace_instrument.engine.remove import remove

    original = copy_tree(verl_090, tmp_path / "original")
    assert apply(original, catalog).written
    odd = copy_tree(verl_090, tmp_path / "odd")
    _with_other_separators(odd, catalog)
    before = {f: (odd / f).read_bytes() for f in catalog.files if (odd / f).exists()}
    assert all(b"\x0c\n" in data for data in before.values())
    result = apply(odd, catalog)
    assert {p.status for p in result.points} == {Status.APPLIED}, [
        p for p in result.points if p.status is not Status.APPLIED
    ]
    assert _sites(odd, catalog) == _sites(original, catalog)
    assert {p.status for p in check(odd, catalog).points} == {Status.PRESENT}
    assert verify(odd, catalog).ok
    # a business edit below a form feed is business code changed, whatever the lines around it
    trainer = odd / "verl/trainer/ppo/ray_trainer.py"
    edited = trainer.read_text(encoding="utf-8").replace("self.global_steps += 1", "self.global_steps += 2", 1)
    assert edited != trainer.read_text(encoding="utf-8")
    trainer.write_text(edited, encoding="utf-8")
    assert not verify(odd, catalog).ok
    trainer.write_text(edited.replace("self.global_steps += 2", "self.global_steps += 1", 1), encoding="utf-8")
    assert not remove(odd, catalog).error
    assert {f: (odd / f).read_bytes() for f in before} == before
