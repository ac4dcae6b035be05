"""The package is layered one way; only the command lines and the renderers import typer and rich.

Two stacks share ``model`` (and the small top-level helpers): the codemod (spec <- locate <- edit <-
engine <- render <- cli) and the trace reader (``traces``, with its renderers in ``traces.render``
and its command line in ``traces.cli``); neither imports the other. No two modules import each
other, however indirectly, at module level or inside a function.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parent.parent / "trace_instrument"
LAYERS = {
    "model": 0,
    "caches": 0,  # the tool's cache folder: needs nothing of ours but the version
    "data": 0,  # where the shipped anchors/ and templates/ are
    "formats": 0,  # the trace files' format, loaded from the runtime's templates
    "wheels": 0,  # fetches verl wheels
    "spec": 1,
    "selfcheck": 1,  # runs the runtime package in a subprocess
    "locate": 2,
    "edit": 3,
    "engine": 4,
    "traces": 4,
    "render": 5,
    "cli": 6,
    "__main__": 7,
    "__init__": 0,
}
UI_LIBRARIES = {"typer", "rich", "click"}
# rich is for renderers and command lines, typer for the command lines alone
UI_MODULES = {
    "rich": (
        "trace_instrument.cli",
        "trace_instrument.traces.cli",
        "trace_instrument.render",
        "trace_instrument.traces.render",
    ),
    "typer": ("trace_instrument.cli", "trace_instrument.traces.cli"),
    "click": ("trace_instrument.cli", "trace_instrument.traces.cli"),
}
CODEMOD = {"spec", "locate", "edit", "engine", "render", "selfcheck"}
RENDER_LAYER = 5
CLI_LAYER = 6


def _layer(module: str) -> int:
    parts = module.split(".")
    if parts[1:3] == ["traces", "render"]:
        return RENDER_LAYER
    if parts[1:3] == ["traces", "cli"]:
        return CLI_LAYER
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
        assert theirs != "traces", f"{module} imports {name}: the codemod never reads traces"


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


def _module_names() -> dict[str, Path]:
    return {module: path for path, module in (p.values for p in _modules())}


def _imported(node: ast.Import | ast.ImportFrom, module: str, path: Path, known: set[str]) -> set[str]:
    """Our modules an import statement loads: its module, or the submodules it names."""
    if isinstance(node, ast.Import):
        candidates = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:  # relative: from the importing module's package
            package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
            base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
        submodules = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in known]
        candidates = submodules if len(submodules) == len(node.names) else [base, *submodules]
    found = set()
    for name in candidates:
        while name and name not in known:  # `import a.b.c` of an attribute: the module that holds it
            name = name.rpartition(".")[0]
        if name:
            found.add(name)
    return found


def import_graph() -> dict[str, set[str]]:
    """module -> our modules it imports, from every import statement anywhere in its file (in
    functions and under TYPE_CHECKING too: a cycle hidden in a function is still a cycle)."""
    modules = _module_names()
    known = set(modules)
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                edges |= _imported(node, module, path, known)
        graph[module] = edges - {module}
    return graph


def strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's strongly connected components of more than one module (iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def test_no_two_modules_import_each_other():
    """Not even through a function-level import: such a cycle means a shared piece belongs lower."""
    cycles = [sorted(c) for c in strongly_connected(import_graph())]
    assert cycles == [], f"modules that import each other: {cycles}"


def test_the_cycle_finder_sees_a_cycle_through_a_function_level_import(tmp_path):
    """The check can fail: two modules, one importing the other inside a function, are a cycle."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert [sorted(c) for c in strongly_connected(graph)] == [["a", "b", "c"]]
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "one.py").write_text("from pkg.two import f\n")
    (package / "two.py").write_text("def f():\n    from pkg import one\n")
    edges = {
        name: _imported(node, name, package / f"{name.split('.')[1]}.py", {"pkg", "pkg.one", "pkg.two"})
        for name in ("pkg.one", "pkg.two")
        for node in ast.walk(ast.parse((package / f"{name.split('.')[1]}.py").read_text()))
        if isinstance(node, (ast.Import, ast.ImportFrom))
    }
    assert edges == {"pkg.one": {"pkg.two"}, "pkg.two": {"pkg.one"}}
