"""The project configuration: `[tool.trace-instrument]` in pyproject.toml, or .trace-instrument.toml.

Every command that works on a checkout reads it; a flag given replaces its key's value; a
configuration that cannot be used is exit 2 naming the file and the key.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import pytest
import yaml
from support import TESTS
from typer.testing import CliRunner

from trace_instrument.cli import app
from trace_instrument.render import jsonout

EXAMPLE_ANCHORS = TESTS.parent / "examples" / "anchors"
# two shipped points of verl 0.9.0's ray_trainer.py, and a third
UID = "flow.v0.uid-generated"
REWARD = "flow.v0.train-reward"
INIT = "progress.v0.init-lines"


def _run(*args: object):
    return CliRunner().invoke(app, [str(a) for a in args])


def _points(outcome) -> list[str]:
    """The point ids of a `check --format json` run (the runtime package's items left out)."""
    assert outcome.exit_code in (0, 1), outcome.output
    return [p["id"] for p in json.loads(outcome.output)["points"] if p["id"] != "runtime"]


def _tiny(tmp_path: Path) -> Path:
    """A checkout with an empty verl/: every shipped point is not-applicable, and listed."""
    root = tmp_path / "checkout"
    (root / "verl").mkdir(parents=True)
    (root / "verl" / "__init__.py").write_text("")
    return root


def _own(root: Path, body: str) -> Path:
    file = root / ".trace-instrument.toml"
    file.write_text(body, encoding="utf-8")
    return file


def _pyproject(root: Path, body: str) -> Path:
    file = root / "pyproject.toml"
    file.write_text('[project]\nname = "verl"\n\n[tool.trace-instrument]\n' + body, encoding="utf-8")
    return file


def test_configured_skip_is_the_skip_flags_on_verl_090(checkout_090):
    unconfigured = _run("check", "--format", "json", checkout_090)
    flags = _run("check", "--format", "json", "--skip", UID, "--skip", REWARD, checkout_090)
    _own(checkout_090, f'skip = ["{UID}", "{REWARD}"]\n')
    configured = _run("check", "--format", "json", checkout_090)
    assert configured.exit_code == flags.exit_code == 1  # pristine: the other points are missing
    assert set(_points(unconfigured)) - set(_points(configured)) == {UID, REWARD}
    by_flags, by_config = json.loads(flags.output), json.loads(configured.output)
    assert by_config.pop("config") == ".trace-instrument.toml"
    assert by_flags.pop("config") is None
    assert by_config == by_flags
    text = _run("check", checkout_090)
    assert text.output.splitlines()[0] == "config: .trace-instrument.toml"


def test_the_pyproject_table_is_read_and_named(tmp_path):
    root = _tiny(tmp_path)
    _pyproject(root, f'only = ["{UID}"]\n')
    assert _points(_run("check", "--format", "json", root)) == [UID]
    assert _run("check", root).output.splitlines()[0] == "config: pyproject.toml [tool.trace-instrument]"
    body = json.loads(_run("check", "--format", "json", root).output)
    jsonschema.validate(body, jsonout.schema("check"), cls=jsonschema.Draft202012Validator)
    assert body["config"] == "pyproject.toml [tool.trace-instrument]"


def test_a_pyproject_without_the_table_configures_nothing(tmp_path):
    root = _tiny(tmp_path)
    (root / "pyproject.toml").write_text('[project]\nname = "verl"\n[tool.ruff]\nline-length = 120\n')
    everything = _points(_run("check", "--format", "json", root))
    assert UID in everything and len(everything) > 1
    assert not _run("check", root).output.startswith("config:")
    assert json.loads(_run("check", "--format", "json", root).output)["config"] is None


def test_a_flag_replaces_its_key_and_leaves_the_others(tmp_path):
    root = _tiny(tmp_path)
    _own(root, f'only = ["{UID}", "{REWARD}"]\nskip = ["{REWARD}"]\n')
    assert _points(_run("check", "--format", "json", root)) == [UID]
    # --only replaces the configured list; the configured skip still applies
    replaced = _points(_run("check", "--format", "json", "--only", INIT, "--only", REWARD, root))
    assert replaced == [INIT]
    # --skip replaces the configured skip; the configured only still applies
    assert sorted(_points(_run("check", "--format", "json", "--skip", UID, root))) == [REWARD]


def test_both_files_are_refused_naming_both(tmp_path):
    root = _tiny(tmp_path)
    pyproject = _pyproject(root, f'skip = ["{UID}"]\n')
    own = _own(root, f'skip = ["{UID}"]\n')
    for command in ("check", "apply", "report"):
        outcome = _run(command, root)
        assert outcome.exit_code == 2, command
        assert str(pyproject) in outcome.output and str(own) in outcome.output


@pytest.mark.parametrize(
    ("body", "key", "words"),
    [
        ('skipp = ["x"]\n', "skipp", "unknown key; did you mean 'skip'?"),
        (f'skip = "{UID}"\n', "skip", "must be a list of strings, not a string"),
        ("only = [1]\n", "only", "not one with an integer"),
        ("only = []\n", "only", "is empty"),
        ('facility = ["progres"]\n', "facility", "unknown facility 'progres'; did you mean 'progress'?"),
        ('anchors = ["no-such-folder"]\n', "anchors", "no such folder 'no-such-folder'"),
    ],
)
def test_an_unusable_key_is_exit_2_naming_the_file_and_key(tmp_path, body, key, words):
    root = _tiny(tmp_path)
    own = _own(root, body)
    outcome = _run("check", root)
    assert outcome.exit_code == 2
    assert f"{own}: key {key!r}: " in outcome.output
    assert words in outcome.output


def test_an_unknown_key_in_the_pyproject_table_names_the_table(tmp_path):
    root = _tiny(tmp_path)
    pyproject = _pyproject(root, "colour = []\n")
    outcome = _run("check", root)
    assert outcome.exit_code == 2
    assert f"{pyproject} [tool.trace-instrument]: key 'colour': unknown key" in outcome.output


def test_a_file_that_is_not_toml_is_exit_2(tmp_path):
    root = _tiny(tmp_path)
    own = _own(root, "skip = [\n")
    outcome = _run("check", root)
    assert outcome.exit_code == 2 and f"{own}: not valid TOML" in outcome.output


@pytest.mark.parametrize(
    "command",
    [("apply", "--dry-run"), ("check",), ("verify",), ("remove", "--dry-run"), ("port", "--dry-run"), ("report",)],
)
def test_every_command_on_a_checkout_reads_it(tmp_path, command):
    root = _tiny(tmp_path)
    own = _own(root, "colour = []\n")
    outcome = _run(*command, root)
    assert outcome.exit_code == 2
    assert f"{own}: key 'colour': unknown key" in outcome.output


def test_an_unknown_point_id_gets_the_flags_message_with_the_file_and_key(tmp_path):
    root = _tiny(tmp_path)
    by_flag = _run("check", "--skip", "flow.v0.uid-generatd", root)
    assert by_flag.exit_code == 2
    flag_message = by_flag.output.strip().removeprefix("error: ")
    assert flag_message.startswith("unknown point id 'flow.v0.uid-generatd'; did you mean")
    own = _own(root, 'skip = ["flow.v0.uid-generatd"]\n')
    outcome = _run("check", root)
    assert outcome.exit_code == 2
    assert outcome.output.strip() == f"error: {own}: key 'skip': {flag_message}"


def test_relative_anchors_folders_are_the_checkouts_not_the_cwds(tmp_path, monkeypatch):
    root = _tiny(tmp_path)
    shutil.copytree(EXAMPLE_ANCHORS, root / "my-anchors")
    specs = yaml.safe_load((EXAMPLE_ANCHORS / "my_agent_loop.yaml").read_text(encoding="utf-8"))
    mine = {p["id"] for p in specs["points"]}
    assert mine, "the example declares points"
    _own(root, 'anchors = ["my-anchors"]\n')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()  # holds no my-anchors/: read from here, the folder would not exist
    monkeypatch.chdir(elsewhere)
    listed = set(_points(_run("check", "--format", "json", root)))
    assert mine <= listed
    # --anchors replaces the configured folders (and is relative to the cwd, as ever)
    assert not mine & set(_points(_run("check", "--format", "json", "--anchors", elsewhere, root)))


def test_port_reads_the_configured_anchors(tmp_path):
    root = _tiny(tmp_path)
    shutil.copytree(EXAMPLE_ANCHORS, root / "my-anchors")
    specs = yaml.safe_load((EXAMPLE_ANCHORS / "my_agent_loop.yaml").read_text(encoding="utf-8"))
    first = specs["points"][0]["id"]
    _own(root, f'anchors = ["my-anchors"]\nonly = ["{first}"]\n')  # an id only the configured folder knows
    outcome = _run("port", "--dry-run", "--format", "json", root)
    assert outcome.exit_code in (0, 1), outcome.output
    body = json.loads(outcome.output)
    assert body["config"] == ".trace-instrument.toml"
    jsonschema.validate(body, jsonout.schema("port"), cls=jsonschema.Draft202012Validator)


def test_the_text_outputs_name_the_file(tmp_path):
    root = _tiny(tmp_path)
    _own(root, f'skip = ["{UID}"]\n')
    for command in (("apply", "--dry-run"), ("verify",), ("remove", "--dry-run"), ("port", "--dry-run")):
        outcome = _run(*command, root)
        assert outcome.output.splitlines()[0] == "config: .trace-instrument.toml", command
    assert "- config: .trace-instrument.toml\n" in _run("report", "--format", "markdown", root).output
    assert "config:" not in _run("check", "--quiet", root).output


# -- port names its folder in the configuration (record_anchors) ----------------------------------------


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        # no configuration, no pyproject.toml: a file of its own
        ({}, {".trace-instrument.toml": 'anchors = [".trace-instrument/anchors"]\n'}),
        # a pyproject.toml without the table: the table at its end
        (
            {"pyproject.toml": '[project]\nname = "verl"'},
            {
                "pyproject.toml": '[project]\nname = "verl"\n\n[tool.trace-instrument]\nanchors = [".trace-instrument/anchors"]\n'
            },
        ),
        # the table without the key: the key first in it, the table's other keys and the next table kept
        (
            {"pyproject.toml": '[tool.trace-instrument]\nskip = ["x.y"]\n\n[tool.ruff]\nline-length = 1\n'},
            {
                "pyproject.toml": '[tool.trace-instrument]\nanchors = [".trace-instrument/anchors"]\nskip = ["x.y"]\n\n'
                "[tool.ruff]\nline-length = 1\n"
            },
        ),
        # a list of other folders: the folder added to it
        (
            {".trace-instrument.toml": 'anchors = ["mine"]  # reviewed\n'},
            {".trace-instrument.toml": 'anchors = ["mine", ".trace-instrument/anchors"]  # reviewed\n'},
        ),
    ],
)
def test_port_names_its_folder_in_the_configuration(tmp_path, files, expected):
    from trace_instrument.spec.project import find_config, record_anchors

    root = _tiny(tmp_path)
    (root / ".trace-instrument" / "anchors").mkdir(parents=True)
    (root / "mine").mkdir()
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
    recorded = record_anchors(root, ".trace-instrument/anchors")
    assert recorded.added and not recorded.problem and recorded.file == root / next(iter(expected))
    for name, text in expected.items():
        assert (root / name).read_text(encoding="utf-8") == text
    config = find_config(root)
    assert config is not None and (root / ".trace-instrument" / "anchors").resolve() in config.anchors
    again = record_anchors(root, ".trace-instrument/anchors")
    assert not again.added and again.file == recorded.file
    assert [(root / n).read_text(encoding="utf-8") for n in expected] == list(expected.values())


def test_a_list_over_several_lines_is_not_edited_and_says_what_to_add(tmp_path):
    from trace_instrument.spec.project import record_anchors

    root = _tiny(tmp_path)
    (root / ".trace-instrument" / "anchors").mkdir(parents=True)
    (root / "mine").mkdir()
    text = 'anchors = [\n  "mine",\n]\n'
    (root / ".trace-instrument.toml").write_text(text, encoding="utf-8")
    recorded = record_anchors(root, ".trace-instrument/anchors")
    assert not recorded.added and "not a one-line list" in recorded.problem
    assert 'anchors = [".trace-instrument/anchors"]' in recorded.problem
    assert (root / ".trace-instrument.toml").read_text(encoding="utf-8") == text
