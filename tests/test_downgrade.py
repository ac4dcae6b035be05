"""An older release never writes over a tree a newer one wrote (it would put its older runtime files
over the newer ones); a tree from 0.1.0, which names no release in its runtime, is upgraded.
Synthetic checkouts of one small file; the newer release is made by editing what this one wrote,
as a newer tool would have written it (its runtime files, their records in the manifest)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import pytest

import trace_instrument
from trace_instrument.engine.apply import apply
from trace_instrument.engine.check import check
from trace_instrument.engine.releases import UPGRADE, release
from trace_instrument.engine.remove import remove
from trace_instrument.model import Catalog, RunErrorKind, RuntimeStatus
from trace_instrument.render import exits
from trace_instrument.spec import load_catalog

SPEC = """\
file: verl/target.py
points:
  - id: t.said
    facility: progress
    title: said after the extraction
    scope: f
    after: |
      r = extract(b)
    code: |
      log_progress('extracted')
"""
BUSINESS = "from verl.utils.reward import extract\n\n\ndef f(b):\n    r = extract(b)\n    return r\n"
RUNTIME = "verl/utils/tracing"
MANIFEST = ".trace-instrument.json"
OURS = trace_instrument.__version__
VERSION_LINE = f'\n# the trace-instrument release that wrote this package: an older release refuses to write over it\n__version__ = "{OURS}"\n'


def _catalog(tmp_path: Path) -> Catalog:
    folder = tmp_path / "spec"
    folder.mkdir()
    (folder / "target.yaml").write_text(SPEC, encoding="utf-8")
    # the shipped runtime package, installed with this one point
    return dataclasses.replace(load_catalog([folder], shipped=False), runtime=load_catalog().runtime)


def _applied(tmp_path: Path, catalog: Catalog) -> Path:
    root = tmp_path / "checkout"
    (root / "verl").mkdir(parents=True)
    (root / "verl/target.py").write_text(BUSINESS, encoding="utf-8")
    assert apply(root, catalog).written
    return root


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


RUNTIME_0_1_0_INIT = Path(__file__).resolve().parent / "fixtures" / "runtime-0.1.0" / "__init__.py"


def _as_written_by(root: Path, version: str | None, tool: str | None) -> None:
    """Make the tree as another release wrote it: its runtime's __version__ (None: no line, as 0.1.0
    wrote it), one more line in a runtime module (a newer runtime's own code), the manifest's
    "tool" (None: as is) and its records of the runtime files."""
    init = root / RUNTIME / "__init__.py"
    text = init.read_text(encoding="utf-8")
    assert VERSION_LINE in text
    init.write_text(text.replace(VERSION_LINE, "" if version is None else VERSION_LINE.replace(OURS, version)))
    if version is not None:
        with (root / RUNTIME / "trace.py").open("a", encoding="utf-8") as handle:
            handle.write("\n\ndef newer_helper():\n    return None\n")
    _record_in_manifest(root, tool)


def _record_in_manifest(root: Path, tool: str | None) -> None:
    """The manifest's "tool" (None: as is) and its records of the runtime files as they are now."""
    body = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
    if tool is not None:
        body["tool"] = tool
    body["runtime"] = {name: _hash((root / RUNTIME / name).read_bytes()) for name in body["runtime"]}
    (root / MANIFEST).write_text(json.dumps(body, indent=1) + "\n", encoding="utf-8")


def test_releases_are_ordered_by_their_numbers():
    assert release("0.10.0") > release("0.9.1") > release("0.9.0") > release("0.1.0")
    assert release("0.3.0rc1") == (0, 3, 0) and release("trace-instrument") is None
    assert release(OURS) > release("0.1.0"), "this release is newer than the one that named none"


@pytest.mark.parametrize(
    ("newer_in", "operation"),
    [
        ("both", "apply"),
        ("both", "apply --update"),
        ("both", "apply --dry-run"),
        ("both", "remove"),
        ("runtime", "apply"),  # the manifest deleted: the runtime still says
        ("manifest", "apply"),  # the runtime's line deleted by hand: the manifest still says
    ],
)
def test_an_older_release_refuses_to_write_over_a_newer_tree(tmp_path, newer_in, operation):
    catalog = _catalog(tmp_path)
    root = _applied(tmp_path, catalog)
    newer = ".".join(str(n + 1) for n in release(OURS))  # every part higher
    _as_written_by(root, newer if newer_in != "manifest" else None, f"trace-instrument {newer}")
    if newer_in == "runtime":
        (root / MANIFEST).unlink()
    before = _tree(root)
    run = {
        "apply": lambda: apply(root, catalog),
        "apply --update": lambda: apply(root, catalog, update=True),
        "apply --dry-run": lambda: apply(root, catalog, write=False),
        "remove": lambda: remove(root, catalog),
    }[operation]
    result = run()
    where = MANIFEST if newer_in == "manifest" else f"{RUNTIME}/__init__.py"
    assert not result.written and result.error is not None
    assert result.error.kind is RunErrorKind.NEWER_WRITER
    assert result.error.path in (where, MANIFEST)
    assert result.error.message.startswith(f"nothing written: trace-instrument {newer} wrote this checkout (")
    assert f"this is trace-instrument {OURS}, an older release" in result.error.message
    assert UPGRADE in result.error.message and "pip install -U trace-instrument" in UPGRADE
    assert _tree(root) == before, "nothing written, not even the lock's file"
    exit_code = exits.remove_exit(result) if operation == "remove" else exits.apply_exit(result)
    assert exit_code == exits.ERROR


def test_a_tree_from_0_1_0_is_upgraded(tmp_path):
    """0.1.0 wrote "trace-instrument 0.1.0" in the manifest and no release in the runtime: older."""
    catalog = _catalog(tmp_path)
    root = _applied(tmp_path, catalog)
    current = _tree(root)
    # the runtime's __init__.py as the last 0.1.0 shipped it (tests/fixtures/runtime-0.1.0)
    old_init = RUNTIME_0_1_0_INIT.read_bytes()
    (root / RUNTIME / "__init__.py").write_bytes(old_init)
    _record_in_manifest(root, "trace-instrument 0.1.0")
    shipped_earlier = (Path(__file__).resolve().parents[1] / "templates/runtime.earlier").read_text()
    assert f"__init__.py {_hash(old_init)}" in shipped_earlier.splitlines(), "0.1.0's runtime is a known release"
    assert check(root, catalog).error is None
    result = apply(root, catalog)
    assert result.written and result.error is None
    assert {f.path: f.status for f in result.runtime_files}[f"{RUNTIME}/__init__.py"] is RuntimeStatus.UPDATED
    assert _tree(root) == current, "the runtime and the manifest as this release writes them"
    assert json.loads((root / MANIFEST).read_text(encoding="utf-8"))["tool"] == f"trace-instrument {OURS}"


def test_the_same_release_writes_as_before(tmp_path):
    catalog = _catalog(tmp_path)
    root = _applied(tmp_path, catalog)
    before = _tree(root)
    again = apply(root, catalog)
    assert again.error is None and _tree(root) == before
    assert json.loads(before[MANIFEST])["tool"] == f"trace-instrument {OURS}"
    assert remove(root, catalog).written and "verl/utils/tracing/__init__.py" not in _tree(root)
