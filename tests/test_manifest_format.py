"""The manifest a reviewer reads (format 2), and the ones forks committed before it (format 1).

tests/fixtures/manifests/ holds format-1 manifests that trace-instrument 0.2.0 (main at 65e4b75)
wrote on verl 0.9.0 and on the small 0.9.0 tree of tests/fixtures: read as they are, the tree
they describe is checked, verified and removed byte for byte, and the next apply writes them
again in format 2. Sizes, lines and digests are measured here with json, difflib and hashlib,
never taken from the tool.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import shutil
from pathlib import Path

import pytest
from support import copy_tree, tree_bytes
from test_exact_restore import AGENT_LOOP, TRAILING, _fork

from trace_instrument.engine.apply import apply
from trace_instrument.engine.check import check
from trace_instrument.engine.remove import remove
from trace_instrument.engine.verify import verify
from trace_instrument.model import Catalog, Check, Selection, Status
from trace_instrument.render import exits
from trace_instrument.spec.shipped import SHIPPED_TEMPLATES

MANIFEST = ".trace-instrument.json"
FIXTURES = Path(__file__).parent / "fixtures"
FORMAT_1_090 = FIXTURES / "manifests" / "format-1-verl-0.9.0.json"
FORMAT_1_SMALL = FIXTURES / "manifests" / "format-1-verl-0.9.0-small.json"
FORMAT_1_FORKED = FIXTURES / "manifests" / "format-1-verl-0.9.0-forked.json"
SMALL_TREE = FIXTURES / "verl-0.9.0-small"
RAY_TRAINER = "verl/trainer/ppo/ray_trainer.py"
LONGEST = 400  # characters a manifest line may have (but a code line that is longer itself)


def _sha16(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _small(tmp_path: Path, name: str = "checkout") -> Path:
    return copy_tree(SMALL_TREE, tmp_path / name)


# -- format 2 as apply writes it -----------------------------------------------------------------


@pytest.mark.e2e
def test_the_manifest_of_verl_090_is_at_most_a_third_of_format_1(applied_090: Path):
    written = (applied_090 / MANIFEST).read_bytes()
    before = FORMAT_1_090.read_bytes()
    assert set(json.loads(written)["points"]) == set(json.loads(before)["points"]), "the same points recorded"
    assert 3 * len(written) <= len(before), f"{len(written)} bytes against format 1's {len(before)}"
    assert max(map(len, before.decode().splitlines())) > 5000, "format 1 had lines of several KB"
    assert max(map(len, written.decode().splitlines())) <= LONGEST


def test_every_line_is_short_and_keys_are_sorted(tmp_path: Path, catalog: Catalog):
    root = _small(tmp_path)
    assert apply(root, catalog).written
    text = (root / MANIFEST).read_text(encoding="utf-8")
    assert max(map(len, text.splitlines())) <= LONGEST
    body = json.loads(text)
    assert body["format"] == 2
    for section in ("points", "baselines", "runtime"):
        assert list(body[section]) == sorted(body[section]), section
    for file, record in body["baselines"].items():
        assert len(record["digest"]) == 16 and all(" " in line for line in record["code"]), file


def test_a_point_names_its_templates_by_digest_and_shipped_texts_stay_out(tmp_path: Path, catalog: Catalog):
    root = _small(tmp_path)
    apply(root, catalog)
    body = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
    shipped = json.loads(SHIPPED_TEMPLATES.read_text(encoding="utf-8"))["templates"]
    for point_id, (file, *templates) in body["points"].items():
        texts = [e.template.text for e in catalog.point(point_id).edits]
        assert file == catalog.point(point_id).file
        assert templates == [_sha16(t) for t in texts]
        assert all(shipped[key] == text.split("\n") for key, text in zip(templates, texts))
    assert body["templates"] == {}, "every text is one a release shipped"


def test_the_shipped_templates_hold_every_template_of_the_catalog(catalog: Catalog):
    """Run `python tools/shipped_templates.py` after changing a template: a manifest an earlier
    release wrote names its templates by digest, and this file gives their texts back."""
    shipped = json.loads(SHIPPED_TEMPLATES.read_text(encoding="utf-8"))["templates"]
    for key, lines in shipped.items():
        assert key == _sha16("\n".join(lines)), key
    missing = [p.id for p in catalog.points for e in p.edits if _sha16(e.template.text) not in shipped]
    assert not missing, f"templates not in {SHIPPED_TEMPLATES.name}: {missing}; run python tools/shipped_templates.py"


@pytest.mark.e2e
def test_a_reapply_after_a_one_line_business_edit_changes_a_few_short_lines(instrumented_090: Path, catalog):
    manifest = instrumented_090 / MANIFEST
    before = manifest.read_text(encoding="utf-8")
    path = instrumented_090 / RAY_TRAINER
    text = path.read_text(encoding="utf-8")
    old, new = "    batch_size = data.batch.batch_size[0]\n", "    batch_size = len(data)\n"
    assert text.count(old) == 1
    path.write_text(text.replace(old, new), encoding="utf-8")
    assert not verify(instrumented_090, catalog).ok, "the edit is business code the last apply did not see"
    assert apply(instrumented_090, catalog).written
    after = manifest.read_text(encoding="utf-8")
    changed = [
        line
        for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    # the file's digest and the line of the function the edit is in, before and after
    assert 2 <= len(changed) <= 6, changed
    assert sum(map(len, changed)) < 1500 and all(len(line) <= LONGEST for line in changed)
    assert any('"digest"' in line for line in changed)
    assert verify(instrumented_090, catalog).ok


@pytest.mark.e2e
def test_verify_places_a_business_edit_by_its_line(instrumented_090: Path, catalog):
    path = instrumented_090 / RAY_TRAINER
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    number = next(i for i, line in enumerate(lines, 1) if line == "    batch_size = data.batch.batch_size[0]\n")
    lines[number - 1] = "    batch_size = len(data)\n"
    path.write_text("".join(lines), encoding="utf-8")
    result = verify(instrumented_090, catalog)
    failed = [f for f in result.findings if not f.ok and f.check is Check.ZERO_INTRUSION]
    assert [(f.subject, f.line) for f in failed] == [(RAY_TRAINER, number)], failed


# -- format 1, as forks committed it ----------------------------------------------------------------


def test_a_format_1_manifest_is_read_and_apply_writes_it_again_in_format_2(tmp_path: Path, catalog: Catalog):
    fresh = _small(tmp_path, "fresh")
    assert apply(fresh, catalog).written
    root = _small(tmp_path, "old")
    apply(root, catalog)
    assert tree_bytes(root) == tree_bytes(fresh)
    shutil.copy(FORMAT_1_SMALL, root / MANIFEST)
    checked = check(root, catalog)
    statuses = {p.point_id: p.status for p in checked.points}
    assert statuses == {p.point_id: p.status for p in check(fresh, catalog).points}
    assert {statuses[p] for p in json.loads(FORMAT_1_SMALL.read_text(encoding="utf-8"))["points"]} == {Status.PRESENT}
    proof = verify(root, catalog).findings
    assert proof == verify(fresh, catalog).findings
    assert [f.ok for f in proof if f.check is Check.ZERO_INTRUSION] == [True, True], "both files' business code"
    again = apply(root, catalog)
    assert again.written and tree_bytes(root) == tree_bytes(fresh), "the manifest alone is written"
    assert (root / MANIFEST).read_bytes() == (fresh / MANIFEST).read_bytes()
    assert not apply(root, catalog).written, "format 2 is written once"


def test_remove_with_a_format_1_manifest_gives_the_bytes_back(tmp_path: Path, catalog: Catalog):
    root = _small(tmp_path)
    apply(root, catalog)
    shutil.copy(FORMAT_1_SMALL, root / MANIFEST)
    result = remove(root, catalog)
    assert result.error is None
    assert tree_bytes(root) == tree_bytes(SMALL_TREE) and not (root / MANIFEST).exists()


@pytest.mark.e2e
def test_verl_090_with_its_format_1_manifest_checks_verifies_and_removes_byte_exact(
    instrumented_090: Path, verl_090: Path, catalog: Catalog
):
    shutil.copy(FORMAT_1_090, instrumented_090 / MANIFEST)
    old = json.loads(FORMAT_1_090.read_text(encoding="utf-8"))
    assert any(len(r["digest"]) == 24 for records in old["replaced"].values() for r in records.values())
    assert exits.check_exit(check(instrumented_090, catalog)) == exits.OK
    assert verify(instrumented_090, catalog).ok
    result = remove(instrumented_090, catalog)
    assert result.error is None
    assert tree_bytes(instrumented_090) == tree_bytes(verl_090)


@pytest.mark.e2e
def test_verl_090_format_1_is_rewritten_as_a_fresh_apply_writes_it(
    instrumented_090: Path, applied_090: Path, catalog: Catalog
):
    shutil.copy(FORMAT_1_090, instrumented_090 / MANIFEST)
    assert apply(instrumented_090, catalog).written
    assert tree_bytes(instrumented_090) == tree_bytes(applied_090)
    assert (instrumented_090 / MANIFEST).read_bytes() == (applied_090 / MANIFEST).read_bytes()


@pytest.mark.e2e
def test_format_1_originals_put_a_forks_comments_back_byte_for_byte(verl_090: Path, tmp_path: Path, catalog):
    """The regions a format-1 manifest recorded go back as recorded (its 24-digit digests still
    match): the fork's comments on rewritten lines survive, which a rebuild from the anchor loses.
    The fixture is what 0.2.0 wrote for tests/test_exact_restore.py's fork."""
    checkout = copy_tree(verl_090, tmp_path / "checkout")
    _fork(checkout)
    forked = tree_bytes(checkout)
    assert apply(checkout, catalog, Selection(extras=frozenset({"reward-score-metric"}))).error is None
    shutil.copy(FORMAT_1_FORKED, checkout / MANIFEST)
    removed = remove(checkout, catalog)
    assert removed.error is None
    after = tree_bytes(checkout)
    assert [name for name in forked if after.get(name) != forked[name]] == []
    assert all(comment in after[AGENT_LOOP].decode() for _n, _t, comment in TRAILING)


# -- a manifest git merges --------------------------------------------------------------------------


@pytest.mark.slow
def test_two_applies_that_changed_different_records_merge_cleanly_into_the_merged_trees(
    tmp_path: Path, catalog: Catalog
):
    """One branch applies sample_flow (single_turn_agent_loop.py), the other edits business code in
    constants_ppo.py and applies again: one record a line, git merges the two manifests without
    a conflict, and the result is the manifest of the merged tree (the next apply writes nothing)."""
    from test_manifest_conflicts import git

    root = _small(tmp_path)
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.name", "Fork Maintainer")
    git(root, "config", "user.email", "fork@example.invalid")
    assert apply(root, catalog, Selection(facilities=frozenset({"env"}))).written
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "verl 0.9.0 small, env applied")
    git(root, "checkout", "-q", "-b", "flow")
    assert apply(root, catalog, Selection(facilities=frozenset({"sample_flow"}))).written
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "apply --facility sample_flow")
    git(root, "checkout", "-q", "-b", "edit", "main")
    constants = root / "verl/trainer/constants_ppo.py"
    constants.write_text(constants.read_text(encoding="utf-8") + "\nFORK_SETTING = 1\n", encoding="utf-8")
    assert apply(root, catalog, Selection(facilities=frozenset({"env"}))).written, "the baseline is recorded again"
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "fork setting")
    changed = git(root, "diff", "--numstat", "main", "--", MANIFEST).split()
    # the file's digest, a `<module>` line for the statement after its last def, and the comma
    # the line before it takes (JSON)
    assert changed[:2] == ["3", "2"], git(root, "diff", "main", "--", MANIFEST)
    git(root, "checkout", "-q", "flow")
    git(root, "merge", "-q", "--no-edit", "edit")
    both = Selection(facilities=frozenset({"env", "sample_flow"}))
    checked = check(root, catalog, both)
    placed = {p.point_id for p in checked.points if p.status is Status.PRESENT}
    assert {"env.runtime-env", "flow.v0.single-turn-sending", "flow.v0.single-turn-received"} <= placed
    assert all(f.ok for f in verify(root, catalog, both).findings if f.check is Check.ZERO_INTRUSION)
    assert not apply(root, catalog, both).written


def test_a_business_change_the_marks_cannot_place_still_fails_verify(tmp_path: Path, catalog: Catalog):
    """The marks only place a change; the digest proves there is none. A record whose marks all
    match but whose digest does not (a changed statement whose mark stayed the same) fails."""
    root = _small(tmp_path)
    apply(root, catalog)
    proven = [f for f in verify(root, catalog).findings if f.check is Check.ZERO_INTRUSION]
    assert len(proven) == 2 and all(f.ok for f in proven)
    path = root / MANIFEST
    body = json.loads(path.read_text(encoding="utf-8"))
    file = "verl/trainer/constants_ppo.py"
    body["baselines"][file]["digest"] = "0" * 16
    path.write_text(json.dumps(body, indent=1), encoding="utf-8")
    failed = [f for f in verify(root, catalog).findings if f.check is Check.ZERO_INTRUSION and not f.ok]
    assert [(f.subject, f.line) for f in failed] == [(file, 0)]
    assert "cannot place" in failed[0].message and "--baseline" in failed[0].message
