"""The package is layered one way; only the command line and the renderings import typer and rich."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parent.parent / "trace_instrument"
LAYERS = {
    "model": 0,
    "wheels": 0,  # fetches verl wheels: needs nothing of ours
    "caches": 0,  # cache files keyed by content and the tool's version: needs nothing else of ours
    "spec": 1,
    "selfcheck": 1,  # runs the runtime package in a subprocess
    "locate": 2,
    "edit": 3,
    "engine": 4,
    "render": 5,
    "cli": 6,
    "__main__": 7,
    "__init__": 0,
}
# rich is for the renderings and the command line, typer for the command line alone
ALLOWED_UI = {"rich": ("trace_instrument.cli", "trace_instrument.render"), "typer": ("trace_instrument.cli",)}
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
                allowed = ALLOWED_UI.get(root, ("trace_instrument.cli",))
                assert module.startswith(allowed), f"{module} imports {name}: only {', '.join(allowed)} may"
            own_module = root == "trace_instrument" and name not in ("trace_instrument", "trace_instrument.__version__")
            if own_module and name.split(".")[1] in LAYERS:
                assert _layer(name) <= own, f"{module} (layer {own}) imports {name} (layer {_layer(name)})"
