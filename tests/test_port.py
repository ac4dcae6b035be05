"""port finds where lost points belong, proves the place with apply, and writes overrides.

The refactors are text edits that apply alike to a pristine tree and to the tree apply made of
it (the oracle): port + apply --anchors on the refactored pristine tree must give the files,
and the manifest, of the refactor applied to the instrumented tree. The synthetic cases pin
each mechanism: a tie left for a person, context breaking a tie, confidence classes, a place
the proofs refuse, a point with no place.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import textwrap
from collections.abc import Callable
from pathlib import Path

import jsonschema
import pytest
import refactors
import yaml
from support import copy_tree, tree_bytes
from typer.testing import CliRunner

from trace_instrument.cli import app
from trace_instrument.engine.apply import apply
from trace_instrument.engine.check import check
from trace_instrument.engine.manifest import MANIFEST_NAME
from trace_instrument.engine.port import DEFAULT_OUT, PORT_HEADER, override_file_name, port
from trace_instrument.engine.port import place as port_module
from trace_instrument.engine.verify import verify
from trace_instrument.model import Catalog, Confidence, PortStatus, Reason, RunResult, Selection, Status
from trace_instrument.render import exits, jsonout
from trace_instrument.spec import load_catalog

RAY_TRAINER = "verl/trainer/ppo/ray_trainer.py"
AGENT_LOOP = "verl/experimental/agent_loop/agent_loop.py"
TOOL_LOOP = "verl/experimental/agent_loop/tool_agent_loop.py"


@pytest.fixture(scope="module")
def instrumented(applied_090_run: tuple[Path, RunResult]) -> Path:
    """verl 0.9.0 after one apply: the worker's shared tree (copied by each test)."""
    tree, result = applied_090_run
    assert exits.apply_exit(result) == exits.OK
    return tree


def _shipped_reload(folder: Path) -> Catalog:
    return load_catalog([folder])


def _refactor(tree: Path, relative: str, pattern: str, replacement: str, count: int) -> None:
    """A text edit of one file, made alike on every tree it is given (`count`: the matches it expects)."""
    path = tree / relative
    text = path.read_text(encoding="utf-8")
    assert len(re.findall(pattern, text, flags=re.MULTILINE)) == count, f"{relative}: {pattern!r}"
    path.write_text(re.sub(pattern, replacement, text, flags=re.MULTILINE), encoding="utf-8")


def _edit(relative: str, pattern: str, replacement: str, count: int) -> refactors.Refactor:
    return lambda tree: _refactor(tree, relative, pattern, replacement, count)


DECOY = "rename a method beside a decoy repeating its reward timer (fit_loop, _debug_reward)"
# case: (the file it edits, the edit, the points it loses)
REFACTORS: dict[str, tuple[str, refactors.Refactor, int]] = {
    # the training loop's method renamed: its 24 points move with it, and the point anchored
    # before `def fit` is anchored before `def fit_loop`
    "rename-a-method": (RAY_TRAINER, _edit(RAY_TRAINER, r"^    def fit\(self", "    def fit_loop(self", 1), 25),
    # the v1 trainer's `_step_once` renamed and given a parameter (verl renamed it `step` and dropped one): the
    # point anchored at its header (body start) follows, its header's parameters kept, and the 8 points that
    # require it are placed in the same run
    "rename-a-method-and-its-parameters": (
        refactors.V1_TRAINER,
        refactors.CORPUS["rename a method and change its parameters (PPOTrainer._step_once)"],
        16,
    ),
    # issue 38's decoy: fit renamed, and a debug helper repeating the reward timer's statements added to the class;
    # the reward points fit both, fit's other points (gone to fit_loop) decide: the files are the oracle's, the
    # helper untouched
    "rename-a-method-beside-a-decoy": (RAY_TRAINER, refactors.CORPUS[DECOY], 25),
    # the agent-loop worker's class renamed where the code names it (the tracing strings keep theirs)
    "rename-a-class": (
        AGENT_LOOP,
        _edit(AGENT_LOOP, r"(?<=^class )AgentLoopWorker\b|(?<=ray\.remote\()AgentLoopWorker\b", "RolloutWorker", 2),
        6,
    ),
    # fit split in two: from its progress bar on, the loop is a method of its own that fit returns;
    # the 24 points of the loop go to it, the one before `def fit` stays
    "split-a-method": (
        RAY_TRAINER,
        refactors.extract(RAY_TRAINER, "RayPPOTrainer", "fit", "progress_bar = tqdm(", None, "_fit_epochs"),
        24,
    ),
    # the reference, values and advantage stages of fit extracted into a helper it calls: their
    # 5 points go to the helper, the other points of fit stay
    "extract-a-helper": (
        RAY_TRAINER,
        refactors.extract(
            RAY_TRAINER, "RayPPOTrainer", "fit", "if self.use_reference_policy:", 'with marked_timer("adv"', "_adv"
        ),
        5,
    ),
}


def _oracle(instrumented: Path, tmp_path: Path, case: str) -> tuple[dict[str, bytes], dict[str, object]]:
    """The refactor made on the instrumented tree: its files, and its manifest but for the business
    code's fingerprints (those are of the tree apply read, before the refactor)."""
    _, edit, _ = REFACTORS[case]
    expected = copy_tree(instrumented, tmp_path / "expected")
    edit(expected)
    return tree_bytes(expected), _without_baselines(instrumented / MANIFEST_NAME)


def _without_baselines(manifest: Path) -> dict[str, object]:
    body = json.loads(manifest.read_text(encoding="utf-8"))
    body.pop("baselines")
    return body


@pytest.mark.parametrize("case", sorted(REFACTORS))
def test_port_then_apply_gives_the_refactored_instrumented_tree(
    case: str, verl_090: Path, instrumented: Path, catalog: Catalog, tmp_path: Path
) -> None:
    relative, edit, lost = REFACTORS[case]
    tree = copy_tree(verl_090, tmp_path / "fork")
    edit(tree)
    before = check(tree, catalog)
    assert sum(p.status is Status.ANCHOR_LOST for p in before.points) == lost

    result = port(tree, catalog, Selection(), _shipped_reload)
    assert result.error is None
    assert {s.status for s in result.suggestions} == {PortStatus.PORTED}
    assert len(result.suggestions) == lost
    assert exits.port_exit(result) == exits.OK
    folder = tree / DEFAULT_OUT
    assert result.written == (str(folder / override_file_name(relative)),)
    ported = load_catalog([folder])
    assert exits.apply_exit(apply(tree, ported)) == exits.OK
    files, manifest = _oracle(instrumented, tmp_path, case)
    assert tree_bytes(tree) == files
    assert _without_baselines(tree / MANIFEST_NAME) == manifest
    assert exits.check_exit(check(tree, ported)) == exits.OK
    assert verify(tree, ported).ok


def test_a_decoy_repeating_the_reward_timer_is_seen_and_set_aside(
    verl_090: Path, catalog: Catalog, tmp_path: Path
) -> None:
    """The reward points fit the debug helper as well as fit_loop (a real decoy: port sees both); the other lost
    points of fit went to fit_loop, so that is where they go, never the helper."""
    tree = copy_tree(verl_090, tmp_path / "fork")
    refactors.CORPUS[DECOY](tree)
    by_id = {s.point_id: s for s in port(tree, catalog, Selection(), _shipped_reload).suggestions}
    for point_id in ("flow.v0.train-reward", "progress.v0.reward"):
        found = by_id[point_id]
        assert (found.status, found.new_scope) == (PortStatus.PORTED, "RayPPOTrainer.fit_loop"), found
        assert found.runners_up == ("RayPPOTrainer._debug_reward",), found


def test_port_writes_no_verl_source_and_runs_twice_alike(verl_090: Path, catalog: Catalog, tmp_path: Path) -> None:
    _, edit, _ = REFACTORS["rename-a-method"]
    tree = copy_tree(verl_090, tmp_path / "fork")
    edit(tree)
    sources = tree_bytes(tree)
    first = port(tree, catalog, Selection(), _shipped_reload)
    assert tree_bytes(tree) == sources, "port writes overrides, never verl sources"
    written = Path(first.written[0]).read_bytes()
    assert written.startswith(PORT_HEADER.encode())
    second = port(tree, catalog, Selection(), _shipped_reload)
    assert Path(second.written[0]).read_bytes() == written, "the same tree, the same overrides"
    # with its overrides given, every point is in place: nothing to port, the file stays
    in_place = port(tree, load_catalog([tree / DEFAULT_OUT]), Selection(), _shipped_reload)
    assert in_place.suggestions == () and in_place.written == ()
    assert Path(first.written[0]).read_bytes() == written


def test_a_renamed_def_in_an_anchor_is_likely_and_exact_moves_are_exact(
    verl_090: Path, catalog: Catalog, tmp_path: Path
) -> None:
    _, edit, _ = REFACTORS["rename-a-method"]
    tree = copy_tree(verl_090, tmp_path / "fork")
    edit(tree)
    result = port(tree, catalog, Selection(), _shipped_reload, min_confidence=Confidence.EXACT)
    by_id = {s.point_id: s for s in result.suggestions}
    fetch = by_id.pop("progress.v0.fetch-method")
    assert (fetch.status, fetch.confidence) == (PortStatus.UNSURE, Confidence.LIKELY)
    assert fetch.anchors == ("def fit_loop(self): ...",)
    assert {(s.status, s.confidence, s.new_scope) for s in by_id.values()} == {
        (PortStatus.PORTED, Confidence.EXACT, "RayPPOTrainer.fit_loop")
    }
    assert exits.port_exit(result) == exits.FAILED
    entries = yaml.safe_load(Path(result.written[0]).read_text(encoding="utf-8"))["points"]
    assert "progress.v0.fetch-method" not in {e["overrides"] for e in entries}


# -- synthetic trees: one mechanism each --------------------------------------------------------------

SPEC = """\
file: verl/target.py
points:
  - id: t.first
    facility: progress
    title: after the batch is made
    scope: Worker.run
    after: |
      batch = make(data)
    code: |
      log_progress('made')
  - id: t.second
    facility: progress
    title: after the batch is scored
    scope: Worker.run
    after: |
      score = judge(batch)
    code: |
      log_progress('scored')
"""


def _case(tmp_path: Path, source: str, spec: str = SPEC) -> tuple[Path, Catalog, Path]:
    specs = tmp_path / "spec"
    specs.mkdir()
    (specs / "spec.yaml").write_text(spec, encoding="utf-8")
    tree = tmp_path / "tree"
    (tree / "verl").mkdir(parents=True)
    (tree / "verl" / "target.py").write_text(textwrap.dedent(source), encoding="utf-8")
    return tree, load_catalog([specs], shipped=False), specs


def _reload(specs: Path):  # type: ignore[no-untyped-def]
    return lambda folder: load_catalog([specs, folder], shipped=False)


def test_two_places_that_fit_alike_are_a_tie_and_nothing_is_written(tmp_path: Path) -> None:
    tree, catalog, specs = _case(
        tmp_path,
        """
        class Worker:
            def train(self, data):
                batch = make(data)
                score = judge(batch)

            def validate(self, data):
                batch = make(data)
                score = judge(batch)
        """,
    )
    result = port(tree, catalog, Selection(), _reload(specs))
    assert {s.status for s in result.suggestions} == {PortStatus.TIE}
    assert all(s.runners_up == ("Worker.train", "Worker.validate") for s in result.suggestions)
    # the out folder exists after a run, empty: an empty override set is valid to read
    assert result.written == () and (tree / DEFAULT_OUT).is_dir() and not any((tree / DEFAULT_OUT).iterdir())
    assert exits.port_exit(result) == exits.FAILED


FLOW_SPEC = SPEC.replace("facility: progress", "facility: sample_flow").replace(
    "log_progress('made')",
    "trace_flow(uid='u', traj_uid='t', from_module='A', to_module='B', stage='S', detail='made')",
)


@pytest.mark.parametrize(
    ("marking", "broken"),
    [
        ('meta["validate"] = True', True),
        ("assign(batch, 'validate', True)", True),
        ("batch = make(data, validate=True)", True),
        ('meta = {"validate": True}', True),
        ('meta["validate"] = False', False),  # decoys: not marked validation, or only in a nested def
        ("def inner():\n                    meta['validate'] = True", False),
    ],
)
def test_a_sample_flow_tie_with_validation_code_goes_to_the_training_step(
    tmp_path: Path, marking: str, broken: bool
) -> None:
    """The runtime silences a validation sample's traces: a sample-flow point that fits a training method
    and one whose own code marks its batch validation belongs in the training one (`likely`)."""
    tree, catalog, specs = _case(
        tmp_path,
        f"""
        class Worker:
            def train(self, data):
                batch = make(data)
                score = judge(batch)

            def check(self, data):
                {marking}
                batch = make(data)
                score = judge(batch)
        """,
        FLOW_SPEC,
    )
    result = port(tree, catalog, Selection(), _reload(specs), min_confidence=Confidence.LIKELY)
    for first in result.suggestions:
        if broken:
            assert (first.status, first.confidence, first.new_scope) == (
                PortStatus.PORTED,
                Confidence.LIKELY,
                "Worker.train",
            )
            assert first.runners_up == ("Worker.check",) and "validation" in first.evidence
        else:
            assert first.status is PortStatus.TIE
    assert len(result.suggestions) == 2


def test_the_other_lost_points_of_a_scope_break_a_tie(tmp_path: Path) -> None:
    tree, catalog, specs = _case(
        tmp_path,
        """
        class Worker:
            def train(self, data):
                batch = make(data)
                score = judge(batch)

            def validate(self, data):
                batch = make(data)
        """,
    )
    result = port(tree, catalog, Selection(), _reload(specs))
    by_id = {s.point_id: s for s in result.suggestions}
    assert (by_id["t.second"].status, by_id["t.second"].confidence) == (PortStatus.PORTED, Confidence.EXACT)
    first = by_id["t.first"]
    assert (first.status, first.confidence, first.new_scope) == (PortStatus.PORTED, Confidence.LIKELY, "Worker.train")
    assert first.runners_up == ("Worker.validate",)
    placed = apply(tree, load_catalog([specs, tree / DEFAULT_OUT], shipped=False))
    assert exits.apply_exit(placed) == exits.OK
    text = (tree / "verl" / "target.py").read_text(encoding="utf-8")
    assert text.index("log_progress('made')") < text.index("def validate")


HEADER_SPEC = (
    SPEC
    + """\
  - id: t.entry
    facility: progress
    title: at the start of run
    scope: Worker.run
    body_start: |
      def run(self, data, step): ...
    code: |
      _tag = 'run'
    marker: |
      _tag = 'run'
  - id: t.reads-entry
    facility: progress
    title: after scoring, with the tag
    scope: Worker.run
    requires: [t.entry]
    after: |
      score = judge(batch)
    code: |
      log_progress(_tag)
"""
)


@pytest.mark.parametrize(
    ("header", "carried"),
    [
        ("def go(self, data, step, retries=0):", True),  # a parameter added, the others kept: the rename is borne out
        ("def go(self, data):", True),  # one dropped
        ("def go(self, items, n):", False),  # a decoy: every parameter differs, nothing says it is the same def
    ],
)
def test_a_point_at_a_renamed_defs_header_follows_its_scope_and_those_requiring_it_too(
    tmp_path: Path, header: str, carried: bool
) -> None:
    first = "" if carried else "        data = items\n"
    source = f"class Worker:\n    {header}\n{first}        batch = make(data)\n        score = judge(batch)\n"
    tree, catalog, specs = _case(tmp_path, source, HEADER_SPEC)
    result = port(tree, catalog, Selection(), _reload(specs))
    by_id = {s.point_id: s for s in result.suggestions}
    assert {by_id[p].new_scope for p in ("t.first", "t.second")} == {"Worker.go"}
    entry, reads = by_id["t.entry"], by_id["t.reads-entry"]
    if carried:
        assert (entry.status, entry.confidence, entry.new_scope) == (PortStatus.PORTED, Confidence.LIKELY, "Worker.go")
        assert entry.anchors == (header.replace(":", ": ..."),) and "header's parameters" in entry.evidence
        assert (reads.status, reads.new_scope) == (PortStatus.PORTED, "Worker.go"), "ported in the same run"
        placed = apply(tree, load_catalog([specs, tree / DEFAULT_OUT], shipped=False))
        assert exits.apply_exit(placed) == exits.OK
        lines = (tree / "verl" / "target.py").read_text(encoding="utf-8").splitlines()
        assert lines[lines.index(f"    {header}") + 1] == "        _tag = 'run'"
    else:
        assert entry.status is PortStatus.NOT_FOUND
        assert reads.status is PortStatus.REFUSED and "t.entry" in reads.message


CONDITION_SPEC = """\
file: verl/target.py
points:
  - id: t.report
    facility: progress
    title: after the report, when ready
    scope: Worker.run
    after: |
      report(score)
    inside: |
      if ready and (...): ...
    code: |
      log_progress('reported')
"""


@pytest.mark.parametrize(
    ("conditions", "ported"),
    [
        (["enabled and ready and (n > 0)"], True),  # the enclosing if gained a condition: the statements are there
        (["ready and (n > 0)", "enabled and ready and (n > 0)"], False),  # unchanged: apply places it, no port
        (["ready or (n > 0)"], False),  # decoys: a condition that is not the old one's and more
        (["enabled and ready and (n > 0)", "debug and ready and (n > 0)"], False),  # two ifs grew alike: which?
    ],
)
def test_an_anchor_whose_enclosing_if_gained_a_condition_is_ported(
    tmp_path: Path, conditions: list[str], ported: bool
) -> None:
    blocks = "".join(f"        if {c}:\n            report(score)\n" for c in conditions)
    tree, catalog, specs = _case(tmp_path, f"class Worker:\n    def run(self, score):\n{blocks}", CONDITION_SPEC)
    result = port(tree, catalog, Selection(), _reload(specs))
    found = {s.point_id: s for s in result.suggestions}.get("t.report")
    if ported:
        assert found is not None and (found.status, found.confidence) == (PortStatus.PORTED, Confidence.LIKELY)
        assert found.insides == ("if enabled and ready and (n > 0): ...",)
        assert "gained `enabled and`" in found.evidence
        placed = apply(tree, load_catalog([specs, tree / DEFAULT_OUT], shipped=False))
        assert exits.apply_exit(placed) == exits.OK
        lines = (tree / "verl" / "target.py").read_text(encoding="utf-8").splitlines()
        assert lines[lines.index("            report(score)") + 1] == "            log_progress('reported')"
    else:
        assert found is None or found.status is not PortStatus.PORTED or found.confidence is Confidence.GUESS


COUNTERPART_SPEC = """\
file: verl/target.py
points:
  - id: t.scored
    facility: progress
    title: after the score, in its timer
    scope: Worker.run
    after: |
      score, extra = judge(batch)
    inside: |
      with timer("score"): ...
    code: |
      log_progress('scored')
  - id: t.epoch
    facility: progress
    title: at each epoch
    scope: Worker.run
    body_start: |
      for epoch in range(start, total): ...
    code: |
      log_progress('epoch')
"""


@pytest.mark.parametrize(
    ("body", "scored", "epoch"),
    [
        # the call renamed, its targets kept (or one dropped); the loop over the same call, an argument dropped
        (
            "for epoch in range(total):\n    with timer('score'):\n        score, extra = grade(batch, strict=True)",
            True,
            True,
        ),
        ("for epoch in range(0, start, total):\n    with timer('score'):\n        score = grade(batch)", True, True),
        # decoys: two statements could be it; the loop over another call; the statement outside its block
        (
            "for epoch in enumerate(total):\n    with timer('score'):\n        score = grade(batch)\n        score = rescale(score)",
            False,
            False,
        ),
        ("for epoch in range(start, total, step):\n    score, extra = grade(batch)", False, True),
    ],
)
def test_a_statement_doing_the_anchors_work_otherwise_is_its_counterpart(
    tmp_path: Path, body: str, scored: bool, epoch: bool
) -> None:
    source = "class Worker:\n    def run(self, batch, start, total):\n" + textwrap.indent(body, " " * 8) + "\n"
    tree, catalog, specs = _case(tmp_path, source, COUNTERPART_SPEC)
    by_id = {s.point_id: s for s in port(tree, catalog, Selection(), _reload(specs)).suggestions}
    for point_id, expected in (("t.scored", scored), ("t.epoch", epoch)):
        found = by_id[point_id]
        sure = found.status is PortStatus.PORTED and found.confidence in (Confidence.LIKELY, Confidence.EXACT)
        assert sure is expected, (point_id, found)
        if expected:
            assert "work" in found.evidence
    if scored and epoch:
        placed = apply(tree, load_catalog([specs, tree / DEFAULT_OUT], shipped=False))
        assert exits.apply_exit(placed) == exits.OK
        lines = (tree / "verl" / "target.py").read_text(encoding="utf-8").splitlines()
        first = next(i for i, line in enumerate(lines) if "for epoch" in line)
        assert lines[first + 1].strip() == "log_progress('epoch')"
        assert (
            lines[next(i for i, line in enumerate(lines) if "grade(" in line) + 1].strip() == "log_progress('scored')"
        )


NEIGHBOUR_SPEC = """\
file: verl/target.py
points:
  - id: t.made
    facility: progress
    title: after the batch is made
    scope: Worker.run
    after: |
      batch = make(data)
    code: |
      log_progress('made')
"""


@pytest.mark.parametrize(
    ("body", "line"),
    [
        ("prepare(data)\nfinish(data)", "prepare(data)"),  # the anchor deleted, its neighbours together
        ("prepare(data)\nbatch = make(data, fast=True)\nfinish(data)", "batch = make(data, fast=True)"),  # replaced
        # the anchor deleted, the statement before it calling what it called otherwise (45632b5fa's sample)
        ("ready = prepare(data, fast=True)\nfinish(data)", "ready = prepare(data, fast=True)"),
        # decoy: the statement before `finish` calls something else
        ("prime(data)\nfinish(data)", ""),
        # decoys: a statement between them that calls something else; the neighbours together twice
        ("prepare(data)\nbatch = build(data)\nfinish(data)", ""),
        ("prepare(data)\nfinish(data)\nif again:\n    prepare(data)\n    finish(data)", ""),
    ],
)
def test_an_anchor_deleted_or_replaced_between_its_neighbours_goes_where_they_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str, line: str
) -> None:
    """The validated release's neighbours of the anchor (neighbours.json) place it, as a three-way merge does."""
    monkeypatch.setattr(port_module, "shipped_neighbours", lambda: {"t.made": [("prepare(data)", "finish(data)")]})
    source = "class Worker:\n    def run(self, data, again):\n" + textwrap.indent(body, " " * 8) + "\n"
    tree, catalog, specs = _case(tmp_path, source, NEIGHBOUR_SPEC)
    (found,) = port(tree, catalog, Selection(), _reload(specs)).suggestions
    sure = found.status is PortStatus.PORTED and found.confidence is Confidence.LIKELY
    assert sure is bool(line), found
    if line:
        assert "neighbours" in found.evidence
        assert exits.apply_exit(apply(tree, load_catalog([specs, tree / DEFAULT_OUT], shipped=False))) == exits.OK
        lines = (tree / "verl" / "target.py").read_text(encoding="utf-8").splitlines()
        assert lines[lines.index(f"        {line}") + 1] == "        log_progress('made')"


ATTRIBUTE_SPEC = """\
file: verl/target.py
points:
  - id: t.tracker
    facility: progress
    title: a tracker per loop
    scope: Loop.__init__
    after: |
      self.kwargs = self.config.get("kwargs", {})
    code: |
      self._tracker = Tracker()
    marker: |
      self._tracker = Tracker()
"""


@pytest.mark.parametrize(
    ("source", "likely"),
    [
        # a new attribute from nothing of __init__'s: its place in __init__ does not matter
        ("def __init__(self, config):\n    self.config = config\n    self.loop = get_loop()", True),
        ("def __init__(self, config):\n    self.config = config\n    self.kw = self.config.get('kw', {})", True),
        # decoys: the code reads a name of the def; the attribute is named elsewhere; not an __init__
        ("def __init__(self, config, Tracker):\n    self.config = config\n    self.loop = get_loop()", False),
        ("def __init__(self, config):\n    self.config = config\n\ndef reset(self):\n    self._tracker = None", False),
    ],
)
def test_a_new_attribute_goes_anywhere_in_its_init(tmp_path: Path, source: str, likely: bool) -> None:
    module = "from tracking import Tracker, get_loop\n\n\nclass Loop:\n" + textwrap.indent(source, "    ") + "\n"
    tree, catalog, specs = _case(tmp_path, module, ATTRIBUTE_SPEC)
    (found,) = port(tree, catalog, Selection(), _reload(specs)).suggestions
    sure = found.status is PortStatus.PORTED and found.confidence is Confidence.LIKELY
    assert sure is likely, found
    if likely:
        assert "only sets self._tracker" in found.evidence
        assert exits.apply_exit(apply(tree, load_catalog([specs, tree / DEFAULT_OUT], shipped=False))) == exits.OK
        lines = (tree / "verl" / "target.py").read_text(encoding="utf-8").splitlines()
        init = lines.index("    def __init__(self, config):")
        assert "        self._tracker = Tracker()" in lines[init + 1 :]


def test_a_point_written_again_keeps_its_entry_in_place(tmp_path: Path) -> None:
    """A second run that finds only the first point again (the second one in place by then, say)
    rewrites the file line for line: the entry stays where it was, before the other."""
    tree, catalog, specs = _case(
        tmp_path, "class Worker:\n    def go(self, data):\n        batch = make(data)\n        score = judge(batch)\n"
    )
    (written,) = port(tree, catalog, Selection(), _reload(specs)).written
    before = Path(written).read_text(encoding="utf-8")
    assert before.index("overrides: t.first") < before.index("overrides: t.second")
    port(tree, catalog, Selection(only=frozenset({"t.first"})), _reload(specs))
    assert Path(written).read_text(encoding="utf-8") == before


def test_a_place_the_proofs_refuse_is_not_written(tmp_path: Path) -> None:
    # the old Worker.run had a `rollout_n`; the method its statements are in now has none
    spec = SPEC.replace("log_progress('scored')", "log_progress(f'scored {rollout_n}')")
    tree, catalog, specs = _case(
        tmp_path,
        """
        class Worker:
            def train(self, data):
                batch = make(data)
                score = judge(batch)
        """,
        spec,
    )
    result = port(tree, catalog, Selection(), _reload(specs))
    by_id = {s.point_id: s for s in result.suggestions}
    assert by_id["t.second"].status is PortStatus.REFUSED
    assert "rollout_n" in by_id["t.second"].message
    assert by_id["t.first"].status is PortStatus.PORTED
    entries = yaml.safe_load(Path(result.written[0]).read_text(encoding="utf-8"))["points"]
    assert [e["overrides"] for e in entries] == ["t.first"]


def test_a_point_whose_statements_are_nowhere_is_not_found(tmp_path: Path) -> None:
    tree, catalog, specs = _case(
        tmp_path,
        """
        class Worker:
            def train(self, data):
                batch = build(data)
        """,
    )
    result = port(tree, catalog, Selection(), _reload(specs))
    assert {s.status for s in result.suggestions} == {PortStatus.NOT_FOUND}
    assert all("no scope of verl/target.py holds" in s.message for s in result.suggestions)


def test_an_override_file_port_did_not_write_is_left_alone(tmp_path: Path) -> None:
    tree, catalog, specs = _case(
        tmp_path,
        """
        class Worker:
            def train(self, data):
                batch = make(data)
                score = judge(batch)
        """,
    )
    mine = tree / DEFAULT_OUT / override_file_name("verl/target.py")
    mine.parent.mkdir(parents=True)
    mine.write_text("# my own overrides\n", encoding="utf-8")
    result = port(tree, catalog, Selection(), _reload(specs))
    assert result.error is not None and "not written by port" in result.error.message
    assert mine.read_text(encoding="utf-8") == "# my own overrides\n"


def test_the_command_writes_json_of_its_schema_and_exits_by_the_result(tmp_path: Path) -> None:
    tree, _catalog, specs = _case(
        tmp_path,
        """
        class Worker:
            def train(self, data):
                batch = make(data)
                score = judge(batch)

            def validate(self, data):
                batch = make(data)
        """,
    )
    runner = CliRunner()
    outcome = runner.invoke(app, ["port", str(tree), "--anchors", str(specs), "--format", "json", "--dry-run"])
    body = json.loads(outcome.output)
    jsonschema.validate(body, jsonout.schema("port"), cls=jsonschema.Draft202012Validator)
    assert outcome.exit_code == exits.OK and body["exit_code"] == exits.OK
    assert body["written"] == [] and not (tree / DEFAULT_OUT).exists()
    assert {p["id"]: p["confidence"] for p in body["points"]} == {"t.first": "likely", "t.second": "exact"}
    text = runner.invoke(app, ["port", str(tree), "--anchors", str(specs), "--min-confidence", "exact"])
    assert text.exit_code == exits.FAILED
    assert "2 points of Worker.run" not in text.output and "unsure" in text.output


def test_an_anchor_written_otherwise_here_is_a_guess_written_only_when_asked(tmp_path: Path) -> None:
    """The statement the point is anchored on is `make(data)` here, `make(data, fast=True)` in
    the tree (more than a name differs): the most alike statement, clearly ahead of the others,
    is a guess; guesses are written only with --min-confidence guess, and then apply places the
    point there."""
    tree, catalog, specs = _case(
        tmp_path,
        """
        class Worker:
            def run(self, data):
                batch = make(data, fast=True)
                score = judge(batch)
                report(score)
        """,
    )
    result = port(tree, catalog, Selection(), _reload(specs))
    by_id = {s.point_id: s for s in result.suggestions}
    guess = by_id["t.first"]
    assert (guess.status, guess.confidence) == (PortStatus.UNSURE, Confidence.GUESS)
    assert guess.anchors == ("batch = make(data, fast=True)",)
    assert "line 4" in guess.evidence
    assert set(by_id) == {"t.first"}, "t.second's anchor is found: it is not lost"
    assert result.written == ()
    asked = port(tree, catalog, Selection(), _reload(specs), min_confidence=Confidence.GUESS)
    assert {s.point_id for s in asked.suggestions if s.status is PortStatus.PORTED} == {"t.first"}
    placed = apply(
        tree, load_catalog([specs, tree / DEFAULT_OUT], shipped=False), Selection(only=frozenset({"t.first"}))
    )
    assert exits.apply_exit(placed) == exits.OK
    text = (tree / "verl" / "target.py").read_text(encoding="utf-8")
    assert text.index("batch = make(data, fast=True)") < text.index("log_progress('made')") < text.index("score =")


def test_a_refactor_merged_into_an_instrumented_tree_ports_onto_the_code_in_place(
    instrumented: Path, catalog: Catalog, tmp_path: Path
) -> None:
    """After apply, upstream renames a method the tracing sits in: the points' code moved with it
    (present there, lost by its scope). port proves the place with the code already in place."""
    tree = copy_tree(instrumented, tmp_path / "fork")
    shutil.copy(instrumented / MANIFEST_NAME, tree / MANIFEST_NAME)
    _refactor(tree, TOOL_LOOP, r"\b_call_tool\b", "_invoke_tool", 2)
    lost = [p.point_id for p in check(tree, catalog).points if p.status is Status.ANCHOR_LOST]
    assert lost
    result = port(tree, catalog, Selection(), _shipped_reload)
    assert {s.point_id: s.status for s in result.suggestions} == dict.fromkeys(lost, PortStatus.PORTED)
    assert exits.check_exit(check(tree, load_catalog([tree / DEFAULT_OUT]))) == exits.OK


def test_a_place_outside_a_scope_that_is_still_there_is_likely_not_exact(tmp_path: Path) -> None:
    tree, catalog, specs = _case(
        tmp_path,
        """
        class Mixin:
            def step(self, data):
                batch = make(data)
                score = judge(batch)


        class Worker(Mixin):
            def run(self, data):
                return self.step(data)
        """,
    )
    result = port(tree, catalog, Selection(), _reload(specs))
    assert {(s.status, s.confidence, s.new_scope) for s in result.suggestions} == {
        (PortStatus.PORTED, Confidence.LIKELY, "Mixin.step")
    }
    assert all("Worker.run is still in the file" in s.evidence for s in result.suggestions)


def test_what_goes_into_a_class_that_stays_is_a_guess_when_its_anchor_moved_out(tmp_path: Path) -> None:
    """A method the point is inserted before moved into a mixin; its old class is still there.
    The mixin is where the anchor is, but the class may be where the point belongs: a guess."""
    spec = """\
file: verl/target.py
points:
  - id: t.helper
    facility: progress
    title: a helper method before run
    scope: Worker
    before: |
      def run(self, data): ...
    code: |
      def _traced(self):
          log_progress('helper')
"""
    tree, catalog, specs = _case(
        tmp_path,
        """
        class Mixin:
            def run(self, data):
                return data


        class Worker(Mixin):
            def other(self):
                pass
        """,
        spec,
    )
    result = port(tree, catalog, Selection(), _reload(specs))
    assert [(s.status, s.confidence, s.new_scope) for s in result.suggestions] == [
        (PortStatus.UNSURE, Confidence.GUESS, "Mixin")
    ]
    assert result.written == ()


def test_overrides_that_do_not_load_prove_nothing(tmp_path: Path) -> None:
    from trace_instrument.model import SpecSource
    from trace_instrument.spec.errors import SpecError, SpecProblem

    tree, catalog, _specs = _case(
        tmp_path,
        """
        class Worker:
            def train(self, data):
                batch = make(data)
                score = judge(batch)
        """,
    )

    def broken(folder: Path) -> Catalog:
        raise SpecError([SpecProblem(SpecSource(str(folder / "x.yaml"), 1), "a problem")])

    result = port(tree, catalog, Selection(), broken)
    assert {s.status for s in result.suggestions} == {PortStatus.REFUSED}
    assert all("does not load" in s.message for s in result.suggestions)
    assert result.written == () and exits.port_exit(result) == exits.FAILED


BLOCK_SPEC = """\
file: verl/target.py
points:
  - id: t.gen
    facility: progress
    title: around generation
    scope: Worker.run
    edits:
      - before: |
          result = self.produce(batch, mode="gen")
        code: |
          log_progress('start generation')
      - after: |
          self.settle_gen()
        code: |
          log_progress('end generation')
"""


def test_of_two_statements_alike_the_one_beside_the_points_other_edit_is_chosen(tmp_path: Path) -> None:
    """The anchor's names are spelled otherwise twice, alike (`out`/`base`, `k`): the point's other
    edit is found in the first `with` block only, so the first is where the point goes (a guess:
    no rename is borne out twice)."""
    tree, catalog, specs = _case(
        tmp_path,
        """
        class Worker:
            def run(self, k):
                with timer("gen"):
                    out = self.produce(k, mode="gen")
                    self.settle_gen()
                with timer("baseline"):
                    base = self.produce(k, mode="gen")
                    self.settle()
        """,
        BLOCK_SPEC,
    )
    assert port(tree, catalog, Selection(), _reload(specs)).written == (), "two names renamed once each: a guess"
    (found,) = port(tree, catalog, Selection(), _reload(specs), min_confidence=Confidence.GUESS).suggestions
    assert (found.status, found.confidence, found.line) == (PortStatus.PORTED, Confidence.GUESS, 5)
    assert found.anchors == ("out = self.produce(k, mode='gen')", "")
    placed = apply(tree, load_catalog([specs, tree / DEFAULT_OUT], shipped=False))
    assert exits.apply_exit(placed) == exits.OK
    lines = [line.strip() for line in (tree / "verl" / "target.py").read_text(encoding="utf-8").splitlines()]
    at = lines.index('out = self.produce(k, mode="gen")')
    assert lines[at - 1 : at + 3] == [
        "log_progress('start generation')",
        'out = self.produce(k, mode="gen")',
        "self.settle_gen()",
        "log_progress('end generation')",
    ]
    assert lines[lines.index('base = self.produce(k, mode="gen")') - 1] == 'with timer("baseline"):'


def test_without_a_block_to_tell_them_apart_two_statements_alike_place_nothing(tmp_path: Path) -> None:
    tree, catalog, specs = _case(
        tmp_path,
        """
        class Worker:
            def run(self, k):
                with timer("gen"):
                    out = self.produce(k, mode="gen")
                with timer("baseline"):
                    base = self.produce(k, mode="gen")
                self.settle_gen()
        """,
        BLOCK_SPEC,
    )
    (found,) = port(tree, catalog, Selection(), _reload(specs)).suggestions
    assert found.status is not PortStatus.PORTED and found.line != 5


# -- verl 0.7.1: every place port finds, pinned by reading 0.7.1's code -----------------------------

AGENT_LOOP_071 = "verl/experimental/agent_loop/agent_loop.py"
PINNED_071 = {
    # point: (its scope, each edit's anchor as 0.7.1 writes it ("" where the shipped one is found), bind)
    "traj.c0.tracker": (
        "AgentLoopBase.__init__",
        ['self.apply_chat_template_kwargs = self.data_config.get("apply_chat_template_kwargs", {})'],
        {},
    ),
    "flow.v0.task-started": (
        "AgentLoopWorker.generate_sequences",
        ["kwargs = {k: v[i] for k, v in batch.non_tensor_batch.items()}"],
        {"validate": 'batch.meta_info.get("validate", False)'},
    ),
    "traj.c1.central-dump": (
        "AgentLoopWorker._run_agent_loop",
        [
            (
                "output: AgentLoopOutput = await agent_loop.run(sampling_params, **kwargs)\n"
                "return await self._agent_loop_postprocess(output, **kwargs)"
            )
        ],
        {},
    ),
    "flow.v0.run-completed": (
        "AgentLoopWorker._run_agent_loop",
        ["return await self._agent_loop_postprocess(output, **kwargs)"],
        {},
    ),
    "flow.v0.rollout-reward": (
        "AgentLoopWorker._compute_score",
        ['output.extra_fields["reward_extra_info"] = result["reward_extra_info"]'],
        {},
    ),
    "flow.v0.traj-uid-repeat": (
        "RayPPOTrainer.fit",
        ["gen_batch_output = gen_batch.repeat(repeat_times=self.config.actor_rollout_ref.rollout.n, interleave=True)"],
        {"rollout_n": "self.config.actor_rollout_ref.rollout.n"},
    ),
    "progress.v0.generation": (
        "RayPPOTrainer.fit",
        ["gen_batch_output = self.async_rollout_manager.generate_sequences(gen_batch_output)", ""],
        {},
    ),
    # its tool-observation edit: `agent_data.messages.extend(add_messages)` in the handler where its
    # message-count edit is (0.7.1 repeats the line in the generating and interacting handlers)
    "traj.c3.tool-record": ("ToolAgentLoop", ["", "", "", "", ""], {}),
}
INSIDES_071 = {
    "traj.c3.tool-record": [""] * 4
    + ["async def _handle_processing_tools_state(self, agent_data: AgentData) -> AgentState: ..."],
}
# anchored on the combined batch's slice, which 0.7.1 does not have: what followed the slice follows the `gen`
# timer there (its neighbours in 0.9.0, the timer and the REMAX check, are together), and the rollout's generate
# call is `gen_batch_output = ...generate_sequences(gen_batch_output)` between the same neighbours as 0.9.0's
GEN_071 = "with marked_timer('gen', timing_raw, color='red'): ..."
CALL_071 = "gen_batch_output = self.async_rollout_manager.generate_sequences(gen_batch_output)"
PINNED_071 |= {
    "progress.v0.rollout-window": ("RayPPOTrainer.fit", [CALL_071, GEN_071], {}),
    "progress.v0.gen-throughput": ("RayPPOTrainer.fit", [GEN_071], {}),
    "flow.v0.traj-uid-reinject": (
        "RayPPOTrainer.fit",
        [GEN_071],
        {"rollout_n": "self.config.actor_rollout_ref.rollout.n"},
    ),
    "progress.sep.rollout-window": ("SeparateRayPPOTrainer._fit_generate", [CALL_071, GEN_071], {}),
    "progress.sep.gen-throughput": ("SeparateRayPPOTrainer._fit_generate", [GEN_071], {}),
}
NO_PLACE_071: set[str] = set()


def _same_code(left: str, right: str) -> bool:
    return ast.dump(ast.parse(left)) == ast.dump(ast.parse(right)) if left and right else left == right


def test_verl_071_every_place_port_finds_is_the_pinned_one(
    catalog: Catalog, tmp_path: Path, verl_release: Callable[[str], Path]
) -> None:
    """On verl 0.7.1 each point port places goes where reading 0.7.1 says it belongs (pinned
    above), at whatever confidence; none at `likely` or surer is anywhere else; the rest have no
    place. Applied with the overrides, check and verify are clean on what was placed."""
    pristine = verl_release("0.7.1")
    tree = copy_tree(pristine, tmp_path / "v071")
    result = port(tree, catalog, Selection(), _shipped_reload, min_confidence=Confidence.GUESS)
    by_id = {s.point_id: s for s in result.suggestions}
    assert set(by_id) == set(PINNED_071) | NO_PLACE_071
    for point_id, (scope, anchors, bindings) in PINNED_071.items():
        found = by_id[point_id]
        assert (found.status, found.new_scope) == (PortStatus.PORTED, scope), found
        assert len(found.anchors) == len(anchors) and all(map(_same_code, found.anchors, anchors)), found.anchors
        insides = INSIDES_071.get(point_id, [""] * len(anchors))
        assert all(map(_same_code, found.insides or [""] * len(anchors), insides)), found.insides
        assert {k: ast.dump(ast.parse(v)) for k, v in found.bindings} == {
            k: ast.dump(ast.parse(v)) for k, v in bindings.items()
        }
    assert all(by_id[p].status is not PortStatus.PORTED for p in NO_PLACE_071)
    ported = _shipped_reload(tree / DEFAULT_OUT)
    placed = apply(tree, ported)
    assert {r.point_id for r in placed.points if r.status is Status.APPLIED} >= set(PINNED_071)
    in_place = frozenset(r.point_id for r in check(tree, ported).points if r.status.in_place)
    # 44 in place as shipped (issue 19's table), the pinned ones, the single-turn record, which
    # waited for the tracker (it requires traj.c0.tracker), and the tool loop's stop reason (its
    # termination checks read as 0.9.0's; it requires the pinned traj.c3.tool-record)
    assert in_place >= {*PINNED_071, "traj.c2.single-turn-record", "traj.c5.tool-stop-reason"}
    assert len(in_place) == 44 + len(PINNED_071) + 2
    assert verify(tree, ported, Selection(only=in_place)).ok


CLASS_SPEC = """\
file: verl/target.py
points:
  - id: t.observe
    facility: progress
    title: around the tool messages
    scope: Loop
    edits:
      - after: |
          count = len(messages)
        code: |
          log_progress('counted')
      - after: |
          messages.extend(added)
        code: |
          log_progress('extended')
"""


@pytest.mark.parametrize("counted_in", ["tools", "nowhere"])
def test_an_edit_found_in_several_methods_goes_where_its_other_edit_is(tmp_path: Path, counted_in: str) -> None:
    """`messages.extend(added)` is in two methods; the point's other edit is found in `tools`:
    the edit goes inside `tools`. With the other edit nowhere, nothing tells them apart."""
    count = "count = len(messages)" if counted_in == "tools" else "pass"
    tree, catalog, specs = _case(
        tmp_path,
        f"""
        class Loop:
            def generate(self, messages, added):
                messages.extend(added)

            def tools(self, messages, added):
                {count}
                messages.extend(added)
        """,
        CLASS_SPEC,
    )
    (found,) = port(tree, catalog, Selection(), _reload(specs), min_confidence=Confidence.GUESS).suggestions
    if counted_in == "nowhere":
        assert found.status is not PortStatus.PORTED
        return
    # a guess: a method that gained a statement like the edit's anchor would be taken as readily
    assert (found.status, found.confidence) == (PortStatus.PORTED, Confidence.GUESS)
    assert found.insides == ("", "def tools(self, messages, added):\n    ...")
    assert exits.apply_exit(apply(tree, load_catalog([specs, tree / DEFAULT_OUT], shipped=False))) == exits.OK
    lines = [line.strip() for line in (tree / "verl" / "target.py").read_text(encoding="utf-8").splitlines()]
    assert lines[lines.index("def tools(self, messages, added):") :][3:5] == [
        "messages.extend(added)",
        "log_progress('extended')",
    ]


def test_a_method_moved_into_a_mixin_of_another_module_goes_there(tmp_path: Path) -> None:
    """`Worker.run` now lives in `Scoring` of verl/scoring.py, which verl/target.py imports: no
    scope of target.py holds the anchors; the module it imports does, once; the points move there
    (the override's `file:` is that module) and apply places them in it."""
    tree, catalog, specs = _case(
        tmp_path,
        """
        from verl.scoring import Scoring


        class Worker(Scoring):
            pass
        """,
    )
    (tree / "verl" / "scoring.py").write_text(
        "class Scoring:\n    def run(self, data):\n        batch = make(data)\n        score = judge(batch)\n",
        encoding="utf-8",
    )
    result = port(tree, catalog, Selection(), _reload(specs))
    assert {(s.point_id, s.status, s.file, s.new_scope, s.confidence) for s in result.suggestions} == {
        (point_id, PortStatus.PORTED, "verl/scoring.py", "Scoring.run", Confidence.LIKELY)
        for point_id in ("t.first", "t.second")
    }
    assert [Path(w).name for w in result.written] == [override_file_name("verl/scoring.py")]
    placed = apply(tree, load_catalog([specs, tree / DEFAULT_OUT], shipped=False))
    assert exits.apply_exit(placed) == exits.OK
    lines = [line.strip() for line in (tree / "verl" / "scoring.py").read_text(encoding="utf-8").splitlines()]
    made = lines.index("batch = make(data)")
    assert lines[made : made + 4] == [
        "batch = make(data)",
        "log_progress('made')",
        "score = judge(batch)",
        "log_progress('scored')",
    ]
    assert "log_progress" not in (tree / "verl" / "target.py").read_text(encoding="utf-8")


def test_two_other_modules_that_both_hold_the_anchors_are_a_tie(tmp_path: Path) -> None:
    tree, catalog, specs = _case(tmp_path, "from verl.scoring import Scoring\nfrom verl.judging import Judging\n")
    body = "    def run(self, data):\n        batch = make(data)\n        score = judge(batch)\n"
    (tree / "verl" / "scoring.py").write_text("class Scoring:\n" + body, encoding="utf-8")
    (tree / "verl" / "judging.py").write_text("class Judging:\n" + body, encoding="utf-8")
    result = port(tree, catalog, Selection(), _reload(specs))
    assert {s.status for s in result.suggestions} == {PortStatus.TIE} and result.written == ()
    assert all(
        set(s.runners_up) == {"verl/scoring.py:Scoring.run", "verl/judging.py:Judging.run"} for s in result.suggestions
    )


MOVED_CLASS_SPEC = SPEC.replace(
    "    scope: Worker.run\n    after: |\n      score = judge(batch)",
    "    scope: Worker.score\n    after: |\n      score = judge(batch)",
)


def test_a_method_whose_class_moved_its_methods_into_a_base_is_looked_for_there(tmp_path: Path) -> None:
    """`Worker.run` and `Worker.score` now live in `WorkerBase` (Worker still subclasses it):
    t.first is found there word for word; t.second's anchor reads `batch` as `items`, and is
    looked for in `WorkerBase.score`, where its class's other method went (a guess: it moved)."""
    tree, catalog, specs = _case(
        tmp_path,
        """
        class WorkerBase:
            def run(self, data):
                batch = make(data)

            def score(self, items):
                score = judge(items)


        class Worker(WorkerBase):
            pass
        """,
        MOVED_CLASS_SPEC,
    )
    by_id = {s.point_id: s for s in port(tree, catalog, Selection(), _reload(specs)).suggestions}
    assert (by_id["t.first"].new_scope, by_id["t.first"].status) == ("WorkerBase.run", PortStatus.PORTED)
    second = by_id["t.second"]
    assert (second.new_scope, second.confidence, second.anchors) == (
        "WorkerBase.score",
        Confidence.GUESS,
        ("score = judge(items)",),
    )


# what port writes (at `likely` or surer) on older releases, each place judged by reading that release
PINNED_OLDER = {
    "0.7.0": {
        "traj.c0.store": "AgentLoopWorkerBase.__init__",  # the base now holds __init__'s setup
        "flow.v0.validation-silence": "AgentLoopWorkerBase._run_agent_loop",
        "flow.v0.traj-uid-repeat": "RayPPOTrainer.fit",
        # a new attribute, from nothing of __init__'s: anywhere in it (after the data config's line, the oracle's)
        "traj.c0.tracker": "AgentLoopBase.__init__",
        # fit's, each at the line tests/fixtures/port_trees/oracle/0.7.0.yaml gives (tests/test_port_trees.py):
        # after the gen timer (no combined batch to slice), the reward call in its timer, the eval lines in their if
        **{
            p: "RayPPOTrainer.fit"
            for p in (
                "progress.v0.gen-throughput",
                "flow.v0.traj-uid-reinject",
                "flow.v0.train-reward",
                "progress.v0.reward",
                "progress.v0.eval",
                # before the sync/async generate branch, the end of the rollout after the gen timer (the end of
                # generation after the branch)
                "progress.v0.rollout-window",
                "progress.v0.generation",
            )
        },
        # before _run_agent_loop's one return (it post-processes inline)
        "flow.v0.run-completed": "AgentLoopWorkerBase._run_agent_loop",
    },
    "0.6.1": {
        "traj.c0.store": "AgentLoopWorkerBase.__init__",
        "flow.v0.validation-silence": "AgentLoopWorkerBase._run_agent_loop",
        # the worker env is built in _init_with_resource_pool before verl split out _create_worker
        "env.worker-group": "RayWorkerGroup._init_with_resource_pool",
        "flow.v0.traj-uid-repeat": "RayPPOTrainer.fit",
        # this __init__ has no data config: the tracker goes after its last statement
        "traj.c0.tracker": "AgentLoopBase.__init__",
        # as 0.7.0's, and the epoch loop's lines (its range starts at 0 here) and the log-prob call in its timer
        **{
            p: "RayPPOTrainer.fit"
            for p in (
                "progress.v0.init-lines",
                "progress.v0.step-banner",
                "progress.v0.gen-throughput",
                "flow.v0.traj-uid-reinject",
                "flow.v0.train-reward",
                "flow.v0.train-logprob",
                "progress.v0.reward",
                "progress.v0.eval",
                "progress.v0.rollout-window",
                "progress.v0.generation",
                # after the ref_in_actor if/else, whose two branches compute the reference log-probs
                "flow.v0.train-ref-logprob",
            )
        },
        "flow.v0.run-completed": "AgentLoopWorkerBase._run_agent_loop",
        # _compute_score inlined: its reward statement (`output` for `final_output`) is in _run_agent_loop alone
        "flow.v0.rollout-reward": "AgentLoopWorkerBase._run_agent_loop",
    },
}


@pytest.mark.parametrize("version", sorted(PINNED_OLDER))
def test_older_releases_get_only_the_pinned_places_and_stay_clean(
    version: str, catalog: Catalog, tmp_path: Path, verl_release: Callable[[str], Path]
) -> None:
    pristine = verl_release(version)
    tree = copy_tree(pristine, tmp_path / "tree")
    result = port(tree, catalog, Selection(), _shipped_reload)
    written = {s.point_id: s.new_scope for s in result.suggestions if s.status is PortStatus.PORTED}
    assert written == PINNED_OLDER[version]
    ported = _shipped_reload(tree / DEFAULT_OUT)
    planned = {r.point_id: r for r in apply(tree, ported).points}
    # in place, or waiting for a point it requires that port left for a person (a guess)
    assert all(
        planned[p].status.in_place or (planned[p].status is Status.SKIPPED and planned[p].reason is Reason.REQUIREMENT)
        for p in written
    ), {p: planned[p].status for p in written}
    in_place = frozenset(r.point_id for r in check(tree, ported).points if r.status.in_place)
    assert verify(tree, ported, Selection(only=in_place)).ok


# -- used without flags: port names its folder in the checkout's configuration ------------------------

MOVED = """
class Worker:
    def train(self, data):
        batch = make(data)
        score = judge(batch)
"""


def test_after_port_plain_commands_read_its_overrides_and_a_hand_edit_is_kept(tmp_path: Path) -> None:
    """The README's CI snippet: `port PATH`, then plain `check PATH` is clean (the configuration names the
    overrides' folder, relative to the checkout); a second port keeps an override file a person edited."""
    tree, _catalog, specs = _case(tmp_path, MOVED)
    pyproject = tree / "pyproject.toml"
    pyproject.write_text(f'[project]\nname = "verl"\n\n[tool.trace-instrument]\nanchors = ["{specs}"]\n', "utf-8")
    runner = CliRunner()
    assert runner.invoke(app, ["check", str(tree)]).exit_code != exits.OK, "lost before port"
    review = runner.invoke(app, ["port", str(tree), "--out", str(tmp_path / "review")])
    assert review.exit_code == exits.OK and (tmp_path / "review").is_dir()
    assert ".trace-instrument/anchors" not in pyproject.read_text("utf-8"), "a review copy is recorded nowhere"
    outcome = runner.invoke(app, ["port", str(tree)])
    assert outcome.exit_code == exits.OK, outcome.output
    assert f'anchors = ["{specs}", ".trace-instrument/anchors"]' in pyproject.read_text("utf-8")
    assert "recorded in" in outcome.output and "plain apply, check, verify and remove" in outcome.output
    missing = runner.invoke(app, ["check", "--verbose", str(tree)])  # never instrumented: each point on request
    assert "missing         t.first" in missing.output and "anchor-lost" not in missing.output, missing.output
    assert runner.invoke(app, ["apply", str(tree)]).exit_code == exits.OK
    checked = runner.invoke(app, ["check", str(tree)])
    assert checked.exit_code == exits.OK, checked.output
    # the README's CI gate and pre-commit hook, as written there
    assert runner.invoke(app, ["check", str(tree), "--format", "github"]).exit_code == exits.OK
    assert runner.invoke(app, ["check", "--quiet", str(tree)]).exit_code == exits.OK
    assert runner.invoke(app, ["verify", str(tree)]).exit_code == exits.OK
    assert "log_progress('made')" in (tree / "verl" / "target.py").read_text("utf-8")
    assert runner.invoke(app, ["remove", str(tree)]).exit_code == exits.OK
    assert (tree / "verl" / "target.py").read_text("utf-8") == textwrap.dedent(MOVED), "plain remove: every line"
    assert runner.invoke(app, ["apply", str(tree)]).exit_code == exits.OK
    again = runner.invoke(app, ["port", str(tree), "--format", "json"])
    body = json.loads(again.output)
    jsonschema.validate(body, jsonout.schema("port"), cls=jsonschema.Draft202012Validator)
    assert body["recorded"]["added"] is False and body["kept"] == [] and body["points"] == []
    # a person edits the override port wrote: a second port (the points lost again) keeps it and says so
    override = tree / DEFAULT_OUT / override_file_name("verl/target.py")
    edited = override.read_text("utf-8").replace("scope: Worker.train", "scope: Worker.train  # checked by hand")
    assert edited != override.read_text("utf-8")
    override.write_text(edited, "utf-8")
    pyproject.write_text(f'[project]\nname = "verl"\n\n[tool.trace-instrument]\nanchors = ["{specs}"]\n', "utf-8")
    kept = runner.invoke(app, ["port", str(tree)])
    assert override.read_text("utf-8") == edited
    assert f"kept (edited by hand since port wrote it; move it away to have it rewritten): {override}" in kept.output


def test_port_makes_its_folder_even_with_nothing_to_write(tmp_path: Path) -> None:
    """An empty override set is valid: the folder the configuration names exists after any run."""
    tree, _catalog, specs = _case(tmp_path, MOVED.replace("def train", "def run"))
    outcome = CliRunner().invoke(app, ["port", str(tree), "--anchors", str(specs)])
    assert outcome.exit_code == exits.OK, outcome.output
    assert (tree / DEFAULT_OUT).is_dir() and not any((tree / DEFAULT_OUT).iterdir())
    assert (tree / ".trace-instrument.toml").read_text("utf-8") == 'anchors = [".trace-instrument/anchors"]\n'


BRANCH_SPEC = """\
file: verl/target.py
points:
  - id: t.generation
    facility: progress
    title: around the generate call
    scope: Worker.run
    edits:
      - before: |
          combined = self.manager.generate(batch)
        code: |
          log_progress('start generation')
      - after: |
          self.manager.sleep()
        inside: |
          with timer("gen", ...): ...
        code: |
          log_progress('end generation')
  - id: t.ref
    facility: progress
    title: after the reference log-probs
    scope: Worker.run
    after: |
      ref = self._compute_ref(batch)
    inside: |
      with timer(str(Role.Ref), ...): ...
    code: |
      log_progress('ref')
  - id: t.ref-timer
    facility: progress
    title: around the reference timer
    scope: Worker.run
    edits:
      - before: |
          with timer(str(Role.Ref), ...): ...
        code: |
          log_progress('start ref')
      - after: |
          with timer(str(Role.Ref), ...): ...
        code: |
          log_progress('end ref')
"""


@pytest.mark.parametrize("timer", ['"ref"', "str(Role.Ref)"])
def test_an_anchor_done_in_both_branches_of_an_if_is_anchored_on_the_if(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, timer: str
) -> None:
    """verl 0.6's generate call and reference log-probs sit in both branches of an if/else: the `if` is the anchor
    (the one in the edit's timer, not the baseline's), the end of generation (its anchor gone, next to the call in
    the validated release) goes after it; a timer named otherwise is learnt from the point it holds, for the other."""
    neighbours = {"t.generation": [("", ""), ("combined = self.manager.generate(batch)", "")]}
    monkeypatch.setattr(port_module, "shipped_neighbours", lambda: neighbours)
    tree, catalog, specs = _case(
        tmp_path,
        f"""
        class Worker:
            def run(self, batch):
                with timer("gen", raw):
                    if not self.async_mode:
                        out = self.group.generate(batch)
                    else:
                        out = self.manager.generate(batch)
                    raw.update(out.timing)
                with timer("gen_max", raw):
                    if not self.async_mode:
                        base = self.group.generate(batch)
                    else:
                        base = self.manager.generate(batch)
                with timer({timer}, raw):
                    if not self.ref_in_actor:
                        ref = self.ref_group.compute_ref(batch)
                    else:
                        ref = self.group.compute_ref(batch)
                    batch = batch.union(ref)
        """,
        BRANCH_SPEC,
    )
    by_id = {s.point_id: s for s in port(tree, catalog, Selection(), _reload(specs)).suggestions}
    generation = by_id["t.generation"]
    assert (generation.status, generation.confidence) == (PortStatus.PORTED, Confidence.LIKELY), generation
    assert generation.anchors == ("if not self.async_mode: ...", "if not self.async_mode: ...")
    assert generation.line == 5 and "does its work in both branches" in generation.evidence
    ref = by_id["t.ref"]
    assert (ref.status, ref.confidence, ref.anchors, ref.line) == (
        PortStatus.PORTED,
        Confidence.LIKELY,
        ("if not self.ref_in_actor: ...",),
        16,
    )
    timers = by_id.get("t.ref-timer")
    if timer == '"ref"':  # named otherwise: learnt from t.ref
        assert timers is not None and (timers.status, timers.confidence, timers.line) == (
            PortStatus.PORTED,
            Confidence.LIKELY,
            15,
        )
        assert "as t.ref shows" in timers.evidence
    else:
        assert timers is None, "found as shipped"
    ported = load_catalog([specs, tree / DEFAULT_OUT], shipped=False)
    assert exits.apply_exit(apply(tree, ported)) == exits.OK
    text = (tree / "verl" / "target.py").read_text(encoding="utf-8")
    assert text.index("log_progress('start generation')") < text.index("if not self.async_mode")
    assert text.index("log_progress('end generation')") < text.index("raw.update(out.timing)")
    assert text.index("log_progress('ref')") < text.index("batch = batch.union(ref)")
