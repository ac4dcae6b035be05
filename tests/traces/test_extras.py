"""The trace reader's engines are extras: without DuckDB, `analyze` and `export` exit 2 with the
exact pip command, and the codemod's commands never import it (`pip install .` is the codemod alone)."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import subprocess
import sys
import textwrap
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # the package's own dependency before 3.11
    import tomli as tomllib

import pytest
from typer.testing import CliRunner

from trace_instrument.cli import app

runner = CliRunner()
PYPROJECT = Path(__file__).parents[2] / "pyproject.toml"
HINT = "error: duckdb is not installed: pip install 'trace-instrument[analyze]'"
# the reader's calls, each of which needs DuckDB
READER_CALLS = [
    ["analyze"],
    ["analyze", "--format", "json"],
    ["analyze", "--follow", "--refreshes", "1", "--interval", "0"],
    ["analyze", "--trajectory", "u/0"],
    ["export", "--perfetto", "{out}/t.json"],
    ["export", "--parquet", "{out}"],
]
# the codemod's commands on a tree with a verl/ package and nothing else: (arguments, exit code)
CODEMOD_CALLS = [
    (["check"], 1),  # every point missing: drift
    (["apply", "--dry-run"], 0),
    (["apply"], 0),
    (["verify"], 0),  # its runtime self-check runs a subprocess: the fresh-interpreter test alone runs it
    (["report"], 0),
    (["remove"], 0),
    (["points"], 0),
]


def _pyproject() -> dict:
    with PYPROJECT.open("rb") as handle:
        return tomllib.load(handle)


def _requirement_names(requirements: list[str]) -> set[str]:
    return {r.split(";")[0].split("[")[0].split("<")[0].split(">")[0].split("=")[0].strip() for r in requirements}


def _tiny_tree(tmp_path: Path) -> Path:
    (tmp_path / "tree" / "verl").mkdir(parents=True)
    (tmp_path / "tree" / "verl" / "__init__.py").write_text("", encoding="utf-8")
    return tmp_path / "tree"


class _Recorder(importlib.abc.MetaPathFinder):
    """Records every attempt to import duckdb and fails it, as a machine without it would."""

    def __init__(self) -> None:
        self.attempts: list[str] = []

    def find_spec(self, name, path=None, target=None) -> importlib.machinery.ModuleSpec | None:
        if name.split(".")[0] != "duckdb":
            return None  # the next finder's
        self.attempts.append(name)
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)


@pytest.fixture
def without_duckdb(monkeypatch: pytest.MonkeyPatch) -> _Recorder:
    """DuckDB gone for this test: out of sys.modules, and any import of it recorded and refused."""
    for name in [m for m in sys.modules if m.split(".")[0] == "duckdb"]:
        monkeypatch.delitem(sys.modules, name)
    recorder = _Recorder()
    monkeypatch.setattr(sys, "meta_path", [recorder, *sys.meta_path])
    return recorder


def test_the_package_alone_is_the_codemod_and_each_extra_installs_its_engine():
    """The pip command the hint prints installs DuckDB; the package alone does not, nor does [test]
    bring pyspark (its tier installs `spark`); [test] brings `format`, as apply follows a
    checkout's black in process and the default tier tests it."""
    project = _pyproject()["project"]
    extras = project["optional-dependencies"]
    assert "duckdb" not in _requirement_names(project["dependencies"])
    assert _requirement_names(extras["analyze"]) == {"duckdb"}
    assert _requirement_names(extras["spark"]) == {"pyspark"}
    # black through its API, ruff as a process: the two formatters apply can follow (docs/instrumenting.md)
    assert _requirement_names(extras["format"]) == {"black", "ruff"}
    assert _requirement_names(extras["tensorboard"]) == {"tensorboardX"}
    assert _requirement_names(extras["mlflow"]) == {"mlflow-skinny"}
    assert _requirement_names(extras["wandb"]) == {"wandb"}
    assert "trace-instrument[analyze,format]" in extras["test"]
    assert not {"pyspark", "black", "duckdb"} & _requirement_names(extras["test"])


@pytest.mark.parametrize("call", READER_CALLS, ids=lambda c: " ".join(c))
def test_the_reader_without_duckdb_exits_2_with_the_pip_command(call, tiny_run, tmp_path, without_duckdb):
    args = [a.format(out=tmp_path) for a in call]
    result = runner.invoke(app, [args[0], str(tiny_run), *args[1:]])
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [HINT]
    assert result.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing written


def test_an_import_of_duckdb_failing_inside_a_read_gives_the_same_hint(tiny_run, monkeypatch):
    """Past the check (DuckDB found, then failing to load): the same one line, not a traceback."""
    analyze_module = sys.modules["trace_instrument.traces.analyze"]

    def missing(*_args, **_kwargs):
        raise ModuleNotFoundError("No module named 'duckdb'", name="duckdb")

    monkeypatch.setattr(analyze_module, "analyze", missing)
    result = runner.invoke(app, ["analyze", str(tiny_run)])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [HINT]


def test_the_codemod_commands_run_without_duckdb(tmp_path, without_duckdb):
    tree = _tiny_tree(tmp_path)
    for args, code in [(a, c) for a, c in CODEMOD_CALLS if a != ["verify"]]:
        result = runner.invoke(app, [*args, str(tree)] if args != ["points"] else args)
        assert result.exit_code == code, (args, result.output)
    assert without_duckdb.attempts == []


@pytest.mark.slow
def test_the_codemod_commands_never_import_duckdb(tmp_path):
    """In a fresh interpreter, whatever other tests loaded: the CLI and every codemod command, verify's
    runtime self-check included, leave duckdb (and the reader's engine) out of sys.modules."""
    tree = _tiny_tree(tmp_path)
    code = textwrap.dedent(
        f"""
        import sys
        from typer.testing import CliRunner
        from trace_instrument.cli import app
        runner = CliRunner()
        for args, code in {CODEMOD_CALLS!r}:
            result = runner.invoke(app, [*args, {str(tree)!r}] if args != ["points"] else args)
            assert result.exit_code == code, (args, result.output)
        reader = sorted(m for m in sys.modules if m.startswith("trace_instrument.traces."))
        print("LOADED:" + ",".join(m for m in sys.modules if m.split(".")[0] == "duckdb") + "|" + ",".join(reader))
        """
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    (line,) = [row for row in run.stdout.splitlines() if row.startswith("LOADED:")]
    duckdb_modules, reader = line.removeprefix("LOADED:").split("|")
    assert duckdb_modules == ""
    assert reader == "trace_instrument.traces.cli"
