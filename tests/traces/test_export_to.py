"""`export --to KIND DEST`: one destination option, the old --perfetto/--parquet its aliases; each
tracker's library an extra named after it, missing it exits 2 with the pip command (nothing written).
The trackers' runs themselves are read back in test_export_trackers.py (the slow tier)."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
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
# tracker -> (the module its writer imports, the extra that installs it)
TRACKERS = {"tensorboard": ("tensorboardX", "tensorboard"), "mlflow": ("mlflow", "mlflow"), "wandb": ("wandb", "wandb")}


def _export(*args: str):
    return runner.invoke(app, ["export", *args, "--no-cache"])


@pytest.mark.parametrize(
    ("alias", "kind", "name"), [("--perfetto", "perfetto", "t.json"), ("--parquet", "parquet", "p")]
)
def test_the_old_options_are_aliases_of_to(tiny_run, tmp_path: Path, alias: str, kind: str, name: str) -> None:
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    old = _export(str(tiny_run), alias, str(tmp_path / "old" / name))
    new = _export(str(tiny_run), "--to", kind, str(tmp_path / "new" / name))
    assert old.exit_code == new.exit_code == 0, (old.output, new.output)
    assert old.stderr.replace("/old/", "/new/") == new.stderr
    made = {p.relative_to(tmp_path / "old") for p in (tmp_path / "old").rglob("*") if p.is_file()}
    assert made and made == {p.relative_to(tmp_path / "new") for p in (tmp_path / "new").rglob("*") if p.is_file()}
    if kind == "perfetto":
        assert (tmp_path / "old" / name).read_bytes() == (tmp_path / "new" / name).read_bytes()


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--to", "perfetto", "{out}/a.json", "--parquet", "{out}/p"],
        ["--perfetto", "{out}/a.json", "--parquet", "{out}/p"],
    ],
    ids=["none", "to-and-alias", "both-aliases"],
)
def test_exactly_one_destination(tiny_run, tmp_path: Path, args: list[str]) -> None:
    result = _export(str(tiny_run), *[a.format(out=tmp_path) for a in args])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == ["error: give exactly one of --to KIND DEST, --perfetto FILE or --parquet DIR"]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--to", "perfetto", "{out}/a.json", "--follow"], "--follow and --run-id go with the trackers"),
        (["--to", "parquet", "{out}/p", "--run-id", "r"], "--follow and --run-id go with the trackers"),
        (["--to", "tensorboard", "{out}/tb", "--run-id", "r"], "TensorBoard runs are folders"),
        (["--to", "tensorboard", "{out}/no/such/tb"], "does not exist"),
        (["--to", "wandb", "{out}/no/such/wandb"], "does not exist"),
        (["--to", "comet", "{out}/c"], "'comet' is not one of"),
    ],
    ids=["follow-perfetto", "run-id-parquet", "run-id-tensorboard", "tensorboard-parent", "wandb-parent", "kind"],
)
def test_refused_combinations_write_nothing(tiny_run, tmp_path: Path, args: list[str], says: str) -> None:
    result = _export(str(tiny_run), *[a.format(out=tmp_path) for a in args])
    assert result.exit_code == 2
    assert says in " ".join(result.output.replace("│", " ").split())
    assert list(tmp_path.iterdir()) == []


class _Blocker(importlib.abc.MetaPathFinder):
    """Fails every import of one library (and records it), as a machine without it would."""

    def __init__(self, library: str) -> None:
        self.library = library
        self.attempts: list[str] = []

    def find_spec(self, name, path=None, target=None) -> importlib.machinery.ModuleSpec | None:
        if name.split(".")[0] != self.library:
            return None
        self.attempts.append(name)
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)


@pytest.mark.parametrize("tracker", sorted(TRACKERS))
def test_a_missing_tracker_library_is_the_pip_command(tiny_run, tmp_path: Path, tracker: str, monkeypatch) -> None:
    library, extra = TRACKERS[tracker]
    for name in [m for m in sys.modules if m.split(".")[0] == library]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "meta_path", [_Blocker(library), *sys.meta_path])
    dest = f"sqlite:///{tmp_path}/m.db" if tracker == "mlflow" else str(tmp_path / "out")
    result = _export(str(tiny_run), "--to", tracker, dest)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"error: {library} is not installed: pip install 'trace-instrument[{extra}]'"]
    assert result.stdout == "" and list(tmp_path.iterdir()) == []


def test_each_tracker_is_an_extra_of_its_own_name() -> None:
    """`pip install 'trace-instrument[NAME]'` installs the library of tracker NAME, with a version range;
    neither the package nor [test] brings any (the slow tier's `trackers-test` extra does)."""
    with PYPROJECT.open("rb") as handle:
        project = tomllib.load(handle)["project"]
    extras = project["optional-dependencies"]
    packages = {"tensorboard": "tensorboardX", "mlflow": "mlflow-skinny", "wandb": "wandb"}
    for tracker, package in packages.items():
        (requirement,) = extras[tracker]
        assert requirement.startswith(package + ">=") and ",<" in requirement, requirement
    assert "trace-instrument[tensorboard,mlflow,wandb]" in extras["trackers-test"]
    named = " ".join(project["dependencies"] + extras["test"])
    assert not any(package in named for package in packages.values())


@pytest.mark.parametrize(
    ("error", "line"),
    [
        (
            ModuleNotFoundError("No module named 'sqlalchemy'", name="sqlalchemy"),
            "error: could not write into mlflow sqlite:///m.db (ModuleNotFoundError: No module named 'sqlalchemy')",
        ),
        (
            ModuleNotFoundError("No module named 'mlflow.tracking'", name="mlflow.tracking"),
            "error: mlflow is not installed: pip install 'trace-instrument[mlflow]'",
        ),
        (
            RuntimeError("the server said no"),
            "error: could not write into mlflow sqlite:///m.db (RuntimeError: the server said no)",
        ),
    ],
    ids=["a-library-of-the-tracker", "the-tracker-library", "the-tracker-refuses"],
)
def test_a_tracker_failing_is_one_line(tiny_run, monkeypatch, error: Exception, line: str) -> None:
    """Past the check that the library is there: what stops the write is one line naming it, exit 2."""
    from trace_instrument.traces import cli
    from trace_instrument.traces.render import trackers

    def failing(*_args, **_kwargs):
        raise error

    monkeypatch.setattr(trackers, "open_writer", failing)
    monkeypatch.setattr(trackers, "export_analysis", failing)
    monkeypatch.setattr(cli, "_require_engine", lambda module: None)  # the library is "there"
    result = _export(str(tiny_run), "--to", "mlflow", "sqlite:///m.db")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [line]
