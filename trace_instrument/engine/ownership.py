"""Whose the runtime package's place (verl/utils/tracing) is, and what Python imports from it.

The tool's own files are known by the evidence it keeps (engine.runtime judges each runtime file:
the bytes the catalog ships, the hashes of earlier releases, the manifest's record of what apply
installed). Everything else that is where the package goes, or that has the import name of the
package or of one of its modules, is not the tool's (`not-ours`): apply refuses to install while it
is there, remove never deletes it, check and verify fail. That is:

- on the way from the checkout to the package's folder, a link leading out of the checkout, to
  nothing or round in a loop, or a file where a folder goes (a link inside the checkout is followed,
  as it is to the catalog's files); a link in the package's own place, or in a runtime file's: the
  tool never makes one;
- a folder there holding files, none of them the tool's, with no install recorded in the manifest;
- any other module, package, namespace folder, extension or bytecode with the import name of the
  package (`verl/utils/tracing.py` next to it) or of one of its modules (`trace/` next to `trace.py`):
  Python imports one file under one name, so one of the two can never be imported;
- bytecode in `__pycache__` Python would load instead of an installed file, compiled from other code
  (`stale-bytecode`).

Which file Python imports is asked of Python itself: importlib.machinery.FileFinder with the
standard loaders (a regular package first, then extension modules, sources, bytecode).
"""

from __future__ import annotations

import importlib.util
import marshal
import os
import sys
from importlib import machinery
from pathlib import Path

from trace_instrument.engine.files import is_staged
from trace_instrument.model import RuntimeFile, RuntimeStatus

# Python's own loaders, in the order its path finder tries them
LOADERS = (
    (machinery.ExtensionFileLoader, machinery.EXTENSION_SUFFIXES),
    (machinery.SourceFileLoader, machinery.SOURCE_SUFFIXES),
    (machinery.SourcelessFileLoader, machinery.BYTECODE_SUFFIXES),
)
# Extension modules built for another interpreter (trace.cpython-310-x86_64-linux-gnu.so): the Python
# that runs verl need not be the one running this tool, and there they win over the source.
OTHER_EXTENSIONS = (".so", ".pyd")
CACHE = "__pycache__"
# A runtime file in one of these states is the tool's.
OURS = frozenset({RuntimeStatus.PRESENT, RuntimeStatus.OUTDATED, RuntimeStatus.DRIFTED})
_HASH_BASED, _CHECK_SOURCE = 0b01, 0b10  # the flags of a .pyc header (PEP 552)
_OPTIMIZATION = {"": 0, "opt-1": 1, "opt-2": 2}


def place_problem(root: Path, target_dir: str) -> RuntimeFile | None:
    """Why the package's folder cannot be the tool's, from the folders on the way to it (None: it can):
    a link that leads out of the checkout, to nothing or round in a loop, a file where a folder goes,
    or a link in the package's own place (the tool never makes one: what it leads to is someone else's,
    maybe imported under another name, and the tool would write and delete there)."""
    current = root
    for part in target_dir.split("/"):
        current = current / part
        relative = current.relative_to(root).as_posix()
        problem = link_problem(root, current, relative, "folder")
        if problem is None and relative == target_dir and current.is_symlink():
            problem = own_link(relative, current, "folder")
        if problem is not None:
            return _not_ours(relative, problem)
        if not current.exists():
            return None  # apply makes the rest
        if not current.is_dir():
            where = (
                "the runtime package's folder" if relative == target_dir else f"a folder on the way to {target_dir}/"
            )
            return _not_ours(relative, f"{relative} is a file where {where} goes: move it away")
    return None


def link_problem(root: Path, path: Path, relative: str, what: str) -> str | None:
    """Why a link cannot be followed to write or delete through it (None: not a link, or one that
    stays inside the checkout)."""
    if not path.is_symlink():
        return None
    try:
        resolved = path.resolve(strict=True)
    except FileNotFoundError:
        return f"{relative} is a link to {os.readlink(path)}, which does not exist: delete the link"
    except (OSError, RuntimeError):
        return f"{relative} is a link that leads round in a loop: delete it"
    if not resolved.is_relative_to(root):
        return (
            f"{relative} is a link to {resolved}, outside the checkout, and trace-instrument never writes "
            f"or deletes through one: replace the link with the {what} itself, or delete it"
        )
    return None


def own_link(relative: str, path: Path, what: str) -> str:
    """Why a link where the tool puts a file or folder of its own is not the tool's."""
    return (
        f"{relative} is a link to {os.readlink(path)}, which trace-instrument did not make: it installs its "
        f"runtime only as a {what} of its own, and never writes or deletes where a link there leads; replace "
        f"the link with the {what} itself, or delete it"
    )


def foreign_folder(root: Path, target_dir: str, files: list[RuntimeFile], recorded: bool) -> RuntimeFile | None:
    """The package's folder, when it holds files and none is the tool's, nor does the manifest record
    an install (`recorded`): a package of the fork's own (None otherwise)."""
    folder = root / target_dir
    if recorded or any(f.status in OURS for f in files) or not folder.is_dir():
        return None
    try:
        names = sorted(n for n in os.listdir(folder) if n != CACHE and not is_staged(n))
    except OSError as exc:
        return _not_ours(target_dir, f"{target_dir}/ cannot be read ({exc.strerror}): make it readable")
    if not names:
        return None  # an empty folder: apply fills it
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    module = target_dir.replace("/", ".")
    return _not_ours(
        target_dir,
        f"{target_dir}/ is not trace-instrument's: a folder holding {shown}, none of them a file of its "
        f"runtime, and .trace-instrument.json records no install there; trace-instrument installs its "
        f"runtime package as {module}, which the instrumented code imports: move or rename your package "
        "(and what imports it)",
    )


def import_problems(
    root: Path, target_dir: str, files: list[RuntimeFile], shipped: dict[str, bytes]
) -> list[RuntimeFile]:
    """An item for everything that keeps the package from importing as installed: every other module,
    package, folder, extension or bytecode with the import name of the package or of one of its
    modules, and stale bytecode Python would load instead of an installed file (or, for a file apply
    is to create, instead of what it writes: `shipped` maps each file's path to those bytes)."""
    package = root / target_dir
    dotted = target_dir.replace("/", ".")
    init = package / "__init__.py"
    problems = _rivals(root, package.parent, package.name, dotted, init, exact_is_ours=True)
    package_finder = machinery.FileFinder(str(package), *LOADERS)
    for file in files:
        path = root / file.path
        if path.parent != package or path.suffix != ".py":
            continue
        stem = path.stem
        fullname = dotted if stem == "__init__" else f"{dotted}.{stem}"
        # a folder named __init__ is nothing to Python; one named like a module is a package or namespace
        problems += _rivals(root, package, stem, fullname, path, exact_is_ours=stem == "__init__")
        stale = _stale_for(path, file.status, shipped.get(file.path))
        if stale is not None:
            problems.append(stale_item(root, path, *stale))
        if file.status not in OURS:
            continue
        origin = _origin(package.parent, dotted) if stem == "__init__" else _finder_origin(package_finder, fullname)
        if (
            origin is not None
            and origin != path
            and not any(root / p.path in (origin, origin.parent) for p in problems)
        ):
            problems.append(_winner(root, origin, fullname, file.path))  # by a rule the rivals above missed
    return problems


def _stale_for(path: Path, status: RuntimeStatus, shipped: bytes | None) -> tuple[Path, str] | None:
    """Stale bytecode for a file of the tool's (against its bytes) or one apply is to create (against
    the bytes it writes; only bytecode that never looks at the source's time can be taken for it)."""
    if status in OURS:
        try:
            return stale_bytecode(path, path.read_bytes(), path.stat())
        except OSError:
            return None
    if status is RuntimeStatus.MISSING and shipped is not None:
        return stale_bytecode(path, shipped, None)
    return None


# -- what Python imports ------------------------------------------------------------------------------


def _origin(folder: Path, fullname: str) -> Path | None:
    return _finder_origin(machinery.FileFinder(str(folder), *LOADERS), fullname)


def _finder_origin(finder: machinery.FileFinder, fullname: str) -> Path | None:
    """The file Python's path finder picks for the module in the finder's folder (None: a namespace
    folder or nothing)."""
    try:
        spec = finder.find_spec(fullname)
    except (OSError, ValueError):
        return None
    return Path(spec.origin) if spec is not None and spec.origin else None


def _rivals(root: Path, folder: Path, stem: str, fullname: str, ours: Path, exact_is_ours: bool) -> list[RuntimeFile]:
    """Entries of `folder` Python could import as `fullname` other than `ours` (the runtime's file;
    the package's folder itself when `exact_is_ours`)."""
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    suffixes = set(machinery.all_suffixes())
    rivals = []
    for name in names:
        entry = folder / name
        if entry == ours or (name == stem and exact_is_ours):
            continue
        if name.startswith(stem) and _importable_as(entry, name[len(stem) :], suffixes):
            rivals.append(_rival_item(root, entry, fullname, ours))
    return rivals


def _importable_as(entry: Path, rest: str, suffixes: set[str]) -> bool:
    """Is `entry`, named the module's name followed by `rest`, something Python imports under that name?
    A folder of that name (a package, or a namespace package), or a file with a module suffix."""
    if rest == "":
        return entry.is_dir()
    return entry.is_file() and (rest in suffixes or (rest.startswith(".") and rest.endswith(OTHER_EXTENSIONS)))


def _rival_item(root: Path, entry: Path, fullname: str, ours: Path) -> RuntimeFile:
    relative = entry.relative_to(root).as_posix()
    shown = relative + "/" if entry.is_dir() else relative
    kind = _kind(entry)
    package = ours.name == "__init__.py"
    # the package is the folder the instrumented code imports; a module is one file of it
    ours_shown = ours.parent.relative_to(root).as_posix() + "/" if package else ours.relative_to(root).as_posix()
    role = "trace-instrument's runtime package" if package else "a module of trace-instrument's runtime package"
    winner = _origin(ours.parent.parent if package else ours.parent, fullname)
    if winner is not None and entry in (winner, winner.parent):
        verdict = (
            f"Python imports it instead of {ours_shown}"
            if ours.exists()
            else f"Python would import it instead of {ours_shown}"
        )
    elif winner == ours:
        verdict = f"Python imports {ours_shown} instead, so this {kind} cannot be imported"
    else:
        verdict = "Python imports one file under one name, so one of them cannot be imported"
    return _not_ours(
        relative,
        f"{shown} is not trace-instrument's: a {kind} named {fullname}, the name of {role} ({ours_shown}); "
        f"{verdict}: rename or move it (and what imports it)",
    )


def _winner(root: Path, origin: Path, fullname: str, ours: str) -> RuntimeFile:
    relative = origin.relative_to(root).as_posix() if origin.is_relative_to(root) else str(origin)
    return _not_ours(
        relative, f"{relative} is not trace-instrument's: Python imports it as {fullname} instead of {ours}: move it"
    )


def _kind(entry: Path) -> str:
    if entry.is_dir():
        regular = any((entry / f"__init__{suffix}").is_file() for suffix in machinery.all_suffixes())
        return "package" if regular else "folder (a namespace package)"
    if entry.suffix in machinery.SOURCE_SUFFIXES:
        return "module"
    if entry.suffix in machinery.BYTECODE_SUFFIXES:
        return "compiled module"
    if entry.name.endswith(OTHER_EXTENSIONS):
        return "extension module"
    return "file"


# -- bytecode ------------------------------------------------------------------------------------------


def stale_bytecode(source: Path, data: bytes, stat: os.stat_result | None) -> tuple[Path, str] | None:
    """Bytecode in __pycache__ that Python loads instead of compiling `source` (holding `data`, with
    `stat`; None: not written yet), compiled from other code, and what makes Python take it (None:
    there is none)."""
    cache = source.parent / CACHE
    try:
        names = sorted(os.listdir(cache))
    except OSError:
        return None
    prefix = source.stem + "."
    for name in names:
        if not name.startswith(prefix) or not name.endswith(".pyc"):
            continue
        parts = name[len(prefix) : -len(".pyc")].split(".")  # the tag, and an optimization level
        if not 1 <= len(parts) <= 2:
            continue
        optimization = parts[1] if len(parts) == 2 else ""
        if optimization not in _OPTIMIZATION:
            continue
        why = _bytecode_problem(cache / name, parts[0], _OPTIMIZATION[optimization], stat, data, source)
        if why is not None:
            return cache / name, why
    return None


def _bytecode_problem(
    pyc: Path, tag: str, optimize: int, stat: os.stat_result | None, data: bytes, source: Path
) -> str | None:
    """Why Python would run this bytecode rather than the source, though it is not the source's."""
    try:
        blob = pyc.read_bytes()
    except OSError:
        return None
    if len(blob) < 16:
        return None  # Python rejects it and compiles the source
    ours = tag == sys.implementation.cache_tag
    flags = int.from_bytes(blob[4:8], "little")
    if (ours and blob[:4] != importlib.util.MAGIC_NUMBER) or flags & ~(_HASH_BASED | _CHECK_SOURCE):
        return None  # rejected: the source is compiled instead
    if not flags & _HASH_BASED:
        mtime, size = int.from_bytes(blob[8:12], "little"), int.from_bytes(blob[12:16], "little")
        if stat is None or (mtime, size) != (int(stat.st_mtime) & 0xFFFFFFFF, stat.st_size & 0xFFFFFFFF):
            return None  # out of date by its stamp: Python compiles the source again
        taken = "stamped with the source's time and size"
    elif flags & _CHECK_SOURCE:
        if not ours or blob[8:16] != importlib.util.source_hash(data):
            return None  # checked against the source's hash on every import
        taken = "stamped with the source's hash"
    elif not ours:
        return f"compiled by another Python ({tag}) and marked never to be checked against the source"
    else:
        taken = "marked never to be checked against the source"
    if not ours:
        return None  # another Python's bytecode, tied to the source by its stamp as Python ties it
    try:
        code = marshal.loads(blob[16:])
        compiled = compile(data, str(source), "exec", dont_inherit=True, optimize=optimize)
    except (EOFError, ValueError, TypeError, SyntaxError):
        return f"{taken}, and unreadable"
    return None if code == compiled else f"{taken}, but compiled from other code"


def stale_item(root: Path, source: Path, pyc: Path, why: str) -> RuntimeFile:
    relative = pyc.relative_to(root).as_posix()
    return RuntimeFile(
        relative,
        RuntimeStatus.STALE_BYTECODE,
        detail=f"{relative}: Python loads this bytecode instead of {source.name}; it is {why}: delete it "
        "(Python compiles the source again)",
    )


def _not_ours(relative: str, detail: str) -> RuntimeFile:
    return RuntimeFile(relative, RuntimeStatus.NOT_OURS, detail=detail)
