"""A point is in place when its code still traces what it traced beside its anchor.

The fork edits business code after apply: a line between an anchor and the code apply put next to
it, a blank line, a comment, a statement that changes nothing the code reads. The code still
reads the same values and runs where its anchor runs: `check` and `verify` pass, and apply writes
nothing. A statement in between that rebinds or changes what the code reads, an early exit, the
code put under another `if` or loop, on the other side of its anchor or in another function, or
its anchor deleted: those stay red, in one message that names the cause and whose fix moves the
tracing code only.

Every line number asserted is found in the edited text by the test itself.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from rich.console import Console

from trace_instrument.engine.apply import apply
from trace_instrument.engine.check import check
from trace_instrument.engine.remove import remove
from trace_instrument.engine.verify import verify
from trace_instrument.model import Catalog, Check, RunResult, Status
from trace_instrument.render import exits
from trace_instrument.render.text import point_lines
from trace_instrument.spec import load_catalog

TARGET = "verl/target.py"
SPEC = """\
file: verl/target.py
points:
  - id: t.start
    facility: progress
    title: the run starts
    scope: Trainer.fit
    body_start: |
      def fit(self, batch): ...
    code: |
      log_progress('fit starts')
  - id: t.reward
    facility: sample_flow
    title: the batch's reward (reads batch and reward)
    scope: Trainer.fit
    after: |
      reward = score(batch)
    code: |
      trace_flow(uid=batch["uid"], traj_uid='N/A', from_module='Trainer', to_module='Scorer',
                 stage='TRAIN_REWARD', detail=str(reward))
  - id: t.reward-done
    facility: progress
    title: the reward is computed (reads reward alone)
    scope: Trainer.fit
    after: |
      reward = score(batch)
    code: |
      log_progress(f'reward {reward}')
  - id: t.update
    facility: progress
    title: an update starts
    scope: Trainer.fit
    before: |
      out = self.update(batch, step)
    code: |
      log_progress(f'update {step}')
  - id: t.step
    facility: progress
    title: a step ends
    scope: Trainer.fit
    body_end: |
      for step in range(...): ...
    code: |
      log_progress(f'step {step} done')
"""
BUSINESS = '''\
from verl.utils.other import make_uids, score


class Trainer:
    def fit(self, batch):
        """Train on one batch."""
        batch["uid"] = make_uids(len(batch))
        reward = score(batch)
        for step in range(3):
            out = self.update(batch, step)
            self.metrics(out)
        return out

    def other(self, batch):
        return batch
'''
ANCHOR = "        reward = score(batch)\n"
REWARD = "        trace_flow(uid=batch"
REWARD_BLOCK = (
    "        trace_flow(uid=batch[\"uid\"], traj_uid='N/A', from_module='Trainer', to_module='Scorer',\n"
    "                   stage='TRAIN_REWARD', detail=str(reward))\n"
)
DONE = "        log_progress(f'reward {reward}')\n"
UPDATE = "            log_progress(f'update {step}')\n"
UPDATE_ANCHOR = "            out = self.update(batch, step)\n"
STEP = "            log_progress(f'step {step} done')\n"
START = "        log_progress('fit starts')\n"
TRACING_IMPORT = "from verl.utils.tracing import log_progress, trace_flow\n"
DOCSTRING = '        """Train on one batch."""\n'


@pytest.fixture
def catalog(tmp_path: Path) -> Catalog:
    folder = tmp_path / "spec"
    folder.mkdir()
    (folder / "spec.yaml").write_text(SPEC, encoding="utf-8")
    return load_catalog([folder], shipped=False)


@pytest.fixture
def applied(tmp_path: Path, catalog: Catalog) -> Path:
    """The checkout after one apply of every point (the manifest written), as the fork has it."""
    root = tmp_path / "checkout"
    (root / "verl").mkdir(parents=True)
    (root / TARGET).write_text(BUSINESS, encoding="utf-8")
    result = apply(root, catalog)
    assert {p.status for p in result.points} == {Status.APPLIED}, [(p.point_id, p.message) for p in result.points]
    text = (root / TARGET).read_text(encoding="utf-8")
    for block in (REWARD_BLOCK, DONE, UPDATE, STEP, START):
        assert text.count(block) == 1, block
    assert text.index(ANCHOR) + len(ANCHOR) == text.index(REWARD_BLOCK), "apply put the code after its anchor"
    return root


def _replace(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, old
    return text.replace(old, new)


def _line(text: str, needle: str) -> int:
    found = [number for number, line in enumerate(text.splitlines(), 1) if needle in line]
    assert len(found) == 1, f"{needle!r} is on lines {found}"
    return found[0]


def _edit(root: Path, change: Callable[[str], str]) -> str:
    target = root / TARGET
    text = change(target.read_text(encoding="utf-8"))
    target.write_text(text, encoding="utf-8")
    return text


def _not_present(result: RunResult) -> dict[str, Status]:
    return {p.point_id: p.status for p in result.points if p.status is not Status.PRESENT}


def _verify_flags(root: Path, catalog: Catalog) -> set[str]:
    """The points verify's point proofs fail (the synthetic tree has no runtime package: those
    findings are not about the points)."""
    findings = [f for f in verify(root, catalog).findings if f.check is Check.POINTS and not f.ok]
    return {f.message.split(" ", 1)[0].rstrip(":") for f in findings}


# -- harmless edits: present, exit 0, verify agrees, apply writes nothing ----------------------

HARMLESS: dict[str, Callable[[str], str]] = {
    # after an `after:` anchor, before both blocks apply put there
    "a line after the anchor": lambda t: _replace(t, ANCHOR, ANCHOR + "        count = len(batch)\n"),
    # between the two blocks of one anchor: the first is placed at the same anchor, not crossed
    "a line between two blocks of one anchor": lambda t: _replace(
        t, REWARD_BLOCK, REWARD_BLOCK + "        self.seen += 1\n"
    ),
    # between a `before:` block and its anchor
    "a line before the anchor": lambda t: _replace(t, UPDATE, UPDATE + "            self.calls += 1\n"),
    # between the docstring and a `body_start:` block
    "a line at the start of the body": lambda t: _replace(t, DOCSTRING, DOCSTRING + "        self.calls = 0\n"),
    # after a `body_end:` block, at the end of its loop
    "a line at the end of the body": lambda t: _replace(t, STEP, STEP + "            total = step + 1\n"),
    "a blank line": lambda t: _replace(t, ANCHOR, ANCHOR + "\n"),
    "a comment": lambda t: _replace(t, ANCHOR, ANCHOR + "        # the fork's note\n"),
    "a blank line, a comment and a line": lambda t: _replace(
        t, ANCHOR, ANCHOR + "\n        # the fork's note\n        print('scored', len(batch))\n"
    ),
    # a block statement whose every part leaves what the code reads alone
    "a business block touching nothing the code reads": lambda t: _replace(
        t, ANCHOR, ANCHOR + "        if self.verbose:\n            self.logger.info('scored')\n"
    ),
}


@pytest.mark.parametrize("edit", list(HARMLESS), ids=list(HARMLESS))
def test_a_harmless_business_edit_leaves_every_point_present(applied: Path, catalog: Catalog, edit: str) -> None:
    text = _edit(applied, HARMLESS[edit])
    checked = check(applied, catalog)
    assert _not_present(checked) == {}, [p.message for p in checked.points if p.status is not Status.PRESENT]
    assert exits.check_exit(checked) == exits.OK
    assert _verify_flags(applied, catalog) == set()
    applied_again = apply(applied, catalog)
    assert {p.status for p in applied_again.points} == {Status.PRESENT}
    assert (applied / TARGET).read_text(encoding="utf-8") == text, "apply has nothing to put right"
    # remove takes the tracing out and leaves the fork's edit where the fork put it
    assert {p.status for p in remove(applied, catalog).points} == {Status.REMOVED}
    expected = text
    for block in (TRACING_IMPORT, START, REWARD_BLOCK, DONE, UPDATE, STEP):
        expected = _replace(expected, block, "")
    assert (applied / TARGET).read_text(encoding="utf-8") == expected


def test_verify_names_the_forks_business_line_once_and_apply_records_it(applied: Path, catalog: Catalog) -> None:
    """The zero-intrusion proof compares business code with the last apply's: the fork's line is a
    statement added since, said with how to make it the baseline; after apply it is."""
    text = _edit(applied, HARMLESS["a line after the anchor"])
    line = _line(text, "count = len(batch)")
    intrusion = [f for f in verify(applied, catalog).findings if f.check is Check.ZERO_INTRUSION and not f.ok]
    assert [f.line for f in intrusion] == [line]
    assert intrusion[0].message.endswith("`apply` records the business code as it now is")
    apply(applied, catalog)
    assert (applied / TARGET).read_text(encoding="utf-8") == text
    assert not [f for f in verify(applied, catalog).findings if f.check is Check.ZERO_INTRUSION and not f.ok]


# -- edits that change what the code traces: moved, with the cause, once -----------------------


def _rebound(t: str) -> str:
    return _replace(t, ANCHOR, ANCHOR + "        reward = reward * 1.0\n")


def _written_through(t: str) -> str:
    return _replace(t, ANCHOR, ANCHOR + '        batch["uid"] = None\n')


def _early_exit(t: str) -> str:
    return _replace(t, ANCHOR, ANCHOR + "        if reward is None:\n            return None\n")


def _under_if(t: str) -> str:
    indented = "".join("    " + line for line in REWARD_BLOCK.splitlines(True))
    return _replace(t, REWARD_BLOCK, "        if reward:\n" + indented)


def _into_loop(t: str) -> str:
    return _replace(_replace(t, DONE, ""), UPDATE, UPDATE.replace("update {step}", "reward {reward}") + UPDATE)


def _other_branch(t: str) -> str:
    branches = "            if step:\n    " + UPDATE_ANCHOR + "            else:\n    " + UPDATE
    return _replace(t, UPDATE + UPDATE_ANCHOR, branches)


def _below_anchor(t: str) -> str:
    return _replace(_replace(t, UPDATE, ""), UPDATE_ANCHOR, UPDATE_ANCHOR + UPDATE)


# edit -> {point: (the cause's statement, words of the cause)}
MOVED: dict[str, tuple[Callable[[str], str], dict[str, tuple[str, str]]]] = {
    "a statement rebinding a name the code reads": (
        _rebound,
        {
            "t.reward": ("reward = reward * 1.0", "rebinds `reward`, which the code reads"),
            "t.reward-done": ("reward = reward * 1.0", "rebinds `reward`, which the code reads"),
        },
    ),
    # t.reward reads batch["uid"]; t.reward-done reads reward alone and stays present
    "a statement writing into what the code reads": (
        _written_through,
        {"t.reward": ('batch["uid"] = None', "changes `batch`, which the code reads")},
    ),
    "an early return between the anchor and the code": (
        _early_exit,
        {
            "t.reward": ("return None", "may leave the body between its anchor and the code"),
            "t.reward-done": ("return None", "may leave the body between its anchor and the code"),
        },
    ),
    # the loop's next step can start after the code ran and before its anchor did
    "a continue between the code and its before anchor": (
        lambda t: _replace(t, UPDATE, UPDATE + "            if step == 2:\n                continue\n"),
        {"t.update": ("continue", "may leave the body between its anchor and the code")},
    ),
    "the code moved under another if": (
        _under_if,
        {"t.reward": ("if reward:", "it runs inside `if reward:`")},
    ),
    "the code moved into a loop": (
        _into_loop,
        {"t.reward-done": ("for step in range(3):", "it runs inside `for step in range(3):")},
    ),
    "the code moved into the other branch of its anchor's if": (
        _other_branch,
        {"t.update": ("if step:", "it runs in another branch of `if step:`")},
    ),
    "the code moved to the other side of its anchor": (
        _below_anchor,
        {"t.update": ("out = self.update(batch, step)", "which its anchor puts it before")},
    ),
}


@pytest.mark.parametrize("edit", list(MOVED), ids=list(MOVED))
def test_an_edit_that_changes_what_the_code_traces_is_moved_with_its_cause(
    applied: Path, catalog: Catalog, edit: str
) -> None:
    change, causes = MOVED[edit]
    text = _edit(applied, change)
    checked = check(applied, catalog)
    assert _not_present(checked) == dict.fromkeys(causes, Status.MOVED)
    assert exits.check_exit(checked) == exits.FAILED
    for point_id, (statement, words) in causes.items():
        result = next(p for p in checked.points if p.point_id == point_id)
        needle = {"t.reward": REWARD, "t.reward-done": "log_progress(f'reward {reward}')", "t.update": UPDATE.strip()}[
            point_id
        ]
        found = _line(text, needle)
        assert result.line == found
        cause_line = _line(text, statement)
        assert f"line {cause_line}" in result.message and words in result.message, result.message
        assert result.message.startswith(f"its code is at line {found}, but its anchor puts it at line ")
        # the fix moves the tracing code back, or re-anchors it: never remove + apply around the fork's code
        assert "`remove --only`" not in result.message and "apply --only" not in result.message
        # where its anchor puts it: next to the anchor's statement, which the text says
        anchor = (ANCHOR if point_id != "t.update" else UPDATE_ANCHOR).strip()
        beside = _line(text, anchor) + (0 if point_id == "t.update" else 1)
        if point_id == "t.reward-done" and ANCHOR + REWARD_BLOCK in text:  # after the block of its anchor's gap
            beside = _line(text, "stage='TRAIN_REWARD'") + 1
        assert (result.line, result.expected_line) == (found, beside)
        assert f"its anchor puts it at line {beside}" in result.message
        # said once: the point's line and its message, no second line repeating the two lines
        assert _rendered(result).splitlines()[1:] == [f"      {result.message}"]
    assert _verify_flags(applied, catalog) == set(causes)
    apply(applied, catalog)
    assert (applied / TARGET).read_text(encoding="utf-8") == text, "apply leaves the code where the fork put it"


def _rendered(result) -> str:
    console = Console(width=400, record=True, color_system=None)
    for line in point_lines(result):
        console.print(line)
    return console.export_text()


def test_code_moved_into_another_function_is_not_the_points_in_place(applied: Path, catalog: Catalog) -> None:
    """Out of its scope the block is no longer the point's: the point is missing, the code there is
    tracing code nobody accounts for; verify says the point is missing too."""
    other = "    def other(self, batch):\n"
    text = _edit(applied, lambda t: _replace(_replace(t, REWARD_BLOCK, ""), other, other + REWARD_BLOCK))
    checked = check(applied, catalog)
    assert _not_present(checked) == {"t.reward": Status.MISSING, "unexpected": Status.UNEXPECTED}
    unexpected = next(p for p in checked.points if p.status is Status.UNEXPECTED)
    assert unexpected.line == _line(text, REWARD)
    assert exits.check_exit(checked) == exits.FAILED
    assert _verify_flags(applied, catalog) == {"t.reward"}


def test_code_whose_anchor_was_deleted_is_unanchored_in_check_and_verify(applied: Path, catalog: Catalog) -> None:
    text = _edit(applied, lambda t: _replace(t, UPDATE_ANCHOR, ""))
    checked = check(applied, catalog)
    lost = _not_present(checked)
    assert lost == {"t.update": Status.ANCHOR_LOST}
    result = next(p for p in checked.points if p.point_id == "t.update")
    assert result.message.startswith(f"its code is at line {_line(text, UPDATE.strip())}, but anchor not found")
    assert exits.check_exit(checked) == exits.FAILED
    assert _verify_flags(applied, catalog) == set(lost)


# -- the rule itself, statement by statement ---------------------------------------------------

READS = "trace_flow(uid=batch.non_tensor_batch['uid'], step=self.global_steps, n=len(batch))"
# statement -> a fragment of why it changes what READS reads ("" : it changes nothing of it)
STATEMENTS = {
    "count = len(batch)": "",
    "print('scored', batch.meta_info)": "",
    "self.logger.info('x')": "",  # a method of `self.logger`: READS reads nothing of it
    "import numpy as np": "",
    "metrics = np.mean(scores)": "",  # a call on an imported module, given nothing the code reads
    "np.copyto(batch.non_tensor_batch['uid'], other)": "may change `batch.non_tensor_batch`, which the code reads",
    "for step in range(3):\n    if step > 1:\n        break": "",  # the loop's own break
    "[uid for uid in other]": "",  # a comprehension's target binds in the comprehension
    "def helper(batch):\n    batch.x = 1": "",  # its body runs later, its parameter is its own
    "'a note'": "",
    "batch = batch.select()": "rebinds `batch`, which the code reads",
    "batch.non_tensor_batch['uid'] = None": "changes `batch.non_tensor_batch`, which the code reads",
    "batch.meta_info['x'] = 1": "changes `batch.meta_info`, part of `batch`, which the code reads",
    "del batch": "rebinds `batch`",
    "self.global_steps += 1": "changes `self.global_steps`, which the code reads",
    "self.reset()": "may change `self`, which the code reads",
    "batch.non_tensor_batch.pop('uid')": "may change `batch.non_tensor_batch`, which the code reads",
    "compute(batch)": "may change `batch`, which the code reads",
    "with marked_timer('x', batch.meta_info):\n    pass": "may change `batch.meta_info`",
    "if (batch := other):\n    pass": "rebinds `batch`",
    "from x import len": "rebinds `len`, which the code reads",
    "if batch is None:\n    return": "`return` (line 2) may leave the body between its anchor and the code",
    "try:\n    go()\nexcept OSError:\n    raise": "`raise` (line 4) may leave",
    "while True:\n    go()": "`while True:` (line 1) may leave",
    "for item in batch:\n    continue": "",  # iterating reads batch; its target is `item`
}


@pytest.mark.parametrize("code", list(STATEMENTS), ids=list(STATEMENTS))
def test_what_a_statement_between_changes_of_what_the_code_reads(code: str) -> None:
    import ast

    from trace_instrument.locate.gap import first_change, reads

    read = reads(ast.parse(READS).body)
    assert read == {"trace_flow", "batch.non_tensor_batch", "self.global_steps", "len", "batch"}
    stmt = ast.parse(code).body[0]
    why = first_change(stmt, read, frozenset({"np", "numpy"}))
    wanted = STATEMENTS[code]
    assert (wanted in why) if wanted else why == "", why
