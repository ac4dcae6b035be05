"""The checkout's own style (issue 39, section 2): which formatter its configuration names
(spec/style.py), and inserted code written the way that formatter writes it (edit/formatting.py).

Default tier: configuration found from each source and in the documented precedence; templates
formatted at their indentation (black, in process); the small 0.9.0 checkout instrumented under
`[tool.black]` is what black leaves unchanged, and `check`/`remove` stay exact on it; with no
configuration the output is today's, byte for byte. Ruff runs as a process: those tests are
`slow`. The whole-tree measurements are tests/test_style_trees.py (e2e).
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import black
import libcst as cst
import pytest

from trace_instrument.edit import formatting
from trace_instrument.edit.render import template_nodes
from trace_instrument.engine.apply import apply
from trace_instrument.engine.check import check
from trace_instrument.engine.remove import remove
from trace_instrument.model import CodeStyle, Formatter, RunErrorKind, Status, Template
from trace_instrument.spec.style import find_style

FIXTURES = Path(__file__).parent / "fixtures"
SMALL_FILES = FIXTURES / "verl-0.9.0-small"
VERL_STYLE = FIXTURES / "style" / "verl"  # verl's own pyproject.toml [tool.ruff] and .pre-commit-config.yaml
TURN_LOOP = "verl/experimental/agent_loop/single_turn_agent_loop.py"


def _write(folder: Path, name: str, text: str) -> Path:
    (folder / name).parent.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text, encoding="utf-8")
    return folder / name


def _git_root(tmp_path: Path) -> Path:
    """A git root (a `.git` folder is all discovery looks for) holding a checkout folder."""
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    (tmp_path / "repo" / "checkout").mkdir()
    return tmp_path / "repo" / "checkout"


RUFF_HOOK = """repos:
  - repo: https://github.com/astral-sh/ruff-pre-commit
    rev: "v0.12.2"
    hooks:
      - id: ruff
      - id: ruff-format
"""
BLACK_HOOK = """repos:
  - repo: https://github.com/psf/black-pre-commit-mirror
    rev: 24.8.0
    hooks:
      - id: black
        args: [--line-length=99, -S]
"""


# -- where the configuration is found ------------------------------------------------------------


def test_no_configuration_names_no_formatter(tmp_path):
    assert find_style(_git_root(tmp_path)) is None


@pytest.mark.parametrize(
    ("name", "text", "formatter", "found_in"),
    [
        ("ruff.toml", "line-length = 100\n", Formatter.RUFF, "ruff.toml"),
        (".ruff.toml", "line-length = 100\n", Formatter.RUFF, ".ruff.toml"),
        (
            "pyproject.toml",
            "[tool.ruff.format]\nquote-style = 'single'\n",
            Formatter.RUFF,
            "pyproject.toml [tool.ruff.format]",
        ),
        ("pyproject.toml", "[tool.ruff]\nline-length = 120\n", Formatter.RUFF, "pyproject.toml [tool.ruff]"),
        ("pyproject.toml", "[tool.black]\nline-length = 100\n", Formatter.BLACK, "pyproject.toml [tool.black]"),
        (".pre-commit-config.yaml", RUFF_HOOK, Formatter.RUFF, ".pre-commit-config.yaml hook ruff-format"),
        (".pre-commit-config.yaml", BLACK_HOOK, Formatter.BLACK, ".pre-commit-config.yaml hook black"),
    ],
)
def test_each_source_of_configuration_names_its_formatter(tmp_path, name, text, formatter, found_in):
    root = _git_root(tmp_path)
    _write(root, name, text)
    style = find_style(root)
    assert style is not None and (style.formatter, style.found_in) == (formatter, found_in)


def test_blacks_options_come_from_its_table_and_its_hooks_arguments(tmp_path):
    root = _git_root(tmp_path)
    table = "[tool.black]\nline_length = 100\nskip-magic-trailing-comma = true\ntarget-version = ['py310']\n"
    _write(root, "pyproject.toml", table)
    style = find_style(root)
    assert style is not None
    assert (style.line_length, style.magic_trailing_comma, style.string_normalization) == (100, False, True)
    assert style.target_versions == ("py310",)
    _write(root, ".pre-commit-config.yaml", BLACK_HOOK)  # the hook's arguments win, as on black's command line
    hooked = find_style(root)
    assert hooked is not None and (hooked.line_length, hooked.string_normalization) == (99, False)
    assert hooked.magic_trailing_comma is False  # the table's, which the hook does not override
    assert hooked.install == "pip install 'black==24.8.0'"


def test_verls_own_configuration_is_ruff_from_its_pre_commit_hook(tmp_path):
    root = _git_root(tmp_path)
    for name in ("pyproject.toml", ".pre-commit-config.yaml"):
        shutil.copyfile(VERL_STYLE / name, root / name)
    style = find_style(root)
    assert style is not None and style.formatter is Formatter.RUFF
    assert style.found_in == ".pre-commit-config.yaml hook ruff-format"
    assert style.install == "pip install 'ruff==0.12.2'"  # the version verl's hook pins
    (root / ".pre-commit-config.yaml").unlink()
    alone = find_style(root)
    assert alone is not None and alone.found_in == "pyproject.toml [tool.ruff]"
    assert alone.install == "pip install 'ruff'"


def test_the_ruff_hooks_arguments_that_shape_its_output_are_read(tmp_path):
    root = _git_root(tmp_path)
    hook = RUFF_HOOK.replace(
        "      - id: ruff-format\n",
        "      - id: ruff-format\n        args: [--line-length=60, --check, --config, \"format.quote-style='single'\"]\n",
    )
    _write(root, ".pre-commit-config.yaml", hook)
    style = find_style(root)
    assert style is not None and style.formatter is Formatter.RUFF and style.line_length == 60
    # --check is about the run, not the output: left out
    assert style.arguments == ("--line-length", "60", "--config", "format.quote-style='single'")
    _write(root, ".pre-commit-config.yaml", RUFF_HOOK)
    plain = find_style(root)
    assert plain is not None and plain.arguments == ()


@pytest.mark.parametrize(
    ("files", "found_in"),
    [
        # the pre-commit hook is what runs on every commit
        ({".pre-commit-config.yaml": BLACK_HOOK, "ruff.toml": ""}, ".pre-commit-config.yaml hook black"),
        # a formatter section of ruff's beats black's
        ({"pyproject.toml": "[tool.black]\n[tool.ruff.format]\n"}, "pyproject.toml [tool.ruff.format]"),
        # black's table beats a [tool.ruff] that may hold lint settings only
        ({"pyproject.toml": "[tool.ruff]\nline-length = 120\n[tool.black]\n"}, "pyproject.toml [tool.black]"),
        # ruff's own files come before pyproject.toml, .ruff.toml before ruff.toml
        ({".ruff.toml": "", "ruff.toml": "", "pyproject.toml": "[tool.black]\n"}, ".ruff.toml"),
        # with two formatter hooks, the one listed last writes last
        (
            {".pre-commit-config.yaml": BLACK_HOOK + RUFF_HOOK[len("repos:\n") :]},
            ".pre-commit-config.yaml hook ruff-format",
        ),
    ],
)
def test_precedence_in_one_folder(tmp_path, files, found_in):
    root = _git_root(tmp_path)
    for name, text in files.items():
        _write(root, name, text)
    style = find_style(root)
    assert style is not None and style.found_in == found_in


def test_the_nearest_folder_decides_and_the_search_stops_at_the_git_root(tmp_path):
    root = _git_root(tmp_path)
    _write(root.parent, "pyproject.toml", "[tool.black]\nline-length = 100\n")
    _write(tmp_path, "ruff.toml", "")  # above the git root: not the checkout's
    style = find_style(root)
    assert style is not None and (style.formatter, style.found_in) == (
        Formatter.BLACK,
        "../pyproject.toml [tool.black]",
    )
    _write(root, "ruff.toml", "")
    nearer = find_style(root)
    assert nearer is not None and nearer.found_in == "ruff.toml"


def test_outside_git_only_the_checkout_root_counts(tmp_path):
    root = tmp_path / "checkout"
    root.mkdir()
    _write(tmp_path, "pyproject.toml", "[tool.black]\n")
    assert find_style(root) is None
    _write(root, "pyproject.toml", "[tool.black]\n")
    assert find_style(root) is not None


def test_files_that_do_not_parse_configure_nothing(tmp_path):
    root = _git_root(tmp_path)
    _write(root, "pyproject.toml", "[tool.black\n")
    _write(root, ".pre-commit-config.yaml", "repos: [\n")
    assert find_style(root) is None


# -- templates formatted at their indentation ------------------------------------------------------

CALL = """# a comment the template carries
trace_flow(uid=kwargs.get('uid', 'unknown'), traj_uid=kwargs.get('traj_uid', 'N/A'),
           from_module='SingleTurnAgentLoop', to_module='RolloutReplica',
           stage='LLM_GENERATE', detail='sending_generate_request')
_x = {'a':1}
"""


def _template(text: str) -> Template:
    stmts = tuple(ast.parse(text).body)
    lines = text.split("\n")
    leading = next(i for i, line in enumerate(lines) if line.strip() and not line.lstrip().startswith("#"))
    return Template("test.py", text, stmts, "sha", leading_lines=leading)


def _black_layout(length: int) -> formatting.Layout:
    return formatting.Layout(CodeStyle(Formatter.BLACK, "pyproject.toml [tool.black]", line_length=length), "x.py")


def _at_depth(stmts, depth: int) -> str:
    """The statements printed `depth` levels deep in a module, as an insertion prints them."""
    body = list(stmts)
    for _ in range(depth):
        body = [cst.If(test=cst.Name("True"), body=cst.IndentedBlock(body=body))]
    return cst.Module(body=[cst.SimpleStatementLine([cst.Pass()]), *body]).code


@pytest.mark.parametrize(("depth", "length"), [(0, 88), (2, 88), (3, 60), (2, 120)])
def test_a_template_is_what_black_writes_at_its_depth(depth, length):
    template = _template(CALL)
    written = formatting.statements(_black_layout(length), template, "    " * depth, "    ")
    printed = _at_depth(written, depth)
    assert black.format_str(printed, mode=black.Mode(line_length=length)) == printed
    as_is = _at_depth(template_nodes(template), depth)
    assert black.format_str(as_is, mode=black.Mode(line_length=length)) != as_is, "the test must see a change"
    # the same code, and the template's own lines above it in number (remove takes that many)
    assert ast.dump(ast.parse(printed)) == ast.dump(ast.parse(as_is))
    assert len(written[0].leading_lines) == len(template_nodes(template)[0].leading_lines) == 1


def test_a_template_with_blank_lines_above_keeps_them():
    template = _template('\n\ndef _helper(batch):\n    return {"n": len(batch)}\n')
    written = formatting.statements(_black_layout(88), template, "", "    ")
    assert len(written[0].leading_lines) == 2
    printed = cst.Module(body=[cst.SimpleStatementLine([cst.Pass()]), *written]).code
    assert black.format_str(printed, mode=black.Mode()) == printed


def test_without_a_layout_or_with_tabs_the_template_is_as_written():
    template = _template(CALL)
    assert formatting.statements(None, template, "        ", "    ") == template_nodes(template)
    assert formatting.statements(_black_layout(88), template, "\t", "\t") == template_nodes(template)
    assert formatting.statements(_black_layout(88), template, "      ", "    ") == template_nodes(template)


def test_an_import_line_apply_makes_is_what_black_writes():
    from trace_instrument.edit.imports import render_from_import

    names = ["trace_flow", "log_progress", "log_step_window", "log_gen_throughput"]
    made = render_from_import("verl.utils.tracing", names)
    restyle = formatting.import_restyler(_black_layout(60))
    assert restyle is not None and formatting.import_restyler(None) is None
    written = render_from_import("verl.utils.tracing", names, restyle=restyle)
    as_made, as_written = (cst.Module(body=[line]).code for line in (made, written))
    assert len(as_made.splitlines()) == 1 and len(as_made) > 60  # the tool's own line length is 120
    assert black.format_str(as_written, mode=black.Mode(line_length=60)) == as_written
    assert black.format_str(as_made, mode=black.Mode(line_length=60)) == as_written


# -- apply, check and remove on the small 0.9.0 checkout ---------------------------------------------


def _small(root: Path) -> Path:
    for path in SMALL_FILES.rglob("*"):
        if path.is_file():
            target = root / path.relative_to(SMALL_FILES)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
    return root


def _black_clean(path: Path, mode: black.Mode) -> bool:
    try:
        black.format_file_contents(path.read_text(encoding="utf-8"), fast=False, mode=mode)
    except black.NothingChanged:
        return True
    return False


def _code_files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted((root / "verl").rglob("*.py"))}


def test_apply_under_tool_black_writes_what_black_leaves_alone_and_remove_gives_the_bytes_back(tmp_path, catalog):
    mode = black.Mode(line_length=100)
    root = _small(_git_root(tmp_path))
    _write(root, "pyproject.toml", "[tool.black]\nline-length = 100\n")
    for path in (root / "verl").rglob("*.py"):  # a black-formatted fork
        path.write_text(black.format_str(path.read_text(encoding="utf-8"), mode=mode), encoding="utf-8")
    pristine = _code_files(root)
    applied = apply(root, catalog)
    assert applied.error is None and applied.written
    assert any(p.status is Status.APPLIED for p in applied.points)
    assert (root / TURN_LOOP).read_bytes() != pristine[TURN_LOOP]
    assert _black_clean(root / TURN_LOOP, mode)
    # black run over the instrumented tree changes nothing: check and remove see apply's bytes
    assert {p.status for p in check(root, catalog).points if p.status.in_place} == {Status.PRESENT}
    removed = remove(root, catalog)
    assert removed.error is None
    assert {k: v for k, v in _code_files(root).items() if not k.startswith("verl/utils/tracing/")} == pristine


def test_without_configuration_the_output_is_the_templates_as_written(tmp_path, catalog):
    plain = _small(tmp_path / "plain")
    configured = _small(_git_root(tmp_path))
    _write(configured, "pyproject.toml", "[tool.black]\nline-length = 100\n")
    assert apply(plain, catalog).written and apply(configured, catalog).written
    text = (plain / TURN_LOOP).read_text(encoding="utf-8")
    assert "from_module='SingleTurnAgentLoop'" in text  # the template's quotes, as written
    assert "from_module='SingleTurnAgentLoop'" not in (configured / TURN_LOOP).read_text(encoding="utf-8")
    unstyled = apply(configured, catalog, write=False, styling=None)
    assert unstyled.error is None


def test_a_formatter_that_is_not_installed_stops_apply_with_the_command_that_installs_it(
    tmp_path, catalog, monkeypatch
):
    root = _small(_git_root(tmp_path))
    for name in ("pyproject.toml", ".pre-commit-config.yaml"):
        shutil.copyfile(VERL_STYLE / name, root / name)
    before = _code_files(root)
    monkeypatch.setattr(formatting, "installed", lambda style: False)
    result = apply(root, catalog)
    assert result.error is not None and result.error.kind is RunErrorKind.FORMATTER_MISSING
    assert result.error.install == "pip install 'ruff==0.12.2'"
    assert result.error.path == ".pre-commit-config.yaml"
    assert not result.written and _code_files(root) == before


@pytest.mark.slow  # ruff is a process of its own
def test_apply_under_verls_ruff_configuration_writes_what_ruff_leaves_alone(tmp_path, catalog):
    import subprocess
    import sys

    root = _small(_git_root(tmp_path))
    shutil.copyfile(VERL_STYLE / "pyproject.toml", root / "pyproject.toml")
    ruff = [sys.executable, "-m", "ruff"]
    pristine = subprocess.run([*ruff, "format", "--check", "--no-cache", TURN_LOOP], cwd=root, check=False)
    assert pristine.returncode == 0, "the release file needs no change"
    assert apply(root, catalog).written
    after = subprocess.run(
        [*ruff, "format", "--check", "--no-cache", TURN_LOOP], cwd=root, capture_output=True, check=False
    )
    assert after.returncode == 0, after.stdout
    long_lines = subprocess.run(
        [*ruff, "check", "--no-cache", "--select", "E501", "--line-length", "120", TURN_LOOP], cwd=root, check=False
    )
    assert long_lines.returncode == 0


@pytest.mark.slow  # ruff is a process of its own
def test_apply_formats_with_the_ruff_hooks_arguments(tmp_path, catalog):
    root = _small(_git_root(tmp_path))
    shutil.copyfile(VERL_STYLE / "pyproject.toml", root / "pyproject.toml")
    hook = RUFF_HOOK.replace(
        "      - id: ruff-format\n",
        "      - id: ruff-format\n        args: [\"--config=format.quote-style='single'\"]\n",
    )
    _write(root, ".pre-commit-config.yaml", hook)
    assert apply(root, catalog).written
    text = (root / TURN_LOOP).read_text(encoding="utf-8")
    # verl's [tool.ruff] alone writes double quotes; the hook's --config keeps single ones
    assert "from_module='SingleTurnAgentLoop'" in text and 'from_module="SingleTurnAgentLoop"' not in text


# -- what the commands say ----------------------------------------------------------------------------


def _cli(*args: str):
    from typer.testing import CliRunner

    from trace_instrument.cli import app

    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def test_apply_names_the_formatter_that_wrote_the_code_in_text_and_json(tmp_path):
    import json

    from trace_instrument.render.jsonout import schema

    root = _small(_git_root(tmp_path))
    _write(root, "pyproject.toml", "[tool.black]\nline-length = 100\n")
    shown = _cli("apply", "--dry-run", root)
    assert "style: black (pyproject.toml [tool.black])" in shown.output
    data = json.loads(_cli("apply", "--dry-run", "--format", "json", root).output)
    assert data["style"] == {"formatter": "black", "found_in": "pyproject.toml [tool.black]", "mismatch": None}
    style = schema("run")["properties"]["style"]["anyOf"][0]["properties"]
    assert style["formatter"] == {"enum": [f.value for f in Formatter]}
    # without configuration: no line, and null (the renderers alone: the commands run as above)
    from trace_instrument.model import RunResult
    from trace_instrument.render import jsonout, text

    plain = RunResult(str(tmp_path), ())
    assert text.style_lines(plain) == []
    assert jsonout.run("apply", plain, dry_run=True)["style"] is None


def test_a_formatter_at_another_version_than_the_pinned_one_is_one_line_of_apply(tmp_path):
    import json
    from importlib import metadata

    import jsonschema

    from trace_instrument.render.jsonout import schema

    installed = metadata.version("black")
    assert installed != "24.8.0", "the hook's pin must differ from the black installed here"
    root = _small(_git_root(tmp_path))
    _write(root, ".pre-commit-config.yaml", BLACK_HOOK)
    shown = _cli("apply", "--dry-run", root)
    said = [line for line in shown.output.splitlines() if "24.8.0" in line]
    assert len(said) == 1, shown.output
    assert said[0].startswith(f"note: black {installed} wrote the inserted code, the checkout pins 24.8.0")
    assert said[0].endswith("pip install 'black==24.8.0'")
    data = json.loads(_cli("apply", "--dry-run", "--format", "json", root).output)
    assert data["style"]["mismatch"] == {"pinned": "24.8.0", "installed": installed}
    jsonschema.validate(data, schema("run"), cls=jsonschema.Draft202012Validator)
    _write(root, ".pre-commit-config.yaml", BLACK_HOOK.replace("24.8.0", installed))  # the pin met: no line
    again = _cli("apply", "--dry-run", root)
    assert "note: black" not in again.output
    assert again.exit_code == shown.exit_code  # a note: the exit code is the same
    assert json.loads(_cli("apply", "--dry-run", "--format", "json", root).output)["style"]["mismatch"] is None


def test_a_missing_formatter_is_an_error_of_the_command_exit_2(tmp_path, monkeypatch):
    import json

    root = _small(_git_root(tmp_path))
    shutil.copyfile(VERL_STYLE / ".pre-commit-config.yaml", root / ".pre-commit-config.yaml")
    monkeypatch.setattr(formatting, "installed", lambda style: False)
    shown = _cli("apply", root)
    assert shown.exit_code == 2 and "pip install 'ruff==0.12.2'" in shown.output
    data = json.loads(_cli("apply", "--format", "json", root).output)
    assert data["exit_code"] == 2
    assert data["error"]["kind"] == "formatter-missing" and data["error"]["install"] == "pip install 'ruff==0.12.2'"
