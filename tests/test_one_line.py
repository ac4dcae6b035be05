"""One line, then detail on request (issue 39, section 3).

A checkout never instrumented is one line and a count for check, verify and report; --quiet prints at
most five lines; usage lines, -h, comma lists and shell completion; anchor folders and spec keys that
are wrong say what is wrong once; the JSON outputs carry their schema's version.

Every case runs on the small checkout (four files of verl 0.9.0) or on a few lines of YAML; what each
output must hold is computed here from the catalog, the files or another output, not from the text
the renderer builds.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from xml.etree import ElementTree

import jsonschema
import pytest
import yaml
from typer.testing import CliRunner

from trace_instrument.cli import app
from trace_instrument.engine.apply import apply
from trace_instrument.engine.check import check
from trace_instrument.engine.report import report
from trace_instrument.engine.verify import verify
from trace_instrument.model import Selection
from trace_instrument.render import jsonout
from trace_instrument.spec import SpecError, load_catalog

SMALL_FILES = Path(__file__).parent / "fixtures" / "verl-0.9.0-small"
SHIPPED = Path(__file__).parents[1] / "anchors"
# the small checkout's points whose code apply puts in place (the third needs a file it does not have)
PLACED = ("env.runtime-env", "flow.v0.single-turn-sending", "flow.v0.single-turn-received")
PLACED_ONLY = Selection(only=frozenset(PLACED))


def _cli(*args: object):
    return CliRunner().invoke(app, [str(a) for a in args], prog_name="trace-instrument", catch_exceptions=False)


def _lines(output: str) -> list[str]:
    return output.rstrip("\n").splitlines()


@pytest.fixture
def small(tmp_path: Path) -> Path:
    """The small checkout, never instrumented."""
    return Path(shutil.copytree(SMALL_FILES, tmp_path / "checkout"))


@pytest.fixture
def applied_small(small: Path, catalog) -> Path:
    """The small checkout with its three placeable points and the runtime package in place."""
    result = apply(small, catalog, PLACED_ONLY)
    assert result.written and result.error is None
    return small


# -- a checkout never instrumented ----------------------------------------------------------------


def test_the_engine_says_a_checkout_was_never_instrumented(small: Path, catalog) -> None:
    assert check(small, catalog).instrumented is False
    assert verify(small, catalog).instrumented is False
    assert report(small, catalog).instrumented is False
    apply(small, catalog, PLACED_ONLY)
    assert check(small, catalog).instrumented is True
    assert verify(small, catalog).instrumented is True
    assert report(small, catalog).instrumented is True


@pytest.mark.parametrize("quiet", [[], ["--quiet"]])
def test_check_on_a_checkout_never_instrumented_is_one_line_and_a_count(small: Path, quiet: list[str]) -> None:
    shown = _cli("check", *quiet, small)
    lines = _lines(shown.output)
    assert shown.exit_code == 1
    assert len(lines) == 2, shown.output
    assert lines[0] == f"not instrumented: run `trace-instrument apply {small}`"
    # the count agrees with the list --verbose prints, one line per point that is not there
    listing = _lines(_cli("check", "--verbose", small).output)
    missing = sum(1 for line in listing if line.split()[:1] == ["missing"])
    assert missing == len(PLACED) and f"{missing} missing" in lines[1] and "not instrumented" in lines[1]
    every_id = {p.id for p in load_catalog().points if p.extra is None}  # the opt-in extras: not selected
    assert {line.split()[1] for line in listing if line.startswith("  ") and len(line.split()) > 2} >= every_id


def test_verify_and_report_on_a_checkout_never_instrumented_say_so_first(small: Path) -> None:
    shown = _cli("verify", small)
    lines = _lines(shown.output)
    assert shown.exit_code == 1 and len(lines) == 2, shown.output
    assert lines[0] == f"not instrumented: run `trace-instrument apply {small}`"
    full = _cli("verify", "--verbose", small)
    failed = sum(1 for line in _lines(full.output) if line.startswith("  FAIL "))
    assert full.exit_code == 1 and f"{failed} checks failed" in lines[1]
    shown = _cli("report", small)
    lines = [line for line in _lines(shown.output) if line]
    assert shown.exit_code == 1 and len(lines) <= 3, shown.output
    assert lines[1] == f"not instrumented: run `trace-instrument apply {small}`"
    assert len(_lines(_cli("report", "--verbose", small).output)) > 10


@pytest.mark.parametrize("verbose", [[], ["--verbose"]])
def test_check_for_ci_on_a_checkout_never_instrumented_is_one_entry_and_a_count(
    small: Path, verbose: list[str]
) -> None:
    body = json.loads(_cli("check", "--format", "json", small).output)
    missing = sum(1 for p in body["points"] if p["id"] != "runtime" and p["status"] == "missing")
    unclean = [p for p in body["points"] if p["status"] not in ("present", "not-applicable")]
    assert body["instrumented"] is False and missing == len(PLACED) and len(unclean) > missing
    said = f"not instrumented: run `trace-instrument apply {small}`"
    shown = _cli("check", "--format", "github", *verbose, small)
    errors = [line for line in _lines(shown.output) if line.startswith("::error")]
    assert shown.exit_code == 1
    suite = ElementTree.fromstring(_cli("check", "--format", "junit", *verbose, small).output)
    failed = suite.findall(".//failure")
    if verbose:  # every point that is not there, one entry each
        assert len(errors) == len(failed) == len(unclean) == int(suite.get("failures"))
        return
    assert len(errors) == 1 and said in errors[0] and f" {missing} missing" in errors[0], errors
    assert len(failed) == 1 and int(suite.get("failures")) == int(suite.get("tests")) == 1
    assert said in failed[0].get("message") and f"{missing} missing" in failed[0].get("message")


# -- --quiet: at most five lines --------------------------------------------------------------------


def _damage(applied: Path) -> None:
    """Runtime files deleted and one edited, the points importing the package broken, a point edited."""
    runtime = applied / "verl/utils/tracing"
    deleted = sorted(runtime.glob("*.py"))[:6]
    for path in deleted:
        path.unlink()  # runtime files missing, and the points that import the package broken
    edited = min(runtime.glob("*.py"))
    edited.write_text(edited.read_text(encoding="utf-8") + "# a hand edit\n", encoding="utf-8")  # drifted
    constants = applied / "verl/trainer/constants_ppo.py"
    text = constants.read_text(encoding="utf-8")
    constants.write_text(text.replace('("VERL_TRACE_DIR",)', '("VERL_TRACE_DIR", "X")'), encoding="utf-8")


def test_quiet_prints_at_most_five_lines_then_how_many_more(applied_small: Path) -> None:
    _damage(applied_small)
    body = json.loads(_cli("check", "--format", "json", applied_small).output)
    problems = [p for p in body["points"] if p["status"] not in ("present", "not-applicable")]
    # one line per kind of problem: a status and a message (every point a deleted import breaks, say)
    kinds = {(p["status"], p["message"].split("\n")[0]) for p in problems}
    assert len(kinds) >= 5 and {"drifted", "missing", "broken"} <= {status for status, _ in kinds}
    shown = _cli("check", "--quiet", applied_small)
    lines = _lines(shown.output)
    assert shown.exit_code == 1 and len(lines) == 5, shown.output
    assert lines[3].strip() == f"and {len(kinds) - 3} more (--verbose)"
    assert lines[4].startswith("check: ") and "drift" in lines[4]
    everything = _lines(_cli("check", "--quiet", "--verbose", applied_small).output)
    assert len(everything) > 5


def test_verify_and_report_quiet_print_at_most_five_lines_then_how_many_more(applied_small: Path) -> None:
    _damage(applied_small)
    body = json.loads(_cli("verify", "--format", "json", applied_small).output)
    failed = [f for f in body["findings"] if not f["ok"]]
    kinds = {(f["check"], f["message"].split("\n")[0]) for f in failed}  # one line per check and message
    assert len(kinds) > 4
    shown = _cli("verify", "--quiet", applied_small)
    lines = _lines(shown.output)
    assert shown.exit_code == 1 and len(lines) == 5, shown.output
    assert all(line.startswith("  FAIL ") for line in lines[:3])
    assert lines[3].strip() == f"and {len(kinds) - 3} more (--verbose)"
    passed = len(body["findings"]) - len(failed)
    assert lines[4] == f"verify: {passed} checks passed, {len(failed)} failed — not ok"
    assert len(_lines(_cli("verify", "--quiet", "--verbose", applied_small).output)) == len(kinds) + 1
    rep = json.loads(_cli("report", "--format", "json", applied_small).output)
    runtime = [(f["status"], f["detail"]) for f in rep["runtime"] if f["status"] != "present"]
    problems = {(p["status"], p["message"].split("\n")[0]) for p in rep["not_in_place"]} | set(runtime)
    shown = _cli("report", "--quiet", applied_small)
    lines = _lines(shown.output)
    assert shown.exit_code == 1 and len(lines) == 5, shown.output
    more = len(problems) + len(kinds) - 3
    assert more > 0 and lines[3].strip() == f"and {more} more (--verbose)"
    assert lines[4].startswith("report: ") and lines[4].endswith("verify not ok — not ok")
    clean = _cli("report", "--quiet", _applied_copy(applied_small))
    assert clean.exit_code == 1 and len(_lines(clean.output)) <= 5


def _applied_copy(damaged: Path) -> Path:
    """The small checkout again, applied afresh next to `damaged`."""
    fresh = Path(shutil.copytree(SMALL_FILES, damaged.parent / "fresh"))
    apply(fresh, load_catalog(), PLACED_ONLY)
    return fresh


def test_quiet_says_a_deleted_import_once_for_every_point_it_breaks(applied_small: Path) -> None:
    loop = applied_small / "verl/experimental/agent_loop/single_turn_agent_loop.py"
    kept = [line for line in loop.read_text(encoding="utf-8").splitlines(True) if "verl.utils.tracing" not in line]
    loop.write_text("".join(kept), encoding="utf-8")
    body = json.loads(_cli("check", "--format", "json", applied_small).output)
    broken = [p for p in body["points"] if p["status"] == "broken"]
    assert len(broken) == 2 and len({p["message"] for p in broken}) == 1
    lines = _lines(_cli("check", "--quiet", applied_small).output)
    said = [line for line in lines if line.split()[:1] == ["broken"]]
    assert len(said) == 1 and f"{len(broken)} points: {broken[0]['id']}" in said[0], lines


# -- usage, -h, repeated flags, completion ----------------------------------------------------------


def test_usage_lines_name_the_arguments_and_h_is_help() -> None:
    for command, argument in (
        ("check", "PATH"),
        ("apply", "PATH"),
        ("analyze", "TRACE_DIR..."),
        ("export", "TRACE_DIR..."),
    ):
        shown = _cli(command, "-h")
        usage = next(line for line in _lines(shown.output) if "Usage:" in line)
        assert shown.exit_code == 0
        assert f"trace-instrument {command} [OPTIONS] {argument}" in usage and "{" not in usage, usage
    assert "Usage: trace-instrument [OPTIONS] COMMAND" in _cli("-h").output
    help_text = " ".join(_cli("check", "--help").output.replace("│", " ").split())  # the panel's borders out
    assert help_text.count("a comma list works too") == 4  # --facility, --only, --skip, --extras


def test_a_comma_list_is_the_same_as_the_flag_repeated(small: Path) -> None:
    one, two = PLACED[1], PLACED[2]

    def points(*flags: str) -> list[str]:
        shown = _cli("check", "--format", "json", *flags, small)
        assert shown.exit_code == 1, shown.output
        return [p["id"] for p in json.loads(shown.output)["points"] if p["id"] != "runtime"]

    assert points("--only", f"{one},{two}") == points("--only", one, "--only", two) == [one, two]
    assert points("--facility", "env,progress") == points("--facility", "env", "--facility", "progress")
    unknown = _cli("check", "--only", f"{one},flow.v0.single-turn-sendin", small)
    assert unknown.exit_code == 2 and f"did you mean '{one}'" in unknown.output


def _complete(words: str) -> list[str]:
    """What bash completion offers for the last word of `words` (as the shell asks Click)."""
    word = len(words.split()) - (0 if words.endswith(" ") else 1)  # the index of the word completed
    env = {"_TRACE_INSTRUMENT_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(word)}
    outcome = CliRunner().invoke(app, [], prog_name="trace-instrument", env=env)
    assert outcome.exit_code == 0, outcome.output
    return outcome.output.split()


def test_the_shell_completes_facilities_extras_and_point_ids(catalog) -> None:
    assert _complete("trace-instrument check --facility pro") == ["progress"]
    extras = sorted({p.extra for p in catalog.points if p.extra})
    assert sorted(_complete("trace-instrument apply --extras ")) == extras
    ids = sorted(p.id for p in catalog.points if p.id.startswith("flow.v0.train-"))
    assert len(ids) > 1 and sorted(_complete("trace-instrument check --only flow.v0.train-")) == ids
    assert sorted(_complete("trace-instrument check --skip env.runtime-env,flow.v0.train-")) == sorted(
        f"env.runtime-env,{i}" for i in ids
    )


# -- anchor folders, spec keys, the checkout's path ------------------------------------------------


def test_a_spec_key_mistyped_gets_a_did_you_mean(tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    spec = "file: verl/x.py\npoints:\n  - id: mine.p\n    facility: progress\n    title: t\n    scope: f\n"
    (folder / "mine.yaml").write_text(spec + "    aftr: |\n      x = 1\n    code: |\n      log_progress('x')\n")
    with pytest.raises(SpecError) as refused:
        load_catalog([folder], shipped=False)
    assert any("unknown key 'aftr'; did you mean 'after'?" in str(p) for p in refused.value.problems)


def test_an_anchors_folder_that_is_missing_or_a_file_says_so(tmp_path: Path) -> None:
    missing = _cli("points", "--anchors", tmp_path / "nosuchdir")
    assert missing.exit_code == 2 and "no such directory" in missing.output and ":0" not in missing.output
    a_file = tmp_path / "specs.yaml"
    a_file.write_text("points: []\n")
    given = _cli("points", "--anchors", a_file)
    assert given.exit_code == 2 and "is a file, not a directory" in given.output


def test_a_file_given_for_the_checkout_says_it_is_a_file(tmp_path: Path) -> None:
    a_file = tmp_path / "ray_trainer.py"
    a_file.write_text("x = 1\n")
    for command in ("check", "apply", "verify", "remove"):
        shown = _cli(command, a_file)
        assert shown.exit_code == 2 and "is a file, not a directory" in shown.output, shown.output
    assert "no such directory" in _cli("check", tmp_path / "nothing").output


def test_a_copy_of_the_shipped_anchors_is_one_problem_with_the_hint(tmp_path: Path) -> None:
    copy = Path(shutil.copytree(SHIPPED, tmp_path / "my-anchors"))
    shipped_ids = [
        point["id"]
        for path in sorted(SHIPPED.glob("*.yaml"))
        if path.name != "_catalog.yaml"
        for point in (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("points", [])
    ]
    shown = _cli("points", "--anchors", copy)
    lines = _lines(shown.output)
    assert shown.exit_code == 2 and len(lines) == 2, shown.output
    assert f"{len(shipped_ids)} ids the tool ships are declared again" in lines[1]
    assert "overrides: ID" in lines[1]


# -- JSON: the schema's version ---------------------------------------------------------------------


def test_check_verify_and_apply_json_carry_the_schema_version(small: Path) -> None:
    for args, shape in (
        (("check",), "check"),
        (("verify",), "verify"),
        (("apply", "--dry-run"), "run"),
        (("remove", "--dry-run"), "run"),
    ):
        body = json.loads(_cli(*args, "--format", "json", small).output)
        assert body["schema"] == 1
        jsonschema.validate(body, jsonout.schema(shape), cls=jsonschema.Draft202012Validator)
    assert json.loads(_cli("check", "--format", "json", small).output)["instrumented"] is False


def test_a_checkout_never_instrumented_still_lists_what_apply_could_not_place(tmp_path: Path) -> None:
    """The one line, the point whose anchors are lost (fixture apply/two-edits-both-fail), the count."""
    from rich.console import Console

    from trace_instrument.render.text import check_lines

    case = Path(__file__).parent / "fixtures" / "apply" / "two-edits-both-fail"
    (tmp_path / "spec").mkdir()
    shutil.copy(case / "spec.yaml", tmp_path / "spec" / "spec.yaml")
    root = tmp_path / "checkout"
    (root / "verl").mkdir(parents=True)
    shutil.copy(case / "before.py", root / "verl" / "target.py")
    result = check(root, load_catalog([tmp_path / "spec"], shipped=False))
    assert result.instrumented is False
    console = Console(width=300, no_color=True, record=True)
    for line in check_lines(result, quiet=False, verdict="drift", target="checkout"):
        console.print(line)
    text = console.export_text().splitlines()
    assert len(text) == 3, text
    assert text[0] == "not instrumented: run `trace-instrument apply checkout`"
    assert text[1].split()[:2] == ["anchor-lost", "t.grow"]
    assert text[2].startswith("check: 1 anchor-lost")


# -- a read-only tree -------------------------------------------------------------------------------


def test_a_read_only_tree_is_one_line_and_keep_going_installs_nothing(small: Path, catalog) -> None:
    edited = sorted({p.file for p in catalog.points if p.id in PLACED})
    before = {path: path.read_bytes() for path in small.rglob("*") if path.is_file()}
    for path in before:
        path.chmod(0o444)
    stopped = _cli("apply", "--only", ",".join(PLACED), small)
    lines = _lines(stopped.output)
    assert stopped.exit_code == 2 and len(lines) == 2, stopped.output
    assert lines[0].startswith(f"read-only: {len(edited)} files (every file to edit), {len(PLACED)} points")
    # the whole catalog (the small checkout's other points have no file here): the cause said once
    going = _cli("apply", "--keep-going", small)
    said = [line for line in _lines(going.output) if "read-only" in line]
    assert going.exit_code == 2 and len(said) == 1 and said[0].startswith(f"read-only: {len(edited)} files"), said
    assert not any(line.split()[:1] == ["skipped"] for line in _lines(going.output))
    after = {path: path.read_bytes() for path in small.rglob("*") if path.is_file()}
    assert after == before, "no runtime package, no manifest: no point could be placed"
    assert not (small / "verl/utils/tracing").exists()


def test_quiet_lists_at_most_five_lines_of_spec_problems_too(tmp_path: Path, small: Path) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    for number in range(7):  # seven files, each with a key of its own that no spec has
        (folder / f"spec{number}.yaml").write_text(f"file: verl/x.py\nwrong{number}: 1\npoints: []\n")
    full = _cli("check", "--anchors", folder, small)
    problems = [line for line in _lines(full.output) if line.startswith("  ")]
    assert full.exit_code == 2 and len(problems) >= 7
    quiet = _cli("check", "--quiet", "--anchors", folder, small)
    lines = _lines(quiet.output)
    assert quiet.exit_code == 2 and len(lines) == 5, quiet.output
    assert lines[1:4] == problems[:3] and lines[4].strip() == f"and {len(problems) - 3} more (--verbose)"


@pytest.mark.parametrize("keep_going", [[], ["--keep-going"]])
def test_a_read_only_folder_for_the_runtime_package_is_one_line_and_nothing_written(
    small: Path, keep_going: list[str]
) -> None:
    """The files are writable, the folder the runtime package goes in is not (root may write there
    anyway: its read-only bit is honoured, as a file's is)."""
    before = {path: path.read_bytes() for path in small.rglob("*") if path.is_file()}
    utils = small / "verl/utils"
    utils.chmod(0o555)
    try:
        stopped = _cli("apply", *keep_going, small)
        after = {path: path.read_bytes() for path in small.rglob("*") if path.is_file()}
    finally:
        utils.chmod(0o755)
    said = (
        "error: nothing written: verl/utils/: read-only, and verl/utils/tracing/ goes in it; "
        f"make it writable (chmod u+w {utils.resolve()})"
    )
    assert stopped.exit_code == 2 and _lines(stopped.output) == [said], stopped.output
    assert after == before
