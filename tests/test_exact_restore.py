"""A fork's own comments on the lines apply rewrites survive apply + remove on real verl.

docs/instrumenting.md promises that remove gives a file back byte for byte and keeps the user's
own edits; the rewritten regions used to be rebuilt from the anchors, losing comments on them.
"""

from __future__ import annotations

from pathlib import Path

from support import copy_tree, tree_bytes

from trace_instrument.engine.apply import apply
from trace_instrument.engine.check import check
from trace_instrument.engine.remove import remove
from trace_instrument.model import EXTRAS, Catalog, Selection, Status
from trace_instrument.spec import load_catalog

AGENT_LOOP = "verl/experimental/agent_loop/agent_loop.py"

# (line in pristine verl 0.9.0, what it holds, the fork's comment at its end)
TRAILING = [
    (86, "    compute_score: float = 0.0", "  # seconds"),
    (968, '            with simple_timer("compute_score", timing):', "  # timed per sample"),
    (1276, "        slowest = np.argmax(t_generate_sequences + t_tool_calls + t_compute_score)", "  # all three"),
]
# a comment line the fork put above this line
ABOVE = (708, "            return await self._agent_loop_postprocess(", "            # hand the output on\n")


def _fork(checkout: Path) -> None:
    """The fork's comments, on the lines the test names (checked first: a new verl moves them)."""
    path = checkout / AGENT_LOOP
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    for number, text, comment in TRAILING:
        assert lines[number - 1] == text + "\n", f"line {number} of {AGENT_LOOP} is not {text!r}"
        lines[number - 1] = text + comment + "\n"
    number, start, comment = ABOVE
    assert lines[number - 1].startswith(start), f"line {number} of {AGENT_LOOP} does not start {start!r}"
    lines.insert(number - 1, comment)
    path.write_text("".join(lines), encoding="utf-8")


def test_fork_comments_on_rewritten_lines_survive_apply_and_remove(
    verl_090: Path, tmp_path: Path, catalog: Catalog
) -> None:
    checkout = copy_tree(verl_090, tmp_path / "checkout")
    _fork(checkout)
    forked = tree_bytes(checkout)
    extras = Selection(extras=frozenset({"reward-score-metric"}))

    applied = apply(checkout, catalog, extras)
    assert applied.error is None and not [f.error for f in applied.files if f.error]
    checked = check(checkout, catalog, extras)
    assert [(p.point_id, p.status.value) for p in checked.points if p.status is not Status.PRESENT] == []

    removed = remove(checkout, catalog)
    assert removed.error is None and not [f.error for f in removed.files if f.error]
    after = tree_bytes(checkout)
    assert sorted(after) == sorted(forked)
    assert [name for name in forked if after[name] != forked[name]] == []
    text = after[AGENT_LOOP].decode()
    assert all(comment in text for _n, _t, comment in TRAILING) and ABOVE[2] in text


def test_apply_update_takes_the_older_code_out_exactly(tmp_path: Path) -> None:
    """`apply --update` takes a stale rewrite out through the recorded original, so the region's
    comments and quotes are the user's again when the point is removed later."""
    case = Path(__file__).parent / "fixtures" / "remove" / "body-capture-keeps-comments"
    catalogs = []
    for version, code in (("v1", "log_progress('scored')"), ("v2", "log_progress('scored', 1)")):
        folder = tmp_path / version
        folder.mkdir()
        text = (case / "spec.yaml").read_text(encoding="utf-8")
        assert "      log_progress('scored')\n    marker" in text
        (folder / "spec.yaml").write_text(
            text.replace("      log_progress('scored')\n    marker", f"      {code}\n    marker")
        )
        catalogs.append(load_catalog([folder], shipped=False))
    target = tmp_path / "checkout" / "verl" / "target.py"
    target.parent.mkdir(parents=True)
    before = (case / "before.py").read_bytes()
    target.write_bytes(before)
    everything = Selection(extras=frozenset(EXTRAS))

    assert [p.status for p in apply(target.parents[1], catalogs[0], everything).points] == [Status.APPLIED]
    updated = apply(target.parents[1], catalogs[1], everything, update=True)
    assert [p.status for p in updated.points] == [Status.UPDATED]
    assert "log_progress('scored', 1)" in target.read_text(encoding="utf-8")
    assert [p.status for p in remove(target.parents[1], catalogs[1], everything).points] == [Status.REMOVED]
    assert target.read_bytes() == before


def test_a_checkout_whose_line_breaks_are_all_cr_is_given_back_byte_for_byte(verl_090, tmp_path):
    """Old-Mac line breaks (`\\r` alone): LibCST drops a file's last one, and a placeholder's line
    starts after it; apply, check and remove must still see and give back the file as it was."""
    catalog = load_catalog()
    checkout = copy_tree(verl_090, tmp_path / "cr")
    for relative in catalog.files:
        path = checkout / relative
        if path.exists():
            path.write_bytes(path.read_bytes().replace(b"\r\n", b"\n").replace(b"\n", b"\r"))
    before = tree_bytes(checkout)
    assert apply(checkout, catalog).written
    applied = [(checkout / f).read_bytes() for f in catalog.files if (checkout / f).exists()]
    assert all(data.endswith(b"\r") and b"\n" not in data for data in applied)
    assert {p.status for p in check(checkout, catalog).points} == {Status.PRESENT}
    taken = remove(checkout, catalog)
    assert {p.status for p in taken.points} <= {Status.REMOVED, Status.MISSING}, [
        (p.point_id, p.status.value, p.message) for p in taken.points if p.status is Status.KEPT
    ]
    assert tree_bytes(checkout) == before


ONE_LINE_SPEC = """
file: verl/target.py
points:
  - id: t.banner
    facility: progress
    title: a one-line progress message
    scope: Trainer.fit
    after: |
      metrics = {}
    code: |
      log_progress('{message}')
"""
TRAINER_BEFORE = "class Trainer:\n    def fit(self):\n        metrics = {}\n        return metrics\n"


def test_a_reworded_one_line_point_is_stale_and_update_replaces_it_in_place(tmp_path: Path) -> None:
    """A release that rewords a point's message: its old line is the point's code in an older
    template (stale, not missing plus an unexpected call), and `apply --update` replaces it."""
    catalogs = []
    for version, message in (("v1", "start record metrics"), ("v2", "start recording metrics")):
        folder = tmp_path / version
        folder.mkdir()
        (folder / "spec.yaml").write_text(ONE_LINE_SPEC.replace("{message}", message), encoding="utf-8")
        catalogs.append(load_catalog([folder], shipped=False))
    target = tmp_path / "checkout" / "verl" / "target.py"
    target.parent.mkdir(parents=True)
    target.write_text(TRAINER_BEFORE, encoding="utf-8")
    root = target.parents[1]
    assert [p.status for p in apply(root, catalogs[0]).points] == [Status.APPLIED]
    checked = check(root, catalogs[1])
    assert [(p.point_id, p.status) for p in checked.points if p.file == "verl/target.py"] == [
        ("t.banner", Status.STALE)
    ]
    # taken out as it is, by remove under the new catalog (not left behind as "missing")
    assert [p.status for p in remove(root, catalogs[1], write=False).points] == [Status.REMOVED]
    plain = apply(root, catalogs[1])
    assert [p.status for p in plain.points] == [Status.STALE] and not plain.written
    assert [p.status for p in apply(root, catalogs[1], update=True).points] == [Status.UPDATED]
    text = target.read_text(encoding="utf-8")
    assert text.count("log_progress(") == 1 and "start recording metrics" in text
    assert [p.status for p in check(root, catalogs[1]).points if p.file == "verl/target.py"] == [Status.PRESENT]
    assert [p.status for p in remove(root, catalogs[1]).points] == [Status.REMOVED]
    assert target.read_text(encoding="utf-8") == TRAINER_BEFORE


SCORE_BLOCK = "        if final_output.reward_score is None and enable_async_reward:\n"
FORK_LINE = "            scoring_started = True  # the fork's own line\n"


def test_a_fork_line_above_a_captured_body_stays_above_the_block_remove_rebuilds(
    verl_090: Path, tmp_path: Path, catalog: Catalog
) -> None:
    """extra.reward-score.carry's template starts with the body it captures from under the
    compute_score timer: a fork line the fork puts above that body, in the same block, is not
    the body's. check places the point at the body, and remove puts the line back above the
    timer (where it was written), not inside it."""
    checkout = copy_tree(verl_090, tmp_path / "checkout")
    pristine = (checkout / AGENT_LOOP).read_text(encoding="utf-8")
    assert pristine.count(SCORE_BLOCK) == 1
    extras = Selection(extras=frozenset({"reward-score-metric"}))
    assert apply(checkout, catalog, extras).written
    applied = (checkout / AGENT_LOOP).read_text(encoding="utf-8")
    (checkout / AGENT_LOOP).write_text(applied.replace(SCORE_BLOCK, SCORE_BLOCK + FORK_LINE), encoding="utf-8")
    edited = (checkout / AGENT_LOOP).read_text(encoding="utf-8").splitlines(keepends=True)
    body_line = edited.index(FORK_LINE) + 2  # the body's first statement is the next line (1-based)

    carry = next(p for p in check(checkout, catalog, extras).points if p.point_id == "extra.reward-score.carry")
    assert (carry.status, carry.line) == (Status.PRESENT, body_line), carry.message

    removed = remove(checkout, catalog)
    assert removed.error is None and not [f.error for f in removed.files if f.error]
    assert (checkout / AGENT_LOOP).read_text(encoding="utf-8") == pristine.replace(SCORE_BLOCK, SCORE_BLOCK + FORK_LINE)
