"""Whose `verl/utils/tracing` is: the tool installs, judges and deletes only what it wrote.

One case per ownership situation, on a small checkout (four files of verl 0.9.0, three points, one of
them importing the runtime) made either from the pristine files or after a first apply. For each:
apply refuses and writes no byte (whole trees compared, links and a folder outside the checkout
included), check fails naming the path, verify fails on it, and remove and remove --force leave every
file of the fork's as it was. Then the cases where what is there is the tool's, or the fork's beside
it (an extra module, a link inside the checkout, ordinary bytecode), and the four cases of the issue
end to end on a copy of verl 0.9.0.

Every expectation (which path is not the tool's, what a file holds) is set by the test itself.
"""

from __future__ import annotations

import importlib.util
import json
import os
import py_compile
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from importlib import machinery
from pathlib import Path

import pytest
from support import tree_bytes
from typer.testing import CliRunner

from trace_instrument.cli import app
from trace_instrument.engine.apply import apply
from trace_instrument.engine.check import check
from trace_instrument.engine.files import CheckoutError, PendingWrite, write_all
from trace_instrument.engine.remove import remove
from trace_instrument.engine.verify import verify
from trace_instrument.model import Check, Reason, RunErrorKind, RuntimeStatus, Selection, Status
from trace_instrument.render import exits

PACKAGE = "verl/utils/tracing"
MANIFEST = ".trace-instrument.json"
SMALL = (
    "verl/__init__.py",
    "verl/utils/__init__.py",
    "verl/version/version",
    "verl/trainer/constants_ppo.py",
    "verl/experimental/agent_loop/single_turn_agent_loop.py",
)
# the one point of the small checkout whose requirement (in agent_loop.py) is not there
SKIP = "traj.c2.single-turn-record"
SELECTION = Selection(skip=frozenset({SKIP}))
# the points of the small checkout whose code imports the runtime package
FLOW_POINTS = {"flow.v0.single-turn-sending", "flow.v0.single-turn-received"}
FORK_INIT = b'"""The fork\'s own tracing helpers."""\n\nfrom .helpers import mine\n'
FORK_HELPERS = b"def mine():\n    return 'the fork'\n"


def _cli(*args: object):
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def _snapshot(*roots: Path) -> dict[str, object]:
    """Every entry under the roots, links not followed: a file's bytes, a link's target, a folder."""
    found: dict[str, object] = {}
    for root in roots:
        for folder, folders, files in os.walk(root):
            for name in [*folders, *files]:
                path = Path(folder) / name
                if path.is_symlink():
                    found[str(path)] = ("link", os.readlink(path))
                elif path.is_dir():
                    found[str(path)] = "folder"
                else:
                    found[str(path)] = path.read_bytes()
    return found


def _shipped(catalog, name: str) -> bytes:
    return dict(catalog.runtime.files)[name]


def _runtime_items(result) -> dict[str, RuntimeStatus]:
    return {f.path: f.status for f in result.runtime_files}


# the small checkout's files, verl 0.9.0's own bytes (kept here so these cases need no whole tree;
# test_the_small_checkout_is_verl_090s_files holds them to the wheel's)
SMALL_FILES = Path(__file__).parent / "fixtures" / "verl-0.9.0-small"


@pytest.fixture
def small(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    for relative in SMALL:
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(SMALL_FILES / relative, root / relative)
    return root


def test_the_small_checkout_is_verl_090s_files(verl_090: Path) -> None:
    kept = sorted(path.relative_to(SMALL_FILES).as_posix() for path in SMALL_FILES.rglob("*") if path.is_file())
    assert kept == sorted(SMALL)
    assert {name: (SMALL_FILES / name).read_bytes() for name in SMALL} == {
        name: (verl_090 / name).read_bytes() for name in SMALL
    }


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    return folder


@pytest.fixture(scope="session")
def installed_small(tmp_path_factory: pytest.TempPathFactory, catalog) -> Path:
    """The small checkout after a first apply, made and checked once per worker; `_install` copies it
    (apply's bytes and manifest do not depend on where the checkout is)."""
    root = tmp_path_factory.mktemp("installed-small") / "checkout"
    shutil.copytree(SMALL_FILES, root)
    result = apply(root, catalog, SELECTION)
    assert result.written and result.error is None
    assert check(root, catalog, SELECTION).runtime_files, "the runtime is part of the run"
    assert exits.check_exit(check(root, catalog, SELECTION)) == exits.OK
    return root


def _install(root: Path, installed: Path) -> None:
    """`root`, a small checkout, as after a first apply: a copy of `installed_small`."""
    shutil.rmtree(root)
    shutil.copytree(installed, root, symlinks=True)


# -- the cases ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """A checkout arranged so that something at the runtime's place is not the tool's."""

    installed: bool  # arranged after a first apply (else on the pristine files)
    arrange: Callable[[Path, Path, object], None]  # (checkout, folder outside it, catalog)
    offending: str  # the path check, verify and apply's refusal name
    fork: tuple[str, ...]  # the fork's files (relative to the checkout): never changed by any command
    status: RuntimeStatus = RuntimeStatus.NOT_OURS


def _fork_module(root: Path, _outside: Path, _catalog) -> None:
    (root / "verl/utils/tracing.py").write_bytes(FORK_HELPERS)


def _fork_package(root: Path, _outside: Path, _catalog) -> None:
    (root / PACKAGE).mkdir(exist_ok=True)
    (root / PACKAGE / "__init__.py").write_bytes(FORK_INIT)
    (root / PACKAGE / "helpers.py").write_bytes(FORK_HELPERS)


def _fork_init_only(root: Path, _outside: Path, _catalog) -> None:
    (root / PACKAGE).mkdir()
    (root / PACKAGE / "__init__.py").write_bytes(FORK_HELPERS)


def _place_is_a_file(root: Path, _outside: Path, _catalog) -> None:
    (root / PACKAGE).write_bytes(FORK_HELPERS)


def _dangling_link(root: Path, _outside: Path, _catalog) -> None:
    os.symlink(root / "verl/utils/nowhere", root / PACKAGE)


def _link_out(root: Path, outside: Path, _catalog) -> None:
    os.symlink(outside, root / PACKAGE)


def _link_loop(root: Path, _outside: Path, _catalog) -> None:
    os.symlink(root / PACKAGE, root / PACKAGE)


def _link_inside(root: Path, _outside: Path, _catalog) -> None:
    """A link to a folder of the checkout: what it leads to may be imported under another name too."""
    (root / "verl/vendored").mkdir()
    (root / "verl/vendored/helpers.py").write_bytes(FORK_HELPERS)
    os.symlink(root / "verl/vendored", root / PACKAGE)


def _stale_bytecode_before_install(root: Path, outside: Path, catalog) -> None:
    """Bytecode that never looks at its source, left where the runtime's trace.py is to go."""
    (root / PACKAGE).mkdir()
    _stale_bytecode(root, outside, catalog)


def _runtime_file_link_inside(root: Path, _outside: Path, catalog) -> None:
    """trace.py a link to a file of the checkout holding the very bytes the tool ships."""
    (root / "verl/shared_trace.py").write_bytes(_shipped(catalog, "trace.py"))
    (root / PACKAGE / "trace.py").unlink()
    os.symlink(root / "verl/shared_trace.py", root / PACKAGE / "trace.py")


def _utils_link_out(root: Path, outside: Path, _catalog) -> None:
    shutil.move(root / "verl/utils", outside / "utils")
    os.symlink(outside / "utils", root / "verl/utils")


def _installed_link_out(root: Path, outside: Path, _catalog) -> None:
    """The runtime installed in a folder outside the checkout that a link leads to (as the tool did
    before it refused links out): remove must not delete through the link."""
    shutil.move(root / PACKAGE, outside / "tracing")
    os.symlink(outside / "tracing", root / PACKAGE)


def _subpackage(root: Path, _outside: Path, _catalog) -> None:
    (root / PACKAGE / "trace").mkdir()
    (root / PACKAGE / "trace/__init__.py").write_bytes(FORK_HELPERS)


def _namespace_folder(root: Path, _outside: Path, _catalog) -> None:
    (root / PACKAGE / "trace").mkdir()
    (root / PACKAGE / "trace/helpers.py").write_bytes(FORK_HELPERS)


def _extension(root: Path, _outside: Path, _catalog) -> None:
    (root / PACKAGE / f"trace{machinery.EXTENSION_SUFFIXES[0]}").write_bytes(b"\x7fELF not really")


def _other_python_extension(root: Path, _outside: Path, _catalog) -> None:
    (root / PACKAGE / "trace.cpython-310-x86_64-linux-gnu.so").write_bytes(b"\x7fELF not really")


def _init_extension(root: Path, _outside: Path, _catalog) -> None:
    (root / PACKAGE / f"__init__{machinery.EXTENSION_SUFFIXES[0]}").write_bytes(b"\x7fELF not really")


def _legacy_bytecode(root: Path, _outside: Path, _catalog) -> None:
    py_compile.compile(str(root / PACKAGE / "trace.py"), cfile=str(root / PACKAGE / "trace.pyc"), doraise=True)


def _fork_module_after_install(root: Path, _outside: Path, _catalog) -> None:
    (root / "verl/utils/tracing.py").write_bytes(FORK_HELPERS)


def _fork_init_in_installed(root: Path, _outside: Path, _catalog) -> None:
    """The tree the tool left before it judged ownership: the fork's package with the runtime written
    into it, its own __init__.py left alone, and no record of an __init__.py in the manifest."""
    (root / PACKAGE / "__init__.py").write_bytes(FORK_INIT)
    (root / PACKAGE / "helpers.py").write_bytes(FORK_HELPERS)
    manifest = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
    del manifest["runtime"]["__init__.py"]
    (root / MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")


def _hand_edit_without_manifest(root: Path, _outside: Path, _catalog) -> None:
    (root / MANIFEST).unlink()
    trace = root / PACKAGE / "trace.py"
    trace.write_bytes(trace.read_bytes() + b"\n# whose edit? nothing the tool keeps says\n")


def _stale_bytecode(root: Path, outside: Path, _catalog) -> None:
    other = outside / "trace.py"
    other.write_text("def trace_flow(*args, **kwargs):\n    return None\n", encoding="utf-8")
    cached = importlib.util.cache_from_source(str(root / PACKAGE / "trace.py"))
    mode = py_compile.PycInvalidationMode.UNCHECKED_HASH
    py_compile.compile(str(other), cfile=cached, doraise=True, invalidation_mode=mode)


def _runtime_file_link_out(root: Path, outside: Path, _catalog) -> None:
    trace = root / PACKAGE / "trace.py"
    shutil.move(trace, outside / "trace.py")
    os.symlink(outside / "trace.py", trace)


CASES = {
    # on the pristine files: apply would install into (or through) a place that is not the tool's
    "fork-module": Case(False, _fork_module, "verl/utils/tracing.py", ("verl/utils/tracing.py",)),
    "fork-package": Case(False, _fork_package, PACKAGE, (f"{PACKAGE}/__init__.py", f"{PACKAGE}/helpers.py")),
    "fork-init-only": Case(False, _fork_init_only, PACKAGE, (f"{PACKAGE}/__init__.py",)),
    "place-is-a-file": Case(False, _place_is_a_file, PACKAGE, (PACKAGE,)),
    "dangling-link": Case(False, _dangling_link, PACKAGE, (PACKAGE,)),
    "link-out": Case(False, _link_out, PACKAGE, (PACKAGE,)),
    "link-loop": Case(False, _link_loop, PACKAGE, (PACKAGE,)),
    "link-inside": Case(False, _link_inside, PACKAGE, (PACKAGE, "verl/vendored/helpers.py")),
    "utils-link-out": Case(False, _utils_link_out, "verl/utils", ("verl/utils",)),
    "stale-bytecode-before-install": Case(
        False,
        _stale_bytecode_before_install,
        Path(importlib.util.cache_from_source(f"{PACKAGE}/trace.py")).as_posix(),
        (),
        RuntimeStatus.STALE_BYTECODE,
    ),
    # after a first apply: what came since is in the way of the installed package
    "subpackage": Case(True, _subpackage, f"{PACKAGE}/trace", (f"{PACKAGE}/trace/__init__.py",)),
    "namespace-folder": Case(True, _namespace_folder, f"{PACKAGE}/trace", (f"{PACKAGE}/trace/helpers.py",)),
    "extension": Case(True, _extension, f"{PACKAGE}/trace{machinery.EXTENSION_SUFFIXES[0]}", ()),
    "other-python-extension": Case(
        True, _other_python_extension, f"{PACKAGE}/trace.cpython-310-x86_64-linux-gnu.so", ()
    ),
    "init-extension": Case(True, _init_extension, f"{PACKAGE}/__init__{machinery.EXTENSION_SUFFIXES[0]}", ()),
    "legacy-bytecode": Case(True, _legacy_bytecode, f"{PACKAGE}/trace.pyc", (f"{PACKAGE}/trace.pyc",)),
    "fork-module-after-install": Case(
        True, _fork_module_after_install, "verl/utils/tracing.py", ("verl/utils/tracing.py",)
    ),
    "fork-init-in-installed": Case(
        True, _fork_init_in_installed, f"{PACKAGE}/__init__.py", (f"{PACKAGE}/__init__.py", f"{PACKAGE}/helpers.py")
    ),
    "hand-edit-without-manifest": Case(
        True, _hand_edit_without_manifest, f"{PACKAGE}/trace.py", (f"{PACKAGE}/trace.py",)
    ),
    "stale-bytecode": Case(
        True,
        _stale_bytecode,
        Path(importlib.util.cache_from_source(f"{PACKAGE}/trace.py")).as_posix(),  # trace.cpython-311.pyc
        (),
        RuntimeStatus.STALE_BYTECODE,
    ),
    "runtime-file-link-out": Case(True, _runtime_file_link_out, f"{PACKAGE}/trace.py", (f"{PACKAGE}/trace.py",)),
    "installed-link-out": Case(True, _installed_link_out, PACKAGE, (PACKAGE,)),
    "runtime-file-link-inside": Case(
        True, _runtime_file_link_inside, f"{PACKAGE}/trace.py", (f"{PACKAGE}/trace.py", "verl/shared_trace.py")
    ),
}


@pytest.fixture(params=sorted(CASES))
def arranged(request, small: Path, outside: Path, catalog, installed_small: Path) -> tuple[Case, Path, Path]:
    case = CASES[request.param]
    if case.installed:
        _install(small, installed_small)
    case.arrange(small, outside, catalog)
    return case, small, outside


def _fork_files(case: Case, root: Path) -> dict[str, object]:
    return {path: _snapshot_one(root / path) for path in case.fork}


def _snapshot_one(path: Path) -> object:
    if path.is_symlink():
        return ("link", os.readlink(path))
    return path.read_bytes()


def test_apply_refuses_naming_the_path_and_writes_nothing(arranged, catalog):
    case, root, outside = arranged
    before = _snapshot(root, outside)
    for write in (False, True):
        result = apply(root, catalog, SELECTION, write=write)
        assert result.error is not None and result.error.kind is RunErrorKind.RUNTIME_NOT_OURS
        assert case.offending in result.error.message
        assert not result.written and exits.apply_exit(result) == exits.ERROR
        assert _snapshot(root, outside) == before, "not a byte written, in the checkout or outside it"
    assert _cli("apply", "--skip", SKIP, root).exit_code == exits.ERROR
    assert _snapshot(root, outside) == before


def test_check_fails_on_the_item_that_is_not_the_tools(arranged, catalog):
    case, root, _outside = arranged
    checked = check(root, catalog, SELECTION)
    items = _runtime_items(checked)
    assert items.get(case.offending) is case.status, items
    assert exits.check_exit(checked) == exits.FAILED
    if case.installed:
        flow = {p.point_id: p for p in checked.points if p.point_id in FLOW_POINTS}
        assert {p.status for p in flow.values()} == {Status.BROKEN}, "the code importing the runtime would fail"
        assert all(p.reason is Reason.RUNTIME_INCOMPLETE and case.offending in p.message for p in flow.values())
    body = json.loads(_cli("check", "--skip", SKIP, "--format", "json", root).output)
    item = next(p for p in body["points"] if p["id"] == "runtime" and p["file"] == case.offending)
    expected_reason = Reason.STALE_BYTECODE if case.status is RuntimeStatus.STALE_BYTECODE else Reason.NOT_OURS
    assert item["reason"] == expected_reason.value and case.offending in item["message"]
    assert body["exit_code"] == exits.FAILED


def test_verify_fails_on_the_item_that_is_not_the_tools(arranged, catalog):
    case, root, _outside = arranged
    verified = verify(root, catalog)
    failing = [f for f in verified.findings if f.check is Check.RUNTIME and not f.ok]
    assert any(f.subject == case.offending and case.offending in f.message for f in failing), failing
    assert not verified.ok


def test_remove_and_remove_force_keep_every_file_of_the_forks(arranged, catalog):
    case, root, outside = arranged
    fork = _fork_files(case, root)
    outside_before = _snapshot(outside)
    for force in (False, True):
        result = remove(root, catalog, force=force)
        assert result.error is None
        assert _fork_files(case, root) == fork, "the fork's files as they were"
        assert _snapshot(outside) == outside_before, "nothing deleted or written outside the checkout"
        assert not any(f.status is RuntimeStatus.REMOVED and f.path in case.fork for f in result.runtime_files)
    if case.status is RuntimeStatus.NOT_OURS:
        assert (root / case.offending).is_symlink() or (root / case.offending).exists()


# -- what remove takes, and what it leaves ----------------------------------------------------------------


def _ours_left(root: Path, catalog) -> list[str]:
    return [name for name, _ in catalog.runtime.files if (root / PACKAGE / name).exists()]


def test_remove_takes_the_tools_files_out_of_a_forks_package_and_keeps_the_forks(
    small, installed_small, outside, catalog
):
    """The tree the tool left before: remove (without --force) gives the fork its package back."""
    _install(small, installed_small)
    _fork_init_in_installed(small, outside, catalog)
    result = remove(small, catalog)
    assert exits.remove_exit(result) == exits.OK
    assert _ours_left(small, catalog) == ["__init__.py"]
    assert (small / PACKAGE / "__init__.py").read_bytes() == FORK_INIT
    assert (small / PACKAGE / "helpers.py").read_bytes() == FORK_HELPERS
    assert sorted(os.listdir(small / PACKAGE)) == ["__init__.py", "helpers.py"]


def test_remove_takes_the_package_that_hid_a_forks_module(small, installed_small, outside, catalog):
    """Code importing the fork's own `verl.utils.tracing` module does not keep the tool's package."""
    _install(small, installed_small)
    _fork_module_after_install(small, outside, catalog)
    user = small / "verl/mine.py"
    user.write_text("from verl.utils.tracing import mine\n\nprint(mine())\n", encoding="utf-8")
    result = remove(small, catalog)
    assert exits.remove_exit(result) == exits.OK
    assert not (small / PACKAGE).exists() and _ours_left(small, catalog) == []
    spec = machinery.FileFinder(str(small / "verl/utils"), *_loaders()).find_spec("verl.utils.tracing")
    assert spec is not None and spec.origin == str(small / "verl/utils/tracing.py"), "the fork's module imports again"


def _loaders():
    return [
        (machinery.ExtensionFileLoader, machinery.EXTENSION_SUFFIXES),
        (machinery.SourceFileLoader, machinery.SOURCE_SUFFIXES),
        (machinery.SourcelessFileLoader, machinery.BYTECODE_SUFFIXES),
    ]


def test_an_extra_module_of_the_forks_in_the_package_is_kept_with_its_folder(small, installed_small, catalog):
    _install(small, installed_small)
    mine = small / PACKAGE / "mine.py"
    mine.write_bytes(FORK_HELPERS)
    cache = small / PACKAGE / "__pycache__"
    py_compile.compile(str(mine), cfile=importlib.util.cache_from_source(str(mine)), doraise=True)
    fork_cache = sorted(os.listdir(cache))
    checked = check(small, catalog, SELECTION)
    assert exits.check_exit(checked) == exits.OK, "a module of another name is in nobody's way"
    before = tree_bytes(small)
    assert not apply(small, catalog, SELECTION).written and tree_bytes(small) == before
    for force in (False, True):
        result = remove(small, catalog, force=force)
        assert result.error is None and mine.read_bytes() == FORK_HELPERS
    assert _ours_left(small, catalog) == [] and sorted(os.listdir(small / PACKAGE)) == ["__pycache__", "mine.py"]
    assert sorted(os.listdir(cache)) == fork_cache, "the fork's bytecode stays"


def test_a_forks_module_in_the_package_that_imports_the_runtime_keeps_it(small, installed_small, catalog):
    _install(small, installed_small)
    (small / PACKAGE / "mine.py").write_text("from .trace import trace_flow\n", encoding="utf-8")
    result = remove(small, catalog, force=True)
    kept = {f.path: f for f in result.runtime_files}
    assert kept[f"{PACKAGE}/trace.py"].status is RuntimeStatus.KEPT_IN_USE
    assert kept[f"{PACKAGE}/trace.py"].users == (f"{PACKAGE}/mine.py",)
    assert exits.remove_exit(result) == exits.FAILED
    assert len(_ours_left(small, catalog)) == len(catalog.runtime.files)


def test_ordinary_bytecode_is_no_problem_and_goes_with_the_package(small, installed_small, catalog):
    _install(small, installed_small)
    for optimize in (0, 2):
        for name, _ in catalog.runtime.files:
            source = str(small / PACKAGE / name)
            cached = importlib.util.cache_from_source(source, optimization=optimize or "")
            mode = (
                py_compile.PycInvalidationMode.TIMESTAMP
                if optimize == 0
                else py_compile.PycInvalidationMode.CHECKED_HASH
            )
            py_compile.compile(source, cfile=cached, doraise=True, optimize=optimize, invalidation_mode=mode)
    checked = check(small, catalog, SELECTION)
    assert exits.check_exit(checked) == exits.OK
    assert all(f.status is RuntimeStatus.PRESENT for f in checked.runtime_files)
    assert exits.remove_exit(remove(small, catalog)) == exits.OK
    assert not (small / PACKAGE).exists(), "the package, its bytecode and its folder are gone"


def test_a_runtime_file_edited_by_hand_stays_the_tools_when_the_manifest_records_it(small, installed_small, catalog):
    """The manifest records what apply installed: an edit since is `drifted` (left alone), not someone
    else's file, also after a later apply writes the manifest again."""
    _install(small, installed_small)
    trace = small / PACKAGE / "trace.py"
    edited = _shipped(catalog, "trace.py") + b"\n# my own change\n"
    trace.write_bytes(edited)
    # take one point out so that the next apply has something to write (and writes the manifest)
    assert remove(small, catalog, Selection(only=frozenset({"env.runtime-env"}))).written
    applied = apply(small, catalog, SELECTION)
    assert applied.error is None and applied.written
    assert _runtime_items(applied)[f"{PACKAGE}/trace.py"] is RuntimeStatus.DRIFTED
    assert trace.read_bytes() == edited
    checked = check(small, catalog, SELECTION)
    assert _runtime_items(checked)[f"{PACKAGE}/trace.py"] is RuntimeStatus.DRIFTED
    kept = remove(small, catalog)
    assert {f.status for f in kept.runtime_files} == {RuntimeStatus.KEPT_EDITED} and trace.read_bytes() == edited


def test_a_lost_manifest_is_written_again_when_the_files_are_the_tools(small, installed_small, catalog):
    _install(small, installed_small)
    manifest = (small / MANIFEST).read_bytes()
    (small / MANIFEST).unlink()
    result = apply(small, catalog, SELECTION)
    assert result.error is None and result.written
    assert (small / MANIFEST).read_bytes() == manifest


def test_a_runtime_file_of_an_earlier_release_is_the_tools_without_a_manifest(small, installed_small, catalog):
    from trace_instrument.engine.runtime import digest

    _install(small, installed_small)
    (small / MANIFEST).unlink()
    older = b"# an earlier release of trace.py\n"
    (small / PACKAGE / "trace.py").write_bytes(older)
    earlier = replace_earlier(catalog, "trace.py", digest(older))
    result = apply(small, earlier, SELECTION)
    assert result.error is None and _runtime_items(result)[f"{PACKAGE}/trace.py"] is RuntimeStatus.UPDATED
    assert (small / PACKAGE / "trace.py").read_bytes() == _shipped(catalog, "trace.py")


def replace_earlier(catalog, name: str, hash_: str):
    from dataclasses import replace

    earlier = {**catalog.runtime.earlier, name: (*catalog.runtime.earlier.get(name, ()), hash_)}
    return replace(catalog, runtime=replace(catalog.runtime, earlier=earlier))


def test_no_write_goes_through_a_folder_linked_out_of_the_checkout(small, outside):
    os.symlink(outside, small / "verl/linked")
    with pytest.raises(CheckoutError, match="outside the checkout"):
        write_all(small, [PendingWrite("verl/linked/new.py", b"x = 1\n")])
    (outside / "old.py").write_bytes(b"x = 1\n")
    with pytest.raises(CheckoutError, match="outside the checkout"):
        write_all(small, [PendingWrite("verl/linked/old.py", None)])
    assert os.listdir(outside) == ["old.py"]


# -- every output names the path ----------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["text", "json", "github", "junit"])
def test_every_format_of_check_names_what_is_not_the_tools(small, installed_small, outside, catalog, fmt):
    _install(small, installed_small)
    _subpackage(small, outside, catalog)
    result = _cli("check", "--skip", SKIP, "--format", fmt, small)
    assert result.exit_code == exits.FAILED
    assert f"{PACKAGE}/trace/ is not trace-instrument's" in result.output
    if fmt == "github":
        assert f"file={PACKAGE}/trace," in result.output and "title=refused%3A runtime" in result.output
    if fmt == "junit":
        assert f'file="{PACKAGE}/trace"' in result.output and 'type="refused"' in result.output


def test_the_json_of_a_refused_apply_and_of_check_validate_and_carry_the_path(small, installed_small, outside, catalog):
    import jsonschema

    from trace_instrument.render import jsonout

    _install(small, installed_small)
    _subpackage(small, outside, catalog)
    offending = f"{PACKAGE}/trace"
    refused = json.loads(_cli("apply", "--skip", SKIP, "--format", "json", small).output)
    jsonschema.validate(refused, jsonout.schema("run"), cls=jsonschema.Draft202012Validator)
    assert refused["error"]["kind"] == "runtime-not-ours" and offending in refused["error"]["message"]
    assert {"path": offending, "status": "not-ours"}.items() <= next(
        r for r in refused["runtime"] if r["path"] == offending
    ).items()
    assert refused["exit_code"] == exits.ERROR and not refused["written"]
    checked = json.loads(_cli("check", "--skip", SKIP, "--format", "json", small).output)
    jsonschema.validate(checked, jsonout.schema("check"), cls=jsonschema.Draft202012Validator)
    removed = json.loads(_cli("remove", "--force", "--format", "json", small).output)
    jsonschema.validate(removed, jsonout.schema("run"), cls=jsonschema.Draft202012Validator)
    statuses = {r["path"]: r["status"] for r in removed["runtime"]}
    assert offending not in statuses, "with the package gone, the fork's package clashes with nothing"
    assert set(statuses.values()) == {"removed"} and removed["exit_code"] == exits.OK
    assert (small / offending / "__init__.py").read_bytes() == FORK_HELPERS


# -- the four cases of the issue, on verl 0.9.0 -------------------------------------------------------------


def test_verl_090_a_forks_module_next_to_the_package(checkout_090, catalog):
    fork = checkout_090 / "verl/utils/tracing.py"
    fork.write_bytes(FORK_HELPERS)
    before = tree_bytes(checkout_090)
    refused = _cli("apply", checkout_090)
    assert refused.exit_code == exits.ERROR and "verl/utils/tracing.py is not trace-instrument's" in refused.output
    assert tree_bytes(checkout_090) == before and not (checkout_090 / PACKAGE).exists()
    assert _cli("check", checkout_090).exit_code == exits.FAILED
    assert _cli("verify", checkout_090).exit_code == exits.FAILED
    for force in ([], ["--force"]):
        _cli("remove", *force, checkout_090)
        assert tree_bytes(checkout_090) == before


def test_verl_090_a_forks_own_package(checkout_090, catalog):
    _fork_package(checkout_090, checkout_090, catalog)
    before = tree_bytes(checkout_090)
    refused = _cli("apply", checkout_090)
    assert refused.exit_code == exits.ERROR and f"{PACKAGE}/ is not trace-instrument's" in refused.output
    assert tree_bytes(checkout_090) == before
    assert _cli("check", checkout_090).exit_code == exits.FAILED
    for force in ([], ["--force"]):
        _cli("remove", *force, checkout_090)
        assert tree_bytes(checkout_090) == before, "the fork's own files are never deleted"


def test_verl_090_a_link_out_of_the_checkout(checkout_090, outside, catalog):
    os.symlink(outside, checkout_090 / PACKAGE)
    before = tree_bytes(checkout_090)
    refused = _cli("apply", checkout_090)
    assert refused.exit_code == exits.ERROR and "outside the checkout" in refused.output
    assert tree_bytes(checkout_090) == before and os.listdir(outside) == [], "nothing written through the link"
    assert _cli("check", checkout_090).exit_code == exits.FAILED


def test_verl_090_a_subpackage_named_like_a_runtime_module(checkout_090, catalog):
    assert apply(checkout_090, catalog).written
    assert _cli("check", checkout_090).exit_code == exits.OK
    _subpackage(checkout_090, checkout_090, catalog)
    checked = check(checkout_090, catalog)
    assert _runtime_items(checked)[f"{PACKAGE}/trace"] is RuntimeStatus.NOT_OURS
    broken = {p.point_id for p in checked.points if p.status is Status.BROKEN}
    assert broken == {p.id for p in catalog.points if p.tracing_names and p.extra is None}
    assert _cli("check", checkout_090).exit_code == exits.FAILED
    assert _cli("verify", checkout_090).exit_code == exits.FAILED
    before = tree_bytes(checkout_090)
    assert _cli("apply", checkout_090).exit_code == exits.ERROR and tree_bytes(checkout_090) == before
    assert _cli("remove", "--force", checkout_090).exit_code == exits.OK
    assert (checkout_090 / PACKAGE / "trace/__init__.py").read_bytes() == FORK_HELPERS
    assert sorted(os.listdir(checkout_090 / PACKAGE)) == ["trace"]
