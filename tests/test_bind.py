"""`bind`: a point's code reads a name the tree spells otherwise.

The loader rewrites the templates' reads (and refuses what it cannot prove); port finds the
spelling from the tree (an anchor whose names a fork renamed, another point's anchor in the
same scope, a read of a key of that name) and apply, check, verify and remove follow.
"""

from __future__ import annotations

import ast
import json
import textwrap
from pathlib import Path

import jsonschema
import pytest
import yaml
from support import copy_tree

import trace_instrument
from trace_instrument.engine.apply import apply
from trace_instrument.engine.check import check
from trace_instrument.engine.port import DEFAULT_OUT, port
from trace_instrument.engine.remove import remove
from trace_instrument.model import Confidence, PortStatus, Selection, Status
from trace_instrument.render import exits
from trace_instrument.spec import SpecError, load_catalog

SPEC = """\
file: verl/target.py
points:
  - id: t.count
    facility: progress
    title: after the batch is made
    scope: Worker.run
    after: |
      batch = make(data, n)
    code: |
      log_progress(f'made {n} of {len(batch)}')
  - id: t.scored
    facility: progress
    title: after the batch is scored
    scope: Worker.run
    after: |
      score = judge(batch)
    code: |
      log_progress('scored', n * 2)
"""


def _tree(tmp_path: Path, source: str, spec: str = SPEC) -> tuple[Path, Path]:
    specs = tmp_path / "spec"
    specs.mkdir()
    (specs / "spec.yaml").write_text(spec, encoding="utf-8")
    tree = tmp_path / "tree"
    (tree / "verl").mkdir(parents=True)
    (tree / "verl" / "target.py").write_text(textwrap.dedent(source), encoding="utf-8")
    return tree, specs


def _override(tmp_path: Path, body: str) -> Path:
    folder = tmp_path / "overrides"
    folder.mkdir(exist_ok=True)
    (folder / "o.yaml").write_text("file: verl/target.py\npoints:\n" + textwrap.dedent(body), encoding="utf-8")
    return folder


def _problems(specs: Path, folder: Path) -> list[str]:
    with pytest.raises(SpecError) as caught:
        load_catalog([specs, folder], shipped=False)
    return [str(p) for p in caught.value.problems]


# -- the loader --------------------------------------------------------------------------------


def test_a_binding_rewrites_every_read_and_nothing_else(tmp_path: Path) -> None:
    _, specs = _tree(tmp_path, "")
    folder = _override(tmp_path, "  - overrides: t.count\n    bind: {n: self.size + 1}\n")
    point = load_catalog([specs, folder], shipped=False).point("t.count")
    (edit,) = point.edits
    assert edit.template.text == "log_progress(f'made {(self.size + 1)} of {len(batch)}')\n"
    expected = ast.parse("log_progress(f'made {self.size + 1} of {len(batch)}')")
    assert ast.dump(ast.Module(list(edit.template.stmts), [])) == ast.dump(expected)
    assert point.bindings == (("n", "self.size + 1"),)


@pytest.mark.parametrize(
    ("bind", "phrase"),
    [
        ("{m: self.size}", "binds 'm', which the code of t.count does not read"),
        ("{n: 'self.size +'}", "does not parse as an expression"),
        ("{n: '(k := 3)'}", "does more than read a value"),
        ("{n: '(yield)'}", "does more than read a value"),
        ("{for: x}", "is not a Python name"),
        ("[n]", "must be a mapping"),
    ],
)
def test_a_binding_that_cannot_stand_is_refused_with_its_line(tmp_path: Path, bind: str, phrase: str) -> None:
    _, specs = _tree(tmp_path, "")
    folder = _override(tmp_path, f"  - overrides: t.count\n    bind: {bind}\n")
    problems = _problems(specs, folder)
    assert any(phrase in p and "o.yaml:4" in p for p in problems), problems


@pytest.mark.parametrize(
    "own",
    [
        "n = 2\n      log_progress('scored', n)",
        # an exception caught as n, a case capturing n: the template's own n, not the fork's
        "try:\n          go()\n      except Exception as n:\n          log_progress('scored', n)",
        "match batch:\n          case [n]:\n              log_progress('scored', n)",
        "match batch:\n          case [*n]:\n              log_progress('scored', n)",
        "match batch:\n          case {**n}:\n              log_progress('scored', n)",
    ],
)
def test_a_name_the_template_binds_itself_cannot_be_bound(tmp_path: Path, own: str) -> None:
    spec = SPEC.replace("log_progress('scored', n * 2)", own)
    _, specs = _tree(tmp_path, "", spec)
    folder = _override(tmp_path, "  - overrides: t.scored\n    bind: {n: self.size}\n")
    assert any("binds 'n' itself" in p for p in _problems(specs, folder))


def test_a_declared_marker_reads_the_bound_spelling_so_a_hand_edit_is_still_told(tmp_path: Path) -> None:
    """A point recognised by its marker: bound, the marker reads what the inserted code reads, so
    a hand edit of the code's other line is `drifted` (kept by remove), never `missing`."""
    spec = """\
file: verl/target.py
points:
  - id: t.env
    facility: env
    title: export n
    scope: Worker.run
    after: |
      batch = make(data, n)
    code: |
      os.environ["TRACE_N"] = str(n)
      os.environ["TRACE_M"] = "1"
    marker: |
      os.environ["TRACE_N"] = str(n)
"""
    tree, specs = _tree(tmp_path, "import os\n" + RENAMED, spec)
    folder = _override(tmp_path, "  - overrides: t.env\n    bind: {n: count}\n    after: 'batch = make(data, count)'\n")
    catalog = load_catalog([specs, folder], shipped=False)
    (marker,) = catalog.point("t.env").marker_patterns
    assert marker.text == 'os.environ["TRACE_N"] = str(count)'
    assert exits.apply_exit(apply(tree, catalog)) == exits.OK
    target = tree / "verl/target.py"
    target.write_text(target.read_text(encoding="utf-8").replace('"1"', '"2"'), encoding="utf-8")
    assert [r.status for r in check(tree, catalog).points] == [Status.DRIFTED]


# -- port finds the spelling -----------------------------------------------------------------------

RENAMED = """
class Worker:
    def run(self, data, count):
        batch = make(data, count)
        score = judge(batch)
        report(score)
"""


def _reload(specs: Path):  # type: ignore[no-untyped-def]
    return lambda folder: load_catalog([specs, folder], shipped=False)


def test_a_renamed_local_is_bound_and_every_command_follows(tmp_path: Path) -> None:
    """The fork calls `n` `count`: t.count's anchor is found with `n` spelled `count` (a guess:
    one statement shows the rename), and t.scored, in place but reading `n`, is bound as that
    anchor shows (as sure). Written when asked, applied, the code reads `count`; check is clean;
    a second port has nothing to do; remove gives the tree back."""
    tree, specs = _tree(tmp_path, RENAMED)
    pristine = (tree / "verl/target.py").read_bytes()
    catalog = load_catalog([specs], shipped=False)
    statuses = {r.point_id: (r.status, r.reason) for r in check(tree, catalog).points}
    assert statuses["t.count"][0] is Status.ANCHOR_LOST and statuses["t.scored"][0] is Status.REFUSED
    assert port(tree, catalog, Selection(), _reload(specs)).written == ()
    result = port(tree, catalog, Selection(), _reload(specs), min_confidence=Confidence.GUESS)
    by_id = {s.point_id: s for s in result.suggestions}
    assert [(s.status, s.confidence, s.bindings) for s in (by_id["t.count"], by_id["t.scored"])] == [
        (PortStatus.PORTED, Confidence.GUESS, (("n", "count"),)),
        (PortStatus.PORTED, Confidence.GUESS, (("n", "count"),)),
    ]
    assert by_id["t.count"].anchors == ("batch = make(data, count)",)
    schema = json.loads((Path(trace_instrument.__file__).parent / "spec/anchors.schema.json").read_text())
    for written in result.written:
        jsonschema.validate(yaml.safe_load(Path(written).read_text(encoding="utf-8")), schema)
    ported = load_catalog([specs, tree / DEFAULT_OUT], shipped=False)
    placed = apply(tree, ported)
    assert exits.apply_exit(placed) == exits.OK
    text = (tree / "verl/target.py").read_text(encoding="utf-8")
    lines = [line.strip() for line in text.splitlines()]
    made = lines.index("batch = make(data, count)")
    assert lines[made + 1] == "log_progress(f'made {count} of {len(batch)}')"
    assert lines[lines.index("score = judge(batch)") + 1] == "log_progress('scored', count * 2)"
    assert {r.status for r in check(tree, ported).points} == {Status.PRESENT}
    again = port(tree, ported, Selection(), _reload(specs), min_confidence=Confidence.GUESS)
    assert again.suggestions == () and again.written == ()
    remove(tree, ported)
    assert (tree / "verl/target.py").read_bytes() == pristine


def test_a_name_read_from_a_key_of_its_name_is_a_guess(tmp_path: Path) -> None:
    spec = SPEC.replace("log_progress('scored', n * 2)", "log_progress('scored', validate)")
    tree, specs = _tree(
        tmp_path,
        """
        class Worker:
            def run(self, data, n, batch_meta):
                batch = make(data, n)
                score = judge(batch)
                report(score, batch_meta.get("validate", False))
        """,
        spec,
    )
    catalog = load_catalog([specs], shipped=False)
    (found,) = port(tree, catalog, Selection(), _reload(specs)).suggestions
    assert (found.point_id, found.status, found.confidence) == ("t.scored", PortStatus.UNSURE, Confidence.GUESS)
    assert found.bindings == (("validate", "batch_meta.get('validate', False)"),)


def test_a_spelling_that_calls_is_never_bound_even_as_a_guess(tmp_path: Path) -> None:
    """The fork passes `next(it)` where the catalog's verl passed `n`: bound, the point's code
    would call next() again and take the next batch from verl. The anchor is found, but port
    writes no binding of it, whatever --min-confidence says."""
    tree, specs = _tree(tmp_path, RENAMED.replace("make(data, count)", "make(data, next(it))"))
    catalog = load_catalog([specs], shipped=False)
    result = port(tree, catalog, Selection(), _reload(specs), min_confidence=Confidence.GUESS)
    by_id = {s.point_id: s for s in result.suggestions}
    assert {s.status for s in by_id.values()} == {PortStatus.REFUSED}
    assert "computes as `next(it)`: read again, that code would run twice" in by_id["t.count"].message
    assert "shows computed as `next(it)`" not in by_id["t.scored"].message  # t.count's fit taught nothing
    assert result.written == ()


@pytest.mark.parametrize(
    "reads",
    [
        # the one read of key 'validate' is on a nested def's parameter: `meta` is another object
        # where the code goes (the method's own `meta`, a list)
        "def helper(meta):\n                    return meta.get('validate')\n                report(helper({}), meta[0])",
        "report([m.get('validate') for m in meta])",
        "report(lambda meta: meta['validate'])",
        # reading it again would pop another item from verl's queue
        "report(meta.pop().get('validate'))",
    ],
)
def test_a_key_read_that_means_another_thing_where_the_code_goes_is_not_bound(tmp_path: Path, reads: str) -> None:
    spec = SPEC.replace("log_progress('scored', n * 2)", "log_progress('scored', validate)")
    source = f"""
        class Worker:
            def run(self, data, n, meta):
                batch = make(data, n)
                score = judge(batch)
                {reads}
        """
    tree, specs = _tree(tmp_path, source, spec)
    catalog = load_catalog([specs], shipped=False)
    (found,) = port(tree, catalog, Selection(), _reload(specs), min_confidence=Confidence.GUESS).suggestions
    assert (found.point_id, found.status, found.bindings) == ("t.scored", PortStatus.REFUSED, ())
    # the real cause, not a way out that does not exist (issue 38, class 7)
    assert "nothing to bind" in found.message and "give the override" not in found.message


def test_a_name_nothing_spells_is_left_for_a_human_with_the_way_out(tmp_path: Path) -> None:
    spec = SPEC.replace("log_progress('scored', n * 2)", "log_progress('scored', missing_thing)")
    tree, specs = _tree(tmp_path, RENAMED.replace("count", "n"), spec)
    (found,) = port(tree, load_catalog([specs], shipped=False), Selection(), _reload(specs)).suggestions
    assert found.status is PortStatus.REFUSED
    assert "reads 'missing_thing', which Worker.run does not define: no anchor of that scope shows it" in found.message
    assert "nothing there reads a key or attribute 'missing_thing', so there is nothing to bind" in found.message
    assert "give the override" not in found.message


def test_verl_071_reads_rollout_n_as_the_config_it_comes_from(tmp_path: Path, catalog, verl_release) -> None:  # type: ignore[no-untyped-def]
    """verl 0.7.1 repeats the batch by `self.config.actor_rollout_ref.rollout.n` where 0.9.0
    names it `rollout_n`: port anchors flow.v0.traj-uid-repeat on that statement and binds the
    name, and apply puts the code right after it, reading the config."""
    pristine = verl_release("0.7.1")
    tree = copy_tree(pristine, tmp_path / "v071")
    trainer = tree / "verl/trainer/ppo/ray_trainer.py"
    only = Selection(only=frozenset({"flow.v0.traj-uid-repeat"}))
    reload = lambda folder: load_catalog([folder])
    (found,) = port(tree, catalog, only, reload).suggestions
    assert (found.status, found.confidence) == (PortStatus.PORTED, Confidence.LIKELY)
    assert found.bindings == (("rollout_n", "self.config.actor_rollout_ref.rollout.n"),)
    placed = apply(tree, load_catalog([tree / DEFAULT_OUT]), only)
    assert exits.apply_exit(placed) == exits.OK
    after = trainer.read_text(encoding="utf-8").splitlines()
    # where the repeat statement ends, found by reading the file (the statement spans three lines)
    start = next(i for i, line in enumerate(after) if "gen_batch_output = gen_batch.repeat(" in line)
    end = next(i for i in range(start, len(after)) if after[i].strip() == ")")
    assert after[start + 1].strip() == "repeat_times=self.config.actor_rollout_ref.rollout.n, interleave=True"
    assert after[end + 1].lstrip().startswith("# Number each rollout")
    assert "traj_uid" in after[end + 3] and "self.config.actor_rollout_ref.rollout.n" in after[end + 4]


def test_a_point_waiting_for_a_lost_one_it_requires_is_bound_once_that_one_is_ported(tmp_path: Path) -> None:
    """t.scored requires t.count: skipped while t.count is lost, it is looked at again once port
    places t.count, and bound as t.count's anchor shows."""
    spec = SPEC.replace(
        "    title: after the batch is scored\n", "    title: after the batch is scored\n    requires: [t.count]\n"
    )
    tree, specs = _tree(tmp_path, RENAMED, spec)
    catalog = load_catalog([specs], shipped=False)
    assert {r.point_id: r.status for r in apply(tree, catalog, write=False).points}["t.scored"] is Status.SKIPPED
    found = port(tree, catalog, Selection(), _reload(specs), min_confidence=Confidence.GUESS).suggestions
    by_id = {s.point_id: s for s in found}
    assert (by_id["t.scored"].status, by_id["t.scored"].bindings) == (PortStatus.PORTED, (("n", "count"),))
    placed = apply(tree, load_catalog([specs, tree / DEFAULT_OUT], shipped=False))
    assert {r.point_id: r.status for r in placed.points} == {"t.count": Status.APPLIED, "t.scored": Status.APPLIED}


CONFIRMED_SPEC = """\
file: verl/target.py
points:
  - id: t.count
    facility: progress
    title: after the batch is made and sized
    scope: Worker.run
    after: |
      batch = make(data, n)
      sizes = [n] * len(batch)
    code: |
      log_progress(f'made {n}')
"""


@pytest.mark.parametrize(("shown_twice", "confidence"), [(True, Confidence.LIKELY), (False, Confidence.GUESS)])
def test_a_rename_two_statements_show_is_likely_one_alone_a_guess(
    tmp_path: Path, shown_twice: bool, confidence: Confidence
) -> None:
    """`n` spelled `count` in both statements of a two-statement anchor bears the rename out
    (likely); an anchor of one statement showing it alone is a guess: so does another statement
    of the same shape (the actor's metrics read as the critic's)."""
    second = "sizes = [count] * len(batch)" if shown_twice else "sizes = [n] * len(batch)"
    spec = CONFIRMED_SPEC if shown_twice else CONFIRMED_SPEC.replace("      sizes = [n] * len(batch)\n", "")
    tree, specs = _tree(
        tmp_path,
        f"""
        class Worker:
            def run(self, data, count, n):
                batch = make(data, count)
                {second}
        """,
        spec,
    )
    (found,) = port(
        tree, load_catalog([specs], shipped=False), Selection(), _reload(specs), min_confidence=Confidence.GUESS
    ).suggestions
    assert (found.status, found.confidence, found.bindings) == (PortStatus.PORTED, confidence, (("n", "count"),))


# -- an attribute of self the tree's class no longer keeps --------------------------------------

ATTRIBUTE_SPEC = """\
file: verl/target.py
points:
  - id: t.banner
    facility: progress
    title: the step banner
    scope: Worker.fit
    after: |
      last = self.step >= self.total
    code: |
      log_progress(f'{self.step % self.per_epoch} of {self.per_epoch}')
"""


def test_an_attribute_of_self_is_bound_in_every_read(tmp_path: Path) -> None:
    _, specs = _tree(tmp_path, "", ATTRIBUTE_SPEC)
    folder = _override(tmp_path, "  - overrides: t.banner\n    bind: {self.per_epoch: len(self.loader)}\n")
    (edit,) = load_catalog([specs, folder], shipped=False).point("t.banner").edits
    assert edit.template.text == "log_progress(f'{self.step % len(self.loader)} of {len(self.loader)}')\n"


@pytest.mark.parametrize(
    ("bind", "code", "phrase"),
    [
        ("{self.per_epoch2: x}", "", "which the code of t.banner does not read"),
        ("{self.for: x}", "", "is not a Python name"),
        (
            "{self.per_epoch: x}",
            "self.per_epoch = 3\n      log_progress(self.per_epoch)",
            "binds 'self.per_epoch' itself",
        ),
    ],
)
def test_an_attribute_binding_that_cannot_stand_is_refused(tmp_path: Path, bind: str, code: str, phrase: str) -> None:
    spec = (
        ATTRIBUTE_SPEC.replace("log_progress(f'{self.step % self.per_epoch} of {self.per_epoch}')", code)
        if code
        else ATTRIBUTE_SPEC
    )
    _, specs = _tree(tmp_path, "", spec)
    folder = _override(tmp_path, f"  - overrides: t.banner\n    bind: {bind}\n")
    assert any(phrase in p for p in _problems(specs, folder)), _problems(specs, folder)


@pytest.mark.parametrize(
    ("body", "bound"),
    [
        # the release's two reads of self.per_epoch read len(self.loader) here: bound, likely
        (
            "epoch = self.step // len(self.loader)\nlast = self.step >= self.total\nprev = (self.step - 1) // len(self.loader)",
            "len(self.loader)",
        ),
        # decoys: the two statements read different things; what they read calls something; nothing alike
        (
            "epoch = self.step // len(self.loader)\nlast = self.step >= self.total\nprev = (self.step - 1) // self.size",
            "",
        ),
        ("epoch = self.step // self.count()\nlast = self.step >= self.total", ""),
        ("last = self.step >= self.total", ""),
    ],
)
def test_an_unset_attribute_reads_what_the_tree_reads_where_the_release_read_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str, bound: str
) -> None:
    """The validated release read `self.per_epoch` in `epoch = self.step // self.per_epoch` and
    `prev = (self.step - 1) // self.per_epoch` (attribute_reads.json); this tree's class sets no
    per_epoch. Where its statements are those but for one expression, and it only reads a value or
    a size, the point binds it (likely); else the point stays refused, as apply said."""
    from trace_instrument.engine.port import attributes

    release = ["epoch = self.step // self.per_epoch", "prev = (self.step - 1) // self.per_epoch"]
    monkeypatch.setattr(attributes, "shipped_attribute_reads", lambda: {"t.banner": {"self.per_epoch": release}})
    init = "    def __init__(self, loader):\n        self.loader = loader\n        self.step = self.total = self.size = 0\n"
    source = (
        "class Worker:\n"
        + init
        + "    def count(self):\n        return 3\n    def fit(self):\n"
        + textwrap.indent(body, " " * 8)
        + "\n"
    )
    tree, specs = _tree(tmp_path, source, ATTRIBUTE_SPEC)
    catalog = load_catalog([specs], shipped=False)
    assert {r.point_id: r.reason for r in apply(tree, catalog, write=False).points}["t.banner"] is not None
    found = {
        s.point_id: s
        for s in port(tree, catalog, Selection(), lambda f: load_catalog([specs, f], shipped=False)).suggestions
    }
    if not bound:
        assert "t.banner" not in found or found["t.banner"].status is not PortStatus.PORTED
        return
    banner = found["t.banner"]
    assert (banner.status, banner.confidence, banner.bindings) == (
        PortStatus.PORTED,
        Confidence.LIKELY,
        (("self.per_epoch", bound),),
    )
    placed = apply(tree, load_catalog([specs, tree / DEFAULT_OUT], shipped=False))
    assert exits.apply_exit(placed) == exits.OK
    assert f"log_progress(f'{{self.step % {bound}}} of {{{bound}}}')" in (tree / "verl" / "target.py").read_text()
