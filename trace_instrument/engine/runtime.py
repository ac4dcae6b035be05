"""The runtime package (verl/utils/tracing/): its state, installing, updating and removing it.

Each file is as the catalog ships it (`present`), absent (`missing`), as an older
catalog shipped it (`outdated`: the manifest recorded its hash when it was
installed, or the catalog lists the hash among its earlier releases), edited by
hand (`drifted`: the manifest records apply installed it; left alone), or not the
tool's at all (`not-ours`: no evidence it ever wrote it). What else keeps the
package from being the tool's, or from importing as installed, is engine.ownership's
judgement: while any of it is there apply refuses, and remove deletes only the
tool's own files.
"""

from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass
from pathlib import Path

from trace_instrument.engine import ownership
from trace_instrument.engine.files import PendingWrite
from trace_instrument.engine.manifest import Manifest
from trace_instrument.model import (
    TRACING_MODULE,
    Catalog,
    ChangeKind,
    RunError,
    RunErrorKind,
    RuntimeFile,
    RuntimeStatus,
)
from trace_instrument.spec.code import absolute_module


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


# Items that stop apply: something there is not the tool's, or Python would not import the package as installed.
BLOCKING = frozenset({RuntimeStatus.NOT_OURS, RuntimeStatus.STALE_BYTECODE})


def inspect(root: Path, catalog: Catalog, manifest: Manifest) -> list[RuntimeFile]:
    """The state of every runtime file in the checkout, and an item for whatever there is not the
    tool's or keeps the package from importing as installed (engine.ownership). While such an item
    is there, the files still missing are left out: apply would not put them back."""
    target = catalog.runtime.target_dir
    if not catalog.runtime.files:
        return []
    place = ownership.place_problem(root, target)
    if place is not None:
        return [place]  # nothing behind it is looked at: it is not the checkout's, or not a folder
    files = [
        _file(root, f"{target}/{name}", content, catalog.runtime.earlier.get(name, ()), manifest.runtime.get(name))
        for name, content in catalog.runtime.files
    ]
    folder = ownership.foreign_folder(root, target, files, bool(manifest.runtime))
    if folder is not None:
        return [folder]
    shipped = {f"{target}/{name}": content for name, content in catalog.runtime.files}
    found = files + ownership.import_problems(root, target, files, shipped)
    if any(f.status in BLOCKING for f in found):
        found = [f for f in found if f.status is not RuntimeStatus.MISSING]
    return found


def _file(root: Path, relative: str, content: bytes, earlier: tuple[str, ...], recorded: str | None) -> RuntimeFile:
    """One runtime file, judged by the evidence the tool keeps: the bytes it ships, the hashes of its
    earlier releases and the manifest's record of what apply installed there (`recorded`)."""
    path = root / relative
    if path.is_symlink():  # the tool writes its files as files: a link there is someone else's
        link = ownership.link_problem(root, path, relative, "file") or ownership.own_link(relative, path, "file")
        return RuntimeFile(relative, RuntimeStatus.NOT_OURS, detail=link)
    if not path.exists():
        return RuntimeFile(relative, RuntimeStatus.MISSING)
    try:
        data = path.read_bytes()
    except OSError as exc:
        problem = "a folder" if path.is_dir() else f"unreadable ({exc.strerror})"
        detail = f"{relative} is {problem}, where a runtime file goes: nothing says it is trace-instrument's; move it"
        return RuntimeFile(relative, RuntimeStatus.NOT_OURS, detail=detail)
    if data == content:
        return RuntimeFile(relative, RuntimeStatus.PRESENT)
    if digest(data) in {recorded, *earlier}:
        return RuntimeFile(relative, RuntimeStatus.OUTDATED)
    if recorded is not None:
        return RuntimeFile(relative, RuntimeStatus.DRIFTED)  # apply installed it; edited since
    return RuntimeFile(relative, RuntimeStatus.NOT_OURS, detail=_foreign_file(relative))


def _foreign_file(relative: str) -> str:
    folder, _, name = relative.rpartition("/")
    return (
        f"{relative} is not trace-instrument's: its bytes are no release of the runtime's {name}, and "
        f".trace-instrument.json records no install of it; if it is your own module, move it out of {folder}/ "
        f"(the instrumented code imports {TRACING_MODULE}); if it is trace-instrument's, edited by hand, "
        "delete it and `trace-instrument apply` puts it back"
    )


def refusal(files: list[RuntimeFile]) -> RunError | None:
    """Why apply may not install the package (None: it may), naming each path and the way out."""
    blocking = [f for f in files if f.status in BLOCKING]
    if not blocking:
        return None
    lines = "".join(f"\n  - {f.detail}" for f in blocking)
    message = (
        f"nothing written: trace-instrument installs its runtime package only where all it finds is its own:{lines}"
        "\nthen run `trace-instrument apply` again"
    )
    return RunError(RunErrorKind.RUNTIME_NOT_OURS, message)


def state_for_points(files: list[RuntimeFile]) -> RuntimeState:
    """Whether the points' code can import the package as the catalog ships it."""
    wrong = [f for f in files if not f.status.ok]  # created or updated by this run counts as there
    if not wrong:
        return RuntimeState()
    problem = ", ".join(_describe(f) for f in wrong)
    repairable = all(f.status in (RuntimeStatus.MISSING, RuntimeStatus.OUTDATED) for f in wrong)
    return RuntimeState(complete=False, problem=problem, repairable=repairable)


def _describe(file: RuntimeFile) -> str:
    if file.status is RuntimeStatus.NOT_OURS:
        return f"{file.path} is in its way, and not trace-instrument's"
    if file.status is RuntimeStatus.STALE_BYTECODE:
        return f"{file.path} is stale bytecode Python loads instead of the installed file"
    what = {
        RuntimeStatus.MISSING: "missing",
        RuntimeStatus.OUTDATED: "from an older release of the tool",
        RuntimeStatus.DRIFTED: "edited by hand",
    }.get(file.status, file.status.value)
    return f"{file.path.rsplit('/', 1)[-1]} {what}"


def plan_install(root: Path, catalog: Catalog, found: list[RuntimeFile]) -> list[RuntimePlan]:
    """Create missing files, update outdated ones, leave hand-edited ones alone (`found`: inspect's
    items, none of them blocking: the caller refuses first)."""
    shipped = {f"{catalog.runtime.target_dir}/{name}": content for name, content in catalog.runtime.files}
    plans = []
    for current in found:
        content = shipped.get(current.path)
        if content is not None and current.status is RuntimeStatus.MISSING:
            write = PendingWrite(current.path, content, kind=ChangeKind.RUNTIME)
            plans.append(RuntimePlan(RuntimeFile(current.path, RuntimeStatus.CREATED), write))
        elif content is not None and current.status is RuntimeStatus.OUTDATED:
            before = (root / current.path).read_bytes()
            write = PendingWrite(current.path, content, before, ChangeKind.RUNTIME)
            plans.append(RuntimePlan(RuntimeFile(current.path, RuntimeStatus.UPDATED), write))
        else:
            plans.append(RuntimePlan(current))
    return plans


def plan_remove(catalog: Catalog, found: list[RuntimeFile], users: tuple[str, ...], force: bool) -> list[RuntimePlan]:
    """Remove the tool's files of the package, whole, unless code still imports it or a file of it was
    edited by hand (`force` removes those too). What is not the tool's is never deleted: a fork's file
    where a runtime file goes or the place itself is reported as left alone, and so are the modules
    that clash with the package's names, while the package stays."""
    ours = [f for f in found if f.status in ownership.OURS]
    if users:
        plans = [RuntimePlan(RuntimeFile(f.path, RuntimeStatus.KEPT_IN_USE, users)) for f in ours]
    elif any(f.status is RuntimeStatus.DRIFTED for f in ours) and not force:
        # half a package is worse than none removed: keep it whole, and say why
        plans = [RuntimePlan(RuntimeFile(f.path, RuntimeStatus.KEPT_EDITED)) for f in ours]
    else:
        plans = [
            RuntimePlan(RuntimeFile(f.path, RuntimeStatus.REMOVED), PendingWrite(f.path, None, kind=ChangeKind.RUNTIME))
            for f in ours
        ]
    staying = bool(plans) and plans[0].file.status is not RuntimeStatus.REMOVED
    target = catalog.runtime.target_dir
    own_paths = {f"{target}/{name}" for name, _ in catalog.runtime.files}
    for item in found:
        # a clash with a module of the package's ends with the package; a fork's file in its place does not
        clash = item.path not in own_paths and item.path != target and not target.startswith(item.path + "/")
        if item.status is RuntimeStatus.NOT_OURS and (staying or not clash):
            plans.append(RuntimePlan(item))
    return plans


def importers(root: Path, catalog: Catalog, leaving: dict[str, str | None], ours: frozenset[str]) -> tuple[str, ...]:
    """Python files in the checkout that import the runtime package (after this run's changes), the
    package's own files (`ours`) left out: a file of the fork's inside the package's folder counts.

    `leaving` maps paths this run rewrites to their new text (None: deleted).
    """
    package = TRACING_MODULE.encode()
    parent, _, leaf = TRACING_MODULE.rpartition(".")
    names = _runtime_names(catalog)
    runtime_dir = root / catalog.runtime.target_dir
    found = []
    for path in _python_files(root):
        relative = path.relative_to(root).as_posix()
        if relative in ours:
            continue
        if relative in leaving:
            text = leaving[relative]
            data = text.encode() if text is not None else b""
        else:
            try:
                data = path.read_bytes()
            except OSError:
                continue
        # inside the package, `from .trace import ...` names neither the package nor its folder
        named = package in data or leaf.encode() in data or path.is_relative_to(runtime_dir)
        if named and _imports(data, _package_of(relative), parent, leaf, names):
            found.append(relative)
    return tuple(found)


def _runtime_names(catalog: Catalog) -> frozenset[str]:
    """What `from verl.utils.tracing import NAME` can take from the runtime package: the names its
    __init__.py binds at the top, and its modules (`*` takes them all)."""
    names = {"*"}
    for name, content in catalog.runtime.files:
        stem = name.removesuffix(".py")
        if stem != "__init__":
            names.add(stem)
            continue
        try:
            tree = ast.parse(content)
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    return frozenset(names)


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


def _imports(data: bytes, package: str, parent: str, leaf: str, names: frozenset[str]) -> bool:
    """Does the file import the runtime package (or one of its modules)? A file that takes from
    `verl.utils.tracing` only names the runtime does not have (`names`) imports a module of the
    fork's by that name, not ours; `import verl.utils.tracing` cannot be told apart, so it counts."""
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError):
        return TRACING_MODULE.encode() in data or leaf.encode() in data  # cannot tell: assume it does
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = absolute_module(node, package) or ""
            if module == TRACING_MODULE and any(alias.name in names for alias in node.names):
                return True
            if module.startswith(TRACING_MODULE + ".") and _ours(module, names):
                return True
            if module == parent and any(alias.name == leaf for alias in node.names):
                return True
        elif isinstance(node, ast.Import) and any(
            alias.name == TRACING_MODULE or (alias.name.startswith(TRACING_MODULE + ".") and _ours(alias.name, names))
            for alias in node.names
        ):
            return True
    return False


def _ours(module: str, names: frozenset[str]) -> bool:
    """Is `verl.utils.tracing.X...` a module of the runtime's (X one of its modules)?"""
    return module.removeprefix(TRACING_MODULE + ".").split(".")[0] in names
