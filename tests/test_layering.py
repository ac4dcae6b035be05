"""The package is layered one way; only the command lines and the renderers import typer and rich.

Two stacks share ``model`` (and the small top-level helpers): the codemod (spec <- locate <- edit <-
engine <- render) and the trace reader (``traces``, with its renderers in ``traces.render``);
neither imports the other.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parent.parent / "trace_instrument"
LAYERS = {
    "model": 0,
    "caches": 0,  # the tool's cache folder: needs nothing of ours but the version
    "wheels": 0,  # fetches verl wheels
    "spec": 1,
    "selfcheck": 1,  # runs the runtime package in a subprocess
    "locate": 2,
    "edit": 3,
    "engine": 4,
    "traces": 4,
    "render": 5,
    "cli": 6,
    "cli_traces": 6,
    "__main__": 7,
    "__init__": 0,
}
UI_LIBRARIES = {"typer", "rich", "click"}
# rich is for renderers and command lines, typer for the command lines alone
UI_MODULES = {
    "rich": (
        "trace_instrument.cli",
        "trace_instrument.cli_traces",
        "trace_instrument.render",
        "trace_instrument.traces.render",
    ),
    "typer": ("trace_instrument.cli", "trace_instrument.cli_traces"),
    "click": ("trace_instrument.cli", "trace_instrument.cli_traces"),
}
CODEMOD = {"spec", "locate", "edit", "engine", "render", "selfcheck"}
RENDER_LAYER = 5


def _layer(module: str) -> int:
    parts = module.split(".")
    if parts[1:3] == ["traces", "render"]:
        return RENDER_LAYER
    return LAYERS[parts[1]] if len(parts) > 1 else 0


def _may_import_ui(module: str, library: str) -> bool:
    return any(module == m or module.startswith(m + ".") for m in UI_MODULES[library])


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE.parent).with_suffix("")
        yield pytest.param(path, ".".join(relative.parts).removesuffix(".__init__"), id=str(relative))


@pytest.mark.parametrize(("path", "module"), list(_modules()))
def test_imports_only_point_down(path: Path, module: str):
    own = _layer(module) if module != "trace_instrument" else 0
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names if node.module == "trace_instrument"]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            root = name.split(".")[0]
            if root in UI_LIBRARIES:
                assert _may_import_ui(module, root), f"{module} imports {name}: only {UI_MODULES[root]} may"
            own_module = root == "trace_instrument" and name not in ("trace_instrument", "trace_instrument.__version__")
            if own_module and name.split(".")[1] in LAYERS:
                assert _layer(name) <= own, f"{module} (layer {own}) imports {name} (layer {_layer(name)})"
                _assert_stacks_apart(module, name)


def _assert_stacks_apart(module: str, name: str) -> None:
    """The trace reader and the codemod meet only in model (and in the command line on top)."""
    mine, theirs = module.split(".")[1:2], name.split(".")[1]
    if mine == ["traces"]:
        assert theirs not in CODEMOD, f"{module} imports {name}: the trace reader uses no codemod layer"
    if mine and mine[0] in CODEMOD:
        assert theirs not in ("traces", "cli_traces"), f"{module} imports {name}: the codemod never reads traces"


@pytest.mark.slow
def test_check_never_loads_libcst():
    """check reads with Python's ast only: LibCST is imported by the commands that edit."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from trace_instrument.cli import app\n"
        "from trace_instrument.engine.check import check\n"
        "assert not [m for m in sys.modules if m.startswith('libcst')], 'LibCST was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.slow
def test_a_check_whose_files_are_cached_loads_neither_the_analysis_nor_yaml(checkout_090, tmp_path):
    """A pre-commit run on unchanged files reads cached results: no ast walk, no spec reading."""
    import os
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from trace_instrument.cli import app\n"
        "try:\n"
        "    app([*sys.argv[1:], '--quiet'])\n"
        "except SystemExit as exc:\n"
        "    assert exc.code == 0, exc.code\n"
        "loaded = [m for m in sys.modules if m.split('.')[0] in ('libcst', 'yaml')\n"
        "          or m.startswith(('trace_instrument.locate', 'trace_instrument.engine.analysis'))]\n"
        "print('LOADED:' + ','.join(sorted(loaded)))\n"
    )
    env = {**os.environ, "TRACE_INSTRUMENT_CACHE": str(tmp_path / "cache")}
    env.pop("TRACE_INSTRUMENT_NO_CACHE", None)
    subprocess.run(
        [sys.executable, "-m", "trace_instrument", "apply", checkout_090], env=env, check=True, capture_output=True
    )

    def loaded_by_check() -> set[str]:
        run = subprocess.run([sys.executable, "-c", code, "check", str(checkout_090)], env=env, text=True,
                             capture_output=True, check=True)  # fmt: skip
        (line,) = [row for row in run.stdout.splitlines() if row.startswith("LOADED:")]
        return set(filter(None, line.removeprefix("LOADED:").split(",")))

    first = loaded_by_check()
    assert "trace_instrument.engine.analysis" in first, "the first check analyses the files"
    assert not {m for m in first if m.startswith("libcst")}
    assert loaded_by_check() == set(), "the second check reads only cached results"
