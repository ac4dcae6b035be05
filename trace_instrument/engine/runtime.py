"""The runtime package (verl/utils/tracing/): its state, installing, updating and removing it.

Each file is as the catalog ships it (`present`), absent (`missing`), as an older
catalog shipped it (`outdated`: the manifest recorded its hash when it was
installed, or the catalog lists the hash among its earlier releases) or edited
by hand (`drifted`: left alone).
"""

from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass
from pathlib import Path

from trace_instrument.engine.files import PendingWrite
from trace_instrument.engine.manifest import Manifest
from trace_instrument.model import TRACING_MODULE, Catalog, RuntimeFile, RuntimeStatus


@dataclass(frozen=True)
class RuntimeState:
    """How the runtime package stands, as far as the points that import it are concerned."""

    complete: bool = True
    problem: str = ""  # what is wrong with it, e.g. "trace.py missing"
    repairable: bool = True  # apply can put it right (files missing or from an older catalog)


# Folders never searched for code that imports the runtime package.
_NOT_CODE = frozenset({".git", ".hg", ".svn", "__pycache__", ".venv", "venv", "node_modules", ".tox", ".mypy_cache"})


@dataclass(frozen=True)
class RuntimePlan:
    """What a run does with one runtime file."""

    file: RuntimeFile
    write: PendingWrite | None = None  # None: nothing to write


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def inspect(root: Path, catalog: Catalog, manifest: Manifest) -> list[RuntimeFile]:
    """The state of every runtime file in the checkout."""
    found = []
    for name, content in catalog.runtime.files:
        relative = f"{catalog.runtime.target_dir}/{name}"
        found.append(RuntimeFile(relative, _status(root / relative, name, content, catalog, manifest)))
    return found


def _status(path: Path, name: str, content: bytes, catalog: Catalog, manifest: Manifest) -> RuntimeStatus:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return RuntimeStatus.MISSING
    except OSError:
        return RuntimeStatus.DRIFTED
    if data == content:
        return RuntimeStatus.PRESENT
    known = {manifest.runtime.get(name), *catalog.runtime.earlier.get(name, ())}
    return RuntimeStatus.OUTDATED if digest(data) in known else RuntimeStatus.DRIFTED


def state_for_points(files: list[RuntimeFile]) -> RuntimeState:
    """Whether the points' code can import the package as the catalog ships it."""
    wrong = [f for f in files if not f.status.ok]  # created or updated by this run counts as there
    if not wrong:
        return RuntimeState()
    problem = ", ".join(f"{f.path.rsplit('/', 1)[-1]} {_describe(f.status)}" for f in wrong)
    repairable = all(f.status in (RuntimeStatus.MISSING, RuntimeStatus.OUTDATED) for f in wrong)
    return RuntimeState(complete=False, problem=problem, repairable=repairable)


def _describe(status: RuntimeStatus) -> str:
    return {
        RuntimeStatus.MISSING: "missing",
        RuntimeStatus.OUTDATED: "from an older release of the tool",
        RuntimeStatus.DRIFTED: "edited by hand",
    }.get(status, status.value)


def plan_install(root: Path, catalog: Catalog, manifest: Manifest) -> list[RuntimePlan]:
    """Create missing files, update outdated ones, leave hand-edited ones alone."""
    plans = []
    for current, (_name, content) in zip(inspect(root, catalog, manifest), catalog.runtime.files):
        if current.status is RuntimeStatus.MISSING:
            plans.append(
                RuntimePlan(RuntimeFile(current.path, RuntimeStatus.CREATED), PendingWrite(current.path, content))
            )
        elif current.status is RuntimeStatus.OUTDATED:
            before = (root / current.path).read_bytes()
            write = PendingWrite(current.path, content, before)
            plans.append(RuntimePlan(RuntimeFile(current.path, RuntimeStatus.UPDATED), write))
        else:
            plans.append(RuntimePlan(current))
    return plans


def plan_remove(
    root: Path, catalog: Catalog, manifest: Manifest, users: tuple[str, ...], force: bool
) -> list[RuntimePlan]:
    """Remove the package, whole, unless code still imports it or a file of it was edited by hand."""
    present = [f for f in inspect(root, catalog, manifest) if f.status is not RuntimeStatus.MISSING]
    if users:
        return [RuntimePlan(RuntimeFile(f.path, RuntimeStatus.KEPT_IN_USE, users)) for f in present]
    edited = any(f.status is RuntimeStatus.DRIFTED for f in present)
    if edited and not force:
        # half a package is worse than none removed: keep it whole, and say why
        return [RuntimePlan(RuntimeFile(f.path, RuntimeStatus.KEPT_EDITED)) for f in present]
    return [RuntimePlan(RuntimeFile(f.path, RuntimeStatus.REMOVED), PendingWrite(f.path, None)) for f in present]


def importers(root: Path, catalog: Catalog, leaving: dict[str, str | None]) -> tuple[str, ...]:
    """Python files in the checkout that import the runtime package (after this run's changes).

    `leaving` maps paths this run rewrites to their new text (None: deleted).
    """
    package = TRACING_MODULE.encode()
    parent, _, leaf = TRACING_MODULE.rpartition(".")
    runtime_dir = root / catalog.runtime.target_dir
    found = []
    for path in _python_files(root):
        if path.is_relative_to(runtime_dir):
            continue
        relative = path.relative_to(root).as_posix()
        if relative in leaving:
            text = leaving[relative]
            data = text.encode() if text is not None else b""
        else:
            try:
                data = path.read_bytes()
            except OSError:
                continue
        if (package in data or leaf.encode() in data) and _imports(data, _package_of(relative), parent, leaf):
            found.append(relative)
    return tuple(found)


def _python_files(root: Path) -> list[Path]:
    found = []
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            entries = list(folder.iterdir())
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir() and not entry.is_symlink():
                if entry.name not in _NOT_CODE:
                    stack.append(entry)
            elif entry.suffix == ".py" and entry.is_file():
                found.append(entry)
    return sorted(found)


def _package_of(relative: str) -> str:
    """The package a module file belongs to (verl/utils/mine.py -> verl.utils)."""
    return ".".join(relative.split("/")[:-1])


def _absolute(node: ast.ImportFrom, package: str) -> str | None:
    """The module an ImportFrom names, relative levels resolved against the file's package."""
    if node.level == 0:
        return node.module or ""
    parts = package.split(".") if package else []
    if node.level - 1 > len(parts):
        return None  # beyond the top: Python would refuse it too
    base = parts[: len(parts) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _imports(data: bytes, package: str, parent: str, leaf: str) -> bool:
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError):
        return TRACING_MODULE.encode() in data or leaf.encode() in data  # cannot tell: assume it does
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = _absolute(node, package)
            if module == TRACING_MODULE or (module or "").startswith(TRACING_MODULE + "."):
                return True
            if module == parent and any(alias.name == leaf for alias in node.names):
                return True
        elif isinstance(node, ast.Import) and any(
            alias.name == TRACING_MODULE or alias.name.startswith(TRACING_MODULE + ".") for alias in node.names
        ):
            return True
    return False
