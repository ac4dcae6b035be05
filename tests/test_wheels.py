"""verl trees from wheels (trace_instrument/wheels.py), on a wheel the test writes: a few files, no
network, a cache folder of the test's own. (The real releases are the e2e tier's.)"""

from __future__ import annotations

import subprocess
import zipfile
from pathlib import Path

import pytest

from trace_instrument import wheels
from trace_instrument.caches import CACHE_ENV

# the function itself: the suite's guard wraps the module's name to watch the default tier
verl_tree = getattr(wheels.verl_tree, "__wrapped__", wheels.verl_tree)
VERSION = "9.9.9"
MEMBERS = {
    "verl/__init__.py": b"version = '9.9.9'\n",
    "verl/trainer/main.py": b"def main():\n    return 1\n",
    f"verl-{VERSION}.dist-info/METADATA": b"Name: verl\n",
}


def _wheel(folder: Path, version: str = VERSION) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"verl-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in MEMBERS.items():
            archive.writestr(name, data)
    return path


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv(CACHE_ENV, str(folder))
    monkeypatch.delenv(wheels.WHEEL_DIR_ENV, raising=False)
    return folder


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_tree_is_the_wheels_verl_folder_extracted_once(cache: Path, tmp_path: Path, monkeypatch) -> None:
    wheel = _wheel(tmp_path / "wheels")
    monkeypatch.setenv(wheels.WHEEL_DIR_ENV, str(wheel.parent))
    tree = verl_tree(VERSION)
    assert tree == cache / f"verl-{VERSION}"
    expected = {name: data for name, data in MEMBERS.items() if name.startswith("verl/")}
    assert _files(tree) == {**expected, ".complete": wheel.name.encode()}
    assert [p.name for p in cache.iterdir()] == [tree.name], "no staging folder left behind"

    wheel.unlink()  # extracted and complete: the wheel is not read again
    assert verl_tree(VERSION) == tree and _files(tree)[".complete"] == wheel.name.encode()


def test_an_incomplete_tree_is_extracted_again(cache: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(wheels.WHEEL_DIR_ENV, str(_wheel(tmp_path / "wheels").parent))
    half = cache / f"verl-{VERSION}" / "verl"
    half.mkdir(parents=True)
    (half / "left_over.py").write_bytes(b"x = 1\n")  # an extraction that was cut off: no .complete
    tree = verl_tree(VERSION)
    assert sorted(_files(tree)) == [".complete", "verl/__init__.py", "verl/trainer/main.py"]


def test_a_named_folder_without_the_wheel_says_how_to_get_it(cache: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(wheels.WHEEL_DIR_ENV, str(tmp_path / "empty"))
    with pytest.raises(wheels.WheelError) as raised:
        wheels.find_wheel("0.1.2")
    assert str(raised.value) == (
        f"{wheels.WHEEL_DIR_ENV}={tmp_path / 'empty'} has no verl-0.1.2-py3-none-any.whl; "
        "download it with `pip download --no-deps verl==0.1.2`"
    )


def test_a_downloaded_wheel_is_taken_from_the_cache(cache: Path, monkeypatch) -> None:
    cached = _wheel(cache / "wheels")
    monkeypatch.setattr(subprocess, "run", _no_process)
    assert wheels.find_wheel(VERSION) == cached


def test_pip_downloads_a_missing_wheel_into_the_cache(cache: Path, monkeypatch) -> None:
    commands: list[list[str]] = []

    def pip(command: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        commands.append(command)
        _wheel(Path(command[command.index("-d") + 1]))
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(subprocess, "run", pip)
    assert wheels.find_wheel(VERSION) == cache / "wheels" / f"verl-{VERSION}-py3-none-any.whl"
    (command,) = commands
    assert command[1:] == [
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "-q",
        "-d",
        str(cache / "wheels"),
        f"verl=={VERSION}",
    ]


@pytest.mark.parametrize(
    ("outcome", "message"),
    [
        (
            subprocess.CompletedProcess([], 1, "", "Looking in indexes\nERROR: No matching distribution\n"),
            (
                "could not download verl==9.9.9 from PyPI (ERROR: No matching distribution). Without network, "
                f"download the wheel elsewhere and point {wheels.WHEEL_DIR_ENV} at its folder."
            ),
        ),
        (
            subprocess.CompletedProcess([], 0, "", ""),  # pip said yes, yet no wheel is there
            (
                "could not download verl==9.9.9 from PyPI (no output). Without network, "
                f"download the wheel elsewhere and point {wheels.WHEEL_DIR_ENV} at its folder."
            ),
        ),
        (OSError("no pip"), "could not run pip to download verl==9.9.9: no pip"),
        (subprocess.TimeoutExpired("pip", 300), "could not run pip to download verl==9.9.9: "),
    ],
    ids=["refused", "no-wheel", "no-pip", "timeout"],
)
def test_a_failed_download_says_what_to_do(cache: Path, monkeypatch, outcome: object, message: str) -> None:
    def pip(command: list[str], **_: object) -> object:
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    monkeypatch.setattr(subprocess, "run", pip)
    with pytest.raises(wheels.WheelError) as raised:
        verl_tree(VERSION)
    assert str(raised.value).startswith(message)
    assert not (cache / f"verl-{VERSION}").exists()


def _no_process(*args: object, **kwargs: object) -> None:
    raise AssertionError("no process may be started")
