"""apply and remove edit only the statements their changes touch (trace_instrument.edit.chunks),
and give exactly the text an edit of the whole module gives.

Each comparison runs apply twice on copies of one tree, once cutting chunks and once with
`chunks.ENABLED` off (the whole module parsed and printed by LibCST): on every catalog file
of the three verl releases, on every apply fixture, and on small files made to sit on each
boundary a chunk is cut at (comments that LibCST gives a neighbour's block, decorators,
lines two statements share, tabs, CRLF, the import block).
"""

from __future__ import annotations

import ast
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import libcst as cst
import pytest
from support import copy_tree, tree_bytes

from trace_instrument.edit import chunks
from trace_instrument.edit.regions import split_lines
from trace_instrument.engine.apply import apply
from trace_instrument.engine.manifest import MANIFEST_NAME as MANIFEST
from trace_instrument.engine.remove import remove
from trace_instrument.model import EXTRAS, Catalog, RunResult, Selection
from trace_instrument.spec import load_catalog

ALL = Selection(extras=frozenset(EXTRAS))
FIXTURES = Path(__file__).parent / "fixtures" / "apply"
TARGET = "verl/target.py"


@pytest.fixture
def serial(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, bool]]:
    """apply in this process (no workers), with a record of each file offered: its text -> cut."""
    monkeypatch.setenv("TRACE_INSTRUMENT_WORKERS", "1")
    cuts: dict[str, bool] = {}
    original = chunks.edit_by_chunks

    def recording(text: str, *args: Any, **kwargs: Any) -> chunks.ChunkedEdit | None:
        result = original(text, *args, **kwargs)
        cuts[text] = result is not None
        return result

    monkeypatch.setattr(chunks, "edit_by_chunks", recording)
    yield cuts


def _both_ways(
    monkeypatch: pytest.MonkeyPatch, tree: Path, tmp_path: Path, catalog: Catalog
) -> tuple[dict[str, bytes], dict[str, bytes], RunResult, RunResult]:
    """The tree's files after an apply by chunks and after an apply of whole modules."""
    outputs = []
    for enabled in (True, False):
        checkout = copy_tree(tree, tmp_path / f"chunks-{enabled}")
        monkeypatch.setattr(chunks, "ENABLED", enabled)
        result = apply(checkout, catalog, ALL)
        # the manifest too: its records of replaced regions are measured on the chunks
        outputs.append((result, {**tree_bytes(checkout), MANIFEST: (checkout / MANIFEST).read_bytes()}))
    (by_chunks, chunked), (whole, whole_files) = outputs
    return chunked, whole_files, by_chunks, whole


def _removed_both_ways(
    monkeypatch: pytest.MonkeyPatch, tree: Path, tmp_path: Path, catalog: Catalog, edited: bytes | None = None
) -> tuple[dict[str, bytes], dict[str, bytes], RunResult, RunResult]:
    """An instrumented tree's files after a remove by chunks and after one of whole modules
    (`edited`: the target's text as the fork edited it after apply)."""
    outputs = []
    for enabled in (True, False):
        checkout = copy_tree(tree, tmp_path / f"removed-{enabled}")
        if edited is not None:
            (checkout / TARGET).write_bytes(edited)
        monkeypatch.setattr(chunks, "ENABLED", enabled)
        result = remove(checkout, catalog, ALL)
        manifest = checkout / MANIFEST
        outputs.append(
            (result, {**tree_bytes(checkout), MANIFEST: manifest.read_bytes() if manifest.exists() else b""})
        )
    (by_chunks, chunked), (whole, whole_files) = outputs
    return chunked, whole_files, by_chunks, whole


def _statuses(result: RunResult) -> list[tuple[str, str]]:
    return [(p.point_id, p.status.value) for p in result.points]


CUT_ON_EVERY_RELEASE = (
    "verl/trainer/ppo/ray_trainer.py",
    "verl/experimental/agent_loop/agent_loop.py",
    "verl/experimental/agent_loop/tool_agent_loop.py",
)


@pytest.mark.parametrize("version", ["0.9.0", "0.9.1", "0.8.0"])
def test_chunks_give_the_whole_module_edit_on_every_release(
    version: str,
    verl_release: Callable[[str], Path],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    catalog: Catalog,
    serial: dict[str, bool],
) -> None:
    tree = verl_release(version)
    chunked, whole, by_chunks, by_modules = _both_ways(monkeypatch, tree, tmp_path, catalog)
    assert _statuses(by_chunks) == _statuses(by_modules)
    assert sorted(chunked) == sorted(whole)
    assert [name for name in chunked if chunked[name] != whole[name]] == []
    # the trainers and the agent loop (whose rewrites the manifest records) were cut into chunks
    cut = [name for name in CUT_ON_EVERY_RELEASE if serial.get((tree / name).read_text(encoding="utf-8"))]
    assert cut == list(CUT_ON_EVERY_RELEASE)
    assert sum(serial.values()) >= len(serial) - 1, "at most one file edited whole"

    serial.clear()
    applied = tmp_path / "chunks-True"
    chunked, whole, by_chunks, by_modules = _removed_both_ways(monkeypatch, applied, tmp_path, catalog)
    assert _statuses(by_chunks) == _statuses(by_modules)
    assert chunked == whole
    cut = [name for name in CUT_ON_EVERY_RELEASE if serial.get((applied / name).read_text(encoding="utf-8"))]
    assert cut == list(CUT_ON_EVERY_RELEASE), "remove cut them into chunks too"


def _fixture_cases() -> list[Any]:
    cases = [*sorted(FIXTURES.glob("*/after.py")), *sorted((FIXTURES.parent / "remove").glob("*/applied.py"))]
    return [pytest.param(p.parent, id=f"{p.parent.parent.name}/{p.parent.name}") for p in cases]


@pytest.mark.parametrize("case", _fixture_cases())
def test_chunks_give_the_whole_module_edit_on_every_fixture(
    case: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, serial: dict[str, bool]
) -> None:
    """The file and the manifest's records (test_fixtures holds the chunked file to after.py)."""
    tree = tmp_path / "tree"
    (tree / TARGET).parent.mkdir(parents=True)
    (tree / TARGET).write_bytes((case / "before.py").read_bytes())
    spec = tmp_path / "spec"
    spec.mkdir()
    shutil.copy(case / "spec.yaml", spec / "spec.yaml")
    catalog = load_catalog([spec], shipped=False)
    chunked, whole, by_chunks, by_modules = _both_ways(monkeypatch, tree, tmp_path, catalog)
    assert _statuses(by_chunks) == _statuses(by_modules)
    assert chunked == whole
    edited = (case / "edited.py").read_bytes() if (case / "edited.py").exists() else None
    removed = _removed_both_ways(monkeypatch, tmp_path / "chunks-True", tmp_path, catalog, edited)
    assert _statuses(removed[2]) == _statuses(removed[3])
    assert removed[0] == removed[1]


# -- files made to sit on a chunk's boundaries ------------------------------------------------------

SPEC = """\
file: verl/target.py
points:
  - id: t.inner
    facility: sample_flow
    title: a call inside fit
    scope: Trainer.fit
    after: |
      batch = prepare(batch)
    code: |
      trace_flow(uid=batch, traj_uid='N/A', from_module='A', to_module='B', stage='S', detail='d')
  - id: t.method
    facility: progress
    title: a method before fit
    scope: Trainer
    before: |
      def fit(self, batch): ...
    code: |

      def _logged(self):
          log_progress('fetch')
  - id: t.top
    facility: progress
    title: a helper after the logger's level
    scope: <module>
    after: |
      logger.level = 1
    code: |


      def _helper():
          log_progress('helper')
"""

HEAD = '''"""The module."""

import os

from verl.utils.other import make_logger, prepare

logger = make_logger()
logger.level = 1
'''

FIT = """    def fit(self, batch):
        batch = prepare(batch)
        return batch
"""

BOUNDARIES = {
    "plain": HEAD + "\n\nclass Trainer:\n    def setup(self):\n        pass\n\n" + FIT,
    "comment-ending-the-block-above": HEAD
    + "\n\nclass Trainer:\n    def setup(self):\n        pass\n        # the end of setup\n\n"
    + FIT,
    "comment-between-methods": HEAD
    + "\n\nclass Trainer:\n    def setup(self):\n        pass\n\n    # training\n"
    + FIT,
    "comment-at-column-0-between": HEAD
    + "\n\nclass Trainer:\n    def setup(self):\n        pass\n\n# training\n"
    + FIT,
    "comment-ending-fit": HEAD + "\n\nclass Trainer:\n" + FIT + "        # end of fit\n\n    x = 1\n",
    "comment-ending-the-class": HEAD + "\n\nclass Trainer:\n" + FIT + "    # end of the class\n",
    "decorated": HEAD
    + "\n\nclass Trainer:\n    @property\n    def setup(self):\n        pass\n\n    @staticmethod\n"
    + FIT.replace("self, ", ""),
    "fit-first-in-class": HEAD + "\n\nclass Trainer:\n" + FIT,
    "fit-first-with-docstring": HEAD + '\n\nclass Trainer:\n    """A trainer."""\n\n' + FIT,
    "two-space-indent": HEAD.replace("logger", "logger")
    + "\n\nclass Trainer:\n  def setup(self):\n    pass\n\n"
    + FIT.replace("    ", "  "),
    "indented-first-in-an-if": HEAD
    + "\n\nif True:\n    class Trainer:\n"
    + FIT.replace("    ", "        ").replace("        def", "        def"),
    "crlf": (HEAD + "\n\nclass Trainer:\n" + FIT).replace("\n", "\r\n"),
    "tabs": HEAD + "\n\nclass Trainer:\n\tdef fit(self, batch):\n\t\tbatch = prepare(batch)\n\t\treturn batch\n",
    "shared-line-after-logger": HEAD.replace("logger.level = 1", "logger.level = 1; y = 1")
    + "\n\nclass Trainer:\n"
    + FIT,
    "no-docstring-no-blank": HEAD.replace('"""The module."""\n\n', "") + "class Trainer:\n" + FIT,
    "tracing-imported-already": HEAD.replace(
        "import os\n", "import os\n\nfrom verl.utils.tracing import log_progress\n"
    )
    + "\n\nclass Trainer:\n"
    + FIT,
    "helper-first-after-imports": '"""The module."""\n\nfrom verl.utils.other import make_logger, prepare\n'
    "logger.level = 1\n\n\nclass Trainer:\n" + FIT,
    "no-imports": '"""The module."""\nlogger = print\nlogger.level = 1\n\n\ndef prepare(batch):\n    return batch\n\n\n'
    "class Trainer:\n" + FIT,
    "no-final-line-break": HEAD + "\n\nclass Trainer:\n" + FIT.rstrip("\n"),
    "fit-last-after-deep-comment-of-a-simple-statement": HEAD
    + "\n\nclass Trainer:\n    x = 1\n            # deeper than x\n"
    + FIT,
    "nested-def-in-fit": HEAD + "\n\nclass Trainer:\n    def fit(self, batch):\n        def inner():\n"
    "            return 1\n\n        batch = prepare(batch)\n        return batch\n",
}


@pytest.mark.parametrize("name", sorted(BOUNDARIES))
def test_chunks_give_the_whole_module_edit_on_each_boundary(
    name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, serial: dict[str, bool]
) -> None:
    source = BOUNDARIES[name]
    compile(source, name, "exec")
    tree = tmp_path / "tree"
    (tree / TARGET).parent.mkdir(parents=True)
    (tree / TARGET).write_bytes(source.encode())
    spec = tmp_path / "spec"
    spec.mkdir()
    (spec / "spec.yaml").write_text(SPEC)
    catalog = load_catalog([spec], shipped=False)
    chunked, whole, by_chunks, by_modules = _both_ways(monkeypatch, tree, tmp_path, catalog)
    assert _statuses(by_chunks) == _statuses(by_modules)
    assert chunked[TARGET] == whole[TARGET]
    assert chunked[TARGET] != source.encode(), "the case must place something"


def test_a_plain_file_is_cut_into_chunks(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, serial: dict[str, bool]
) -> None:
    """The comparisons above could pass by never cutting: this file is cut."""
    tree = tmp_path / "tree"
    (tree / TARGET).parent.mkdir(parents=True)
    (tree / TARGET).write_text(BOUNDARIES["plain"])
    spec = tmp_path / "spec"
    spec.mkdir()
    (spec / "spec.yaml").write_text(SPEC)
    _both_ways(monkeypatch, tree, tmp_path, load_catalog([spec], shipped=False))
    assert serial == {BOUNDARIES["plain"]: True}


# -- the module's default indentation -------------------------------------------------------------


def test_file_indent_is_the_one_libcst_detects(
    verl_090: Path, verl_091: Path, verl_080: Path, catalog: Catalog
) -> None:
    targets = [
        root / name for root in (verl_090, verl_091, verl_080) for name in catalog.files if (root / name).exists()
    ]
    fixtures = sorted(FIXTURES.glob("*/before.py"))
    checked = 0
    for path in [*targets, *fixtures]:
        source = path.read_text(encoding="utf-8", errors="surrogateescape")
        checked += _agrees(str(path), source)
    for name, source in {**BOUNDARIES, **INDENTS}.items():
        checked += _agrees(name, source)
    assert checked > 40


INDENTS = {
    "one-line-suite-after-a-long-header": "class A(\n    object): pass\n\n\nclass B:\n  x = 1\n",
    "decorated-first": "class A:\n  @property\n  def f(self):\n      return 1\n",
    "no-indented-line": "x = 1\nif x: y = 2\n",
    "one-line-if-then-else": "if x: pass\nelse:\n  y = 1\n\n\nclass B:\n    z = 1\n",
    "one-line-try": "try: import a\nexcept ImportError:\n  a = None\n",
}


def _agrees(name: str, source: str) -> int:
    try:
        tree = ast.parse(source)
        indent = chunks.file_indent(tree, split_lines(source))
    except (chunks.Unsuitable, SyntaxError):  # a file chunks refuse (or ast cannot read) is not compared
        return 0
    assert indent == cst.parse_module(source).default_indent, name
    return 1
