"""A manifest no run can trust stops every command: merge-conflict markers, not JSON, not a manifest.

The conflicts come from real git merges on real verl 0.9.0: two branches of a fork each run apply
(one sample_flow, the other the other facilities), then one is merged into the other. Working from
such a manifest as if there were none would drop its records (templates, added imports, runtime
hashes, exact originals, business baselines): check, apply, verify, remove and report refuse, name
the file and the line, exit 2 and write nothing. The lines asserted are found in the file by the
test itself.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import jsonschema
import pytest
from support import copy_tree, instrument, tree_bytes
from typer.testing import CliRunner

from trace_instrument.cli import app
from trace_instrument.engine.apply import apply
from trace_instrument.engine.check import check
from trace_instrument.engine.remove import remove
from trace_instrument.engine.report import report
from trace_instrument.engine.verify import verify
from trace_instrument.model import RunError, RunErrorKind, Selection
from trace_instrument.render import exits, jsonout

MANIFEST = ".trace-instrument.json"
LOCK = ".trace-instrument.lock"
MARKERS = ("<<<<<<<", "|||||||", "=======", ">>>>>>>")
_GIT_ENV = {
    **os.environ,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,  # the user's settings (conflict style, rerere, ...) stay out of it
}


def git(cwd: Path, *args: str, expect: tuple[int, ...] = (0,)) -> str:
    done = subprocess.run(
        ["git", *args], check=False, cwd=cwd, env=_GIT_ENV, capture_output=True, text=True, timeout=300
    )
    assert done.returncode in expect, f"git {' '.join(args)}: {done.returncode}\n{done.stdout}{done.stderr}"
    return done.stdout


def _branch_applies(root: Path, catalog, branch: str, facilities: tuple[str, ...]) -> None:
    git(root, "checkout", "-q", "-b", branch, "main")
    result = apply(root, catalog, Selection(facilities=frozenset(facilities)))
    assert result.error is None and result.written
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", f"trace-instrument apply --facility {' --facility '.join(facilities)}")


def _merged(root: Path, catalog, resolved: Path, style: str = "merge") -> Path:
    """A fork whose two branches each ran apply (sample_flow on one, the other facilities on the
    other), merged: its code files resolved as one apply of everything makes them (`resolved`), its
    manifest still holding both sides. Every point is in place: only the manifest is wrong."""
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.name", "Fork Maintainer")
    git(root, "config", "user.email", "fork@example.invalid")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "verl 0.9.0")
    _branch_applies(root, catalog, "others", ("progress", "trajectory", "env", "runtime"))
    _branch_applies(root, catalog, "flow", ("sample_flow",))
    git(root, "-c", f"merge.conflictStyle={style}", "merge", "-q", "others", expect=(1,))
    conflicted = git(root, "diff", "--name-only", "--diff-filter=U").split()
    assert MANIFEST in conflicted and len(conflicted) > 1
    for path in conflicted:
        if path != MANIFEST:
            (root / path).write_bytes((resolved / path).read_bytes())
            git(root, "add", path)
    return root


@pytest.fixture(scope="module")
def resolved(verl_090: Path, tmp_path_factory: pytest.TempPathFactory, catalog) -> Path:
    """verl 0.9.0 with every point applied in one run."""
    root = copy_tree(verl_090, tmp_path_factory.mktemp("resolved"))
    assert apply(root, catalog).written
    return root


@pytest.fixture
def merged(verl_090: Path, tmp_path: Path, catalog, resolved: Path) -> Path:
    return _merged(copy_tree(verl_090, tmp_path / "fork"), catalog, resolved)


def _first_marker(path: Path) -> tuple[int, str]:
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        for marker in MARKERS:
            if line.startswith(marker):
                return number, marker
    raise AssertionError("no conflict marker")


def _everything(root: Path) -> dict[str, bytes]:
    """Every file of the checkout but git's own (the manifest and any lock file included)."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(root).parts
    }


OPERATIONS: dict[str, Callable[..., Any]] = {
    "check": check,
    "apply": apply,
    "apply --dry-run": lambda root, catalog: apply(root, catalog, write=False),
    "apply --update": lambda root, catalog: apply(root, catalog, update=True),
    "verify": verify,
    "remove": remove,
    "remove --force": lambda root, catalog: remove(root, catalog, force=True),
    "report": report,
}
EXIT = {"check": exits.check_exit, "apply": exits.apply_exit, "remove": exits.remove_exit}


def _exit(name: str, result: Any) -> int:
    command = name.split()[0]
    if command == "verify":
        return exits.verify_exit(result)
    if command == "report":
        return exits.report_exit(result)
    return EXIT[command](result)


def test_the_merged_tree_is_clean_but_for_its_manifest(merged: Path, catalog):
    """The case the gate must not pass (the fixture's own check): every point is in place, and with
    either side of the conflict as its manifest the tree is clean; it is the manifest that is wrong."""
    lines = (merged / MANIFEST).read_text(encoding="utf-8").splitlines(keepends=True)
    for which in ("ours", "theirs"):
        side = "".join(_side(lines, which))
        assert json.loads(side)["points"], which
        (merged / MANIFEST).write_text(side, encoding="utf-8")
        assert exits.check_exit(check(merged, catalog)) == exits.OK, which


def _side(lines: list[str], which: str) -> list[str]:
    """One side of a two-way conflict (the lines outside the conflicts, and ours or theirs)."""
    kept, side = [], ""
    for line in lines:
        if line.startswith("<<<<<<<"):
            side = "ours"
        elif line.startswith("=======") and side:
            side = "theirs"
        elif line.startswith(">>>>>>>"):
            side = ""
        elif not side or side == which:
            kept.append(line)
    return kept


@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_every_command_refuses_a_manifest_with_conflict_markers(merged: Path, catalog, name: str):
    line, _marker = _first_marker(merged / MANIFEST)
    before = _everything(merged)
    result = OPERATIONS[name](merged, catalog)
    error = result.error
    assert isinstance(error, RunError)
    assert (error.kind, error.path, error.line) == (RunErrorKind.MANIFEST_CONFLICT, MANIFEST, line)
    assert error.message.startswith(f"{MANIFEST}:{line}: ")
    assert f"git checkout --ours {MANIFEST}" in error.message and "trace-instrument apply" in error.message
    assert _exit(name, result) == exits.ERROR
    assert _everything(merged) == before, "nothing written, no lock left behind"


def test_a_diff3_conflict_and_a_partly_resolved_one_are_refused_at_the_first_marker_left(
    verl_090: Path, tmp_path: Path, catalog, resolved: Path
):
    root = _merged(copy_tree(verl_090, tmp_path / "fork"), catalog, resolved, style="diff3")
    manifest = root / MANIFEST
    assert _first_marker(manifest)[1] == "<<<<<<<"
    lines = manifest.read_text(encoding="utf-8").splitlines(keepends=True)
    # someone deleted the first marker by hand and left the rest: the base's side opens next
    manifest.write_text("".join(line for line in lines if not line.startswith("<<<<<<<")), encoding="utf-8")
    line, marker = _first_marker(manifest)
    assert marker == "|||||||"
    error = check(root, catalog).error
    assert error is not None and (error.kind, error.line) == (RunErrorKind.MANIFEST_CONFLICT, line)


def _cli(*args: object) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False, env={"NO_COLOR": "1"})


def test_every_format_names_the_file_and_line(merged: Path):
    line, _marker = _first_marker(merged / MANIFEST)
    text = _cli("check", merged)
    assert text.exit_code == exits.ERROR
    assert f"{MANIFEST}:{line}:" in text.output
    body = json.loads(_cli("check", "--format", "json", merged).output)
    jsonschema.validate(body, jsonout.schema("check"), cls=jsonschema.Draft202012Validator)
    assert body["error"]["kind"] == "manifest-conflict" and body["exit_code"] == exits.ERROR
    assert (body["error"]["path"], body["error"]["line"]) == (MANIFEST, line)
    for command, schema in (("apply", "run"), ("remove", "run"), ("verify", "verify"), ("report", "report")):
        other = json.loads(_cli(command, "--format", "json", merged).output)
        jsonschema.validate(other, jsonout.schema(schema), cls=jsonschema.Draft202012Validator)
        assert other["error"]["kind"] == "manifest-conflict", command
    annotation = _cli("check", "--format", "github", merged).output
    assert annotation.startswith(f"::error file={MANIFEST},line={line},title=trace-instrument::")
    suite = ElementTree.fromstring(_cli("check", "--format", "junit", merged).output)
    case = suite.find("testcase")
    assert case is not None and (case.get("file"), case.get("line")) == (MANIFEST, str(line))


@pytest.mark.slow
def test_the_advised_resolution_gives_a_clean_checkout_and_a_byte_exact_remove(merged: Path, verl_090: Path, catalog):
    """What the message says: keep one side, apply, commit. Then all is clean, and remove gives the
    release back byte for byte."""
    git(merged, "checkout", "--ours", "--", MANIFEST)
    result = apply(merged, catalog)
    assert exits.apply_exit(result) == exits.OK, [(p.point_id, p.status.value) for p in result.points]
    assert exits.check_exit(check(merged, catalog)) == exits.OK
    assert verify(merged, catalog).ok
    git(merged, "add", "-A")
    git(merged, "commit", "-q", "-m", "merge the other facilities")
    assert exits.remove_exit(remove(merged, catalog)) == exits.OK
    assert tree_bytes(merged) == tree_bytes(verl_090)
    assert not (merged / MANIFEST).exists()


# -- a manifest that is not one -------------------------------------------------------------------


@pytest.fixture
def instrumented(checkout_090: Path, applied_090_run) -> Path:
    """checkout_090 after one apply: the worker's shared applied tree copied in its place."""
    applied, result = applied_090_run
    assert exits.apply_exit(result) == exits.OK
    return instrument(checkout_090, applied)


def _insert_line(text: str, after: int, line: str) -> str:
    lines = text.splitlines(keepends=True)
    return "".join([*lines[:after], line + "\n", *lines[after:]])


def test_a_manifest_that_is_not_json_is_refused_at_the_line_json_fails(instrumented: Path, catalog):
    path = instrumented / MANIFEST
    path.write_text(_insert_line(path.read_text(encoding="utf-8"), 3, " oops"), encoding="utf-8")
    before = _everything(instrumented)
    for operation in (check, apply, verify, remove):
        error = operation(instrumented, catalog).error
        assert error is not None, operation
        assert (error.kind, error.path, error.line) == (RunErrorKind.MANIFEST_INVALID, MANIFEST, 4)
        assert error.message.startswith(f"{MANIFEST}:4: not valid JSON")
        assert f"git checkout HEAD -- {MANIFEST}" in error.message
    assert _everything(instrumented) == before


def test_a_manifest_that_is_not_utf8_is_refused_at_its_line(instrumented: Path, catalog):
    path = instrumented / MANIFEST
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join([*lines[:5], b' "\xff": 1,\n', *lines[5:]]))
    error = check(instrumented, catalog).error
    assert error is not None and (error.kind, error.line) == (RunErrorKind.MANIFEST_INVALID, 6)


FORMAT_1 = Path(__file__).parent / "fixtures" / "manifests" / "format-1-verl-0.9.0-small.json"


def _reshaped(body: dict[str, Any], case: str) -> dict[str, Any]:
    if case == "points-a-list":
        body["points"] = list(body["points"])
    elif case == "point-not-a-list":
        first = next(iter(body["points"]))
        body["points"][first] = "x"
    elif case == "point-without-file":
        first = next(iter(body["points"]))
        body["points"][first] = []
    elif case == "baseline-not-marks":
        first = next(iter(body["baselines"]))
        body["baselines"][first]["code"] = ["fit 3f!"]
    elif case == "format-unknown":
        body["format"] = 3
    elif case == "format-1-templates-not-a-list":  # a manifest an earlier release wrote
        body = json.loads(FORMAT_1.read_text(encoding="utf-8"))
        first = next(iter(body["points"]))
        body["points"][first]["templates"] = "x"
    elif case == "format-1-baseline-not-packed":
        body = json.loads(FORMAT_1.read_text(encoding="utf-8"))
        first = next(iter(body["baselines"]))
        body["baselines"][first] = "not base64 zlib!"
    elif case == "replaced-without-digest":
        point = next(iter(body["replaced"]))
        for record in body["replaced"][point].values():
            del record["digest"]
    elif case == "body-extent-too-short":
        point = next(iter(body["replaced"]))
        for record in body["replaced"][point].values():
            record["bodies"] = {"1": [3, "a", "b"]}
    elif case == "a-list-at-the-top":
        return [body]  # type: ignore[return-value]
    return body


RESHAPED = {
    "points-a-list": "points: expected an object, found a list",
    "point-not-a-list": ": expected a list of strings, found a string",
    "point-without-file": ": expected [file, template digest, ...], found an empty list",
    "baseline-not-marks": ".code[0]: expected `<scope> <marks>`, one mark a statement",
    "format-unknown": "format: 3 is not a format this release reads (1 or 2)",
    "format-1-templates-not-a-list": ".templates: expected a list of strings, found a string",
    "format-1-baseline-not-packed": "not a packed list of fingerprints",
    "replaced-without-digest": ".digest: expected a string, found null",
    "body-extent-too-short": ".bodies.1: expected a capture number and [length, first, last, before, after, beyond_first, beyond_last]",
    "a-list-at-the-top": "the top level: expected an object, found a list",
}


@pytest.mark.parametrize("case", sorted(RESHAPED))
def test_a_manifest_of_another_shape_is_refused_with_where(instrumented: Path, catalog, case: str):
    path = instrumented / MANIFEST
    body = _reshaped(json.loads(path.read_text(encoding="utf-8")), case)
    path.write_text(json.dumps(body, indent=1), encoding="utf-8")
    before = _everything(instrumented)
    for operation in (check, apply, verify, remove, report):
        error = operation(instrumented, catalog).error
        assert error is not None and error.kind is RunErrorKind.MANIFEST_INVALID, operation
        assert error.message.startswith(f"{MANIFEST}: not the shape of a trace-instrument manifest: ")
        assert RESHAPED[case] in error.message
    assert _everything(instrumented) == before


def test_no_manifest_is_still_no_manifest(instrumented: Path, catalog):
    """A lost manifest is not an untrusted one: check works, apply writes it again."""
    (instrumented / MANIFEST).unlink()
    assert check(instrumented, catalog).error is None
    assert apply(instrumented, catalog).error is None
    assert (instrumented / MANIFEST).is_file()
