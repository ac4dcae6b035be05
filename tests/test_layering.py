"""The package is layered one way; only the command line imports typer and rich."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parent.parent / "trace_instrument"
LAYERS = {
    "model": 0,
    "spec": 1,
    "locate": 2,
    "edit": 3,
    "engine": 4,
    "formats": 5,
    "cli": 5,
    "__main__": 6,
    "__init__": 0,
}
UI_LIBRARIES = {"typer", "rich", "click"}


def _layer(module: str) -> int:
    parts = module.split(".")
    return LAYERS[parts[1]] if len(parts) > 1 else 0


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
                assert module in ("trace_instrument.cli",), f"{module} imports {name}: only the CLI may"
            own_module = root == "trace_instrument" and name not in ("trace_instrument", "trace_instrument.__version__")
            if own_module and name.split(".")[1] in LAYERS:
                assert _layer(name) <= own, f"{module} (layer {own}) imports {name} (layer {_layer(name)})"
