"""port's output is reviewable: the dry run marks the hunks overrides place (and port's grade of
each), a point with no place lists the statements nearest its anchor as check does, and each
refusal names its real cause (the block around the statements differs; a required point cannot go).
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import jsonschema
import pytest
import yaml
from typer.testing import CliRunner

from trace_instrument.cli import app
from trace_instrument.engine.check import check
from trace_instrument.engine.port import DEFAULT_OUT, port
from trace_instrument.model import Catalog, Confidence, PortCause, PortStatus, Selection
from trace_instrument.render import exits, jsonout
from trace_instrument.spec import SpecError, load_catalog

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
RENAMED = """
class Worker:
    def train(self, data):
        batch = make(data)
        score = judge(batch)
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


def _hunks(output: str) -> list[tuple[list[str], list[str]]]:
    """Each hunk of a dry run's text: the lines marking it, and its added lines."""
    hunks: list[tuple[list[str], list[str]]] = []
    for line in output.splitlines():
        if line.startswith("@@"):
            hunks.append(([], []))
        elif hunks and line.startswith("  hunk of "):
            hunks[-1][0].append(line)
        elif hunks and line.startswith("+") and not line.startswith("+++"):
            hunks[-1][1].append(line)
    return hunks


def test_the_override_port_writes_carries_its_grade_and_evidence(tmp_path: Path) -> None:
    tree, catalog, specs = _case(tmp_path, RENAMED)
    result = port(tree, catalog, Selection(), _reload(specs))
    entries = yaml.safe_load(Path(result.written[0]).read_text(encoding="utf-8"))["points"]
    by_id = {s.point_id: s for s in result.suggestions}
    for entry in entries:
        suggestion = by_id[entry["overrides"]]
        assert entry["ported"] == {"confidence": suggestion.confidence.value, "evidence": suggestion.evidence}  # type: ignore[union-attr]
    loaded = load_catalog([specs, tree / DEFAULT_OUT], shipped=False)
    marks = {p.id: p.overridden for p in loaded.points}
    assert {i: m.confidence for i, m in marks.items() if m is not None} == {i: s.confidence for i, s in by_id.items()}


def test_the_dry_run_marks_the_hunks_overrides_place_in_text_and_json(tmp_path: Path) -> None:
    tree, catalog, specs = _case(tmp_path, RENAMED)
    port(tree, catalog, Selection(), _reload(specs))
    runner = CliRunner()
    anchors = ["--anchors", str(specs), "--anchors", str(tree / DEFAULT_OUT)]
    text = runner.invoke(app, ["apply", "--dry-run", *anchors, str(tree)])
    assert text.exit_code == exits.OK, text.output
    hunks = _hunks(text.output)
    code = {"t.first": "log_progress('made')", "t.second": "log_progress('scored')"}
    marked = [(mark, added) for marks, added in hunks for mark in marks]
    assert {m.split(":")[0].removeprefix("  hunk of ") for m, _ in marked} == set(code)
    for mark, added in marked:
        point_id = mark.split(":")[0].removeprefix("  hunk of ")
        # the hunk it marks is the one adding that point's code; port's grade named
        assert any(code[point_id] in line for line in added), (mark, added)
        assert "(ported, exact)" in mark and "verl.target.yaml:" in mark
    body = json.loads(runner.invoke(app, ["apply", "--dry-run", *anchors, "--format", "json", str(tree)]).output)
    jsonschema.validate(body, jsonout.schema("run"), cls=jsonschema.Draft202012Validator)
    ours = {p["id"]: p for p in body["points"] if p["id"].startswith("t.")}
    assert {i: p["override"]["confidence"] for i, p in ours.items()} == {"t.first": "exact", "t.second": "exact"}
    assert all(p["override"] is None for p in body["points"] if p["id"] not in ours)


def test_a_plain_dry_run_and_a_hand_written_override_are_told_apart(tmp_path: Path) -> None:
    """No-op twin: without overrides nothing is marked; an override a person wrote is marked as such."""
    tree, _catalog, specs = _case(tmp_path, "class Worker:\n    def run(self, data):\n        batch = make(data)\n")
    runner = CliRunner()
    plain = runner.invoke(app, ["apply", "--dry-run", "--anchors", str(specs), str(tree)])
    assert "+        log_progress('made')" in plain.output and "hunk of" not in plain.output
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "o.yaml").write_text(
        "file: verl/target.py\npoints:\n  - overrides: t.first\n    after: |\n      batch = make(data)\n",
        encoding="utf-8",
    )
    marked = runner.invoke(app, ["apply", "--dry-run", "--anchors", str(specs), "--anchors", str(mine), str(tree)])
    assert "  hunk of t.first: from an override (written by hand)" in marked.output
    body = json.loads(
        runner.invoke(
            app, ["apply", "--dry-run", "--anchors", str(specs), "--anchors", str(mine), "--format", "json", str(tree)]
        ).output
    )
    overrides = {p["id"]: p["override"] for p in body["points"]}
    assert overrides["t.second"] is None and overrides["t.first"]["confidence"] is None


@pytest.mark.parametrize("grade", ["sure", "LIKELY"])
def test_an_unknown_grade_in_ported_is_refused(tmp_path: Path, grade: str) -> None:
    _tree, _catalog, specs = _case(tmp_path, RENAMED)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "o.yaml").write_text(
        f"file: verl/target.py\npoints:\n  - overrides: t.first\n    scope: Worker.train\n"
        f"    ported:\n      confidence: {grade}\n",
        encoding="utf-8",
    )
    with pytest.raises(SpecError) as raised:
        load_catalog([specs, mine], shipped=False)
    assert any("must be one of exact, likely, guess" in str(p) for p in raised.value.problems)


@pytest.mark.parametrize(
    "source",
    [
        "class Worker:\n    def other(self, data):\n        pass\n",  # its scope gone: the defs there
        "class Worker:\n    def run(self, data):\n        batch = build(data)\n",  # twin: check lists none
    ],
)
def test_a_point_with_no_place_lists_the_candidates_check_lists(tmp_path: Path, source: str) -> None:
    tree, catalog, specs = _case(tmp_path, source)
    result = port(tree, catalog, Selection(), _reload(specs))
    checked = {r.point_id: r.candidates for r in check(tree, catalog).points}
    not_found = [s for s in result.suggestions if s.status is PortStatus.NOT_FOUND]
    assert not_found and all(s.candidates == checked[s.point_id] for s in not_found)
    assert any(s.candidates for s in not_found) is ("other" in source)
    body = json.loads(
        CliRunner().invoke(app, ["port", "--dry-run", "--anchors", str(specs), "--format", "json", str(tree)]).output
    )
    jsonschema.validate(body, jsonout.schema("port"), cls=jsonschema.Draft202012Validator)
    listed = [c["code"] for p in body["points"] if p["status"] == "not-found" for c in p["candidates"]]
    assert listed == [c.code for s in not_found for c in s.candidates]


INSIDE_SPEC = """\
file: verl/target.py
points:
  - id: t.eval
    facility: progress
    title: after the evaluation
    scope: Worker.run
    after: |
      metrics = evaluate(data)
    inside: |
      if self.eval_every > 0: ...
    code: |
      log_progress('evaluated')
"""


@pytest.mark.parametrize(
    ("body", "cause"),
    [
        # the statements there word for word, the enclosing `if` another one (not one that gained conditions)
        ("if self.eval_at_end:\n    metrics = evaluate(data)", PortCause.ENCLOSING_BLOCK),
        ("metrics = evaluate(data)", PortCause.ENCLOSING_BLOCK),
        # no-op twin: the statements are nowhere
        ("if self.eval_every > 0:\n    report(data)", None),
    ],
)
def test_statements_in_another_block_say_so(tmp_path: Path, body: str, cause: PortCause | None) -> None:
    source = "class Worker:\n    def run(self, data):\n" + textwrap.indent(body, " " * 8) + "\n"
    tree, catalog, specs = _case(tmp_path, source, INSIDE_SPEC)
    (found,) = port(tree, catalog, Selection(), _reload(specs)).suggestions
    assert found.status is PortStatus.NOT_FOUND and found.cause is cause, found
    if cause is not None:
        assert "if self.eval_every > 0" in found.message and "block around them differs" in found.message


CHAIN_SPEC = """\
file: verl/target.py
points:
  - id: t.prefix
    facility: progress
    title: the step's prefix
    scope: Worker.run
    after: |
      batch = make(data)
    code: |
      log_progress(f'step {self.mode}')
  - id: t.scored
    facility: progress
    title: after the score
    scope: Worker.run
    requires: [t.prefix]
    after: |
      score = judge(batch)
    code: |
      log_progress('scored')
"""


@pytest.mark.parametrize(("sets_mode", "refused"), [(False, True), (True, False)])
def test_a_point_whose_required_point_cannot_go_names_it(tmp_path: Path, sets_mode: bool, refused: bool) -> None:
    """The prefix's code reads `self.mode`, which this tree's Worker never sets: apply refuses it, and
    skips the point requiring it; port names the prefix and why, not "skipped". Twin: the tree sets it."""
    init = "    def __init__(self):\n        self.mode = 'train'\n" if sets_mode else ""
    source = (
        f"class Worker:\n{init}    def train(self, data):\n        batch = make(data)\n        score = judge(batch)\n"
    )
    tree, catalog, specs = _case(tmp_path, source, CHAIN_SPEC)
    by_id = {s.point_id: s for s in port(tree, catalog, Selection(), _reload(specs)).suggestions}
    scored = by_id["t.scored"]
    if not refused:
        assert scored.status is PortStatus.PORTED and scored.cause is None
        return
    assert by_id["t.prefix"].cause is PortCause.PROOFS and "self.mode" in by_id["t.prefix"].message
    assert (scored.status, scored.cause, scored.blocked_by) == (
        PortStatus.REFUSED,
        PortCause.REQUIRED_POINT,
        "t.prefix",
    )
    assert (
        scored.message.startswith("it requires t.prefix, which cannot go in this tree")
        and "self.mode" in scored.message
    )
    assert scored.confidence in (Confidence.EXACT, Confidence.LIKELY)


READS_SPEC = """\
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
  - id: t.scored
    facility: progress
    title: after the score, with the rollout count
    scope: Worker.run
    after: |
      score = judge(batch)
    code: |
      log_progress(f'scored {rollout_n}')
"""


@pytest.mark.parametrize(
    ("module_level", "bound"),
    [
        ("", (("rollout_n", "self.cfg.rollout_n"),)),  # bound nowhere: bound before the proof
        ("rollout_n = 4\n", ()),  # twin: the module defines it, nothing to bind
    ],
)
def test_a_name_bound_nowhere_is_bound_in_the_same_round_of_apply(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module_level: str, bound: tuple[tuple[str, str], ...]
) -> None:
    """The point's code reads `rollout_n`, which nothing defines where it goes: port binds it before
    apply proves the place (one round of apply), as the second round used to once apply refused it."""
    from trace_instrument.engine.port import names, proving

    source = module_level + RENAMED.replace("judge(batch)", "judge(batch, self.cfg.rollout_n)")
    spec = READS_SPEC.replace("score = judge(batch)", "score = judge(batch, self.cfg.rollout_n)")
    tree, catalog, specs = _case(tmp_path, source, spec)
    rounds: list[int] = []
    real = proving.apply

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        rounds.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(proving, "apply", counted)
    first = {
        s.point_id: s
        for s in port(
            tree, catalog, Selection(), _reload(specs), min_confidence=Confidence.GUESS, write=False
        ).suggestions
    }
    assert first["t.scored"].status is PortStatus.PORTED and first["t.scored"].bindings == bound
    assert len(rounds) == 1
    # the same suggestions as when apply's refusal tells the name (two rounds)
    rounds.clear()
    monkeypatch.setattr(names, "_surely_unbound", lambda *args: ())
    again = {
        s.point_id: s
        for s in port(
            tree, catalog, Selection(), _reload(specs), min_confidence=Confidence.GUESS, write=False
        ).suggestions
    }
    assert again == first
    assert len(rounds) == (2 if bound else 1)


def test_apply_plan_only_gives_the_statuses_without_editing_or_writing(tmp_path: Path) -> None:
    """port starts from apply's plan: the same statuses as a dry run where no output check objects,
    no file's text edited, and nothing written even when asked to write."""
    from trace_instrument.engine.apply import apply

    tree, catalog, _specs = _case(tmp_path, "class Worker:\n    def run(self, data):\n        batch = make(data)\n")
    before = (tree / "verl" / "target.py").read_bytes()
    planned = apply(tree, catalog, write=True, plan_only=True)
    full = apply(tree, catalog, write=False)
    assert {p.point_id: p.status for p in planned.points} == {p.point_id: p.status for p in full.points}
    assert any(f.changed for f in full.files) and not any(f.changed for f in planned.files)
    assert not planned.written and (tree / "verl" / "target.py").read_bytes() == before
    assert not (tree / ".trace-instrument.json").exists()


REVIVE_SPEC = """\
file: verl/target.py
points:
  - id: t.prefix
    facility: progress
    title: the step's prefix
    scope: Worker.run
    after: |
      batch = make(data)
    code: |
      log_progress(f'step {rollout_n}')
  - id: t.scored
    facility: progress
    title: after the score
    scope: Worker.run
    requires: [t.prefix]
    after: |
      score = judge(batch)
    code: |
      log_progress('scored')
"""


@pytest.mark.parametrize("later", [True, False])
def test_a_point_waiting_for_one_bound_after_the_proof_is_placed_in_the_same_run(tmp_path: Path, later: bool) -> None:
    """The prefix reads `rollout_n`, which its new def assigns only later (so it is not bound ahead):
    apply's proof refuses it, and skips the point requiring it; port binds the name as the def reads
    it and proves both again in the same run. Twin: the name assigned before, nothing to bind."""
    assign = "        rollout_n = self.cfg.rollout_n\n"
    body = "        batch = make(data)\n        score = judge(batch)\n"
    source = "class Worker:\n    def train(self, data):\n" + (body + assign if later else assign + body)
    tree, catalog, specs = _case(tmp_path, source, REVIVE_SPEC)
    result = port(tree, catalog, Selection(), _reload(specs), min_confidence=Confidence.GUESS, write=False)
    by_id = {s.point_id: s for s in result.suggestions}
    assert by_id["t.prefix"].status is PortStatus.PORTED, by_id["t.prefix"]
    assert by_id["t.prefix"].bindings == ((("rollout_n", "self.cfg.rollout_n"),) if later else ())
    assert by_id["t.scored"].status is PortStatus.PORTED and by_id["t.scored"].cause is None, by_id["t.scored"]
