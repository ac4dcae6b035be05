"""verl source trees from PyPI wheels (pure Python), downloaded once and cached.

Used by `demo` and by the test suite. A folder of already downloaded wheels can
be named with TRACE_INSTRUMENT_WHEELS (no network needed then).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from trace_instrument.caches import cache_dir

WHEEL_DIR_ENV = "TRACE_INSTRUMENT_WHEELS"


class WheelError(Exception):
    """The verl wheel could not be had; the message says what to do."""


def verl_tree(version: str) -> Path:
    """A pristine extracted verl tree (the folder holding verl/) for `version`."""
    target = cache_dir() / f"verl-{version}"
    if (target / "verl").is_dir() and (target / ".complete").exists():
        return target
    wheel = find_wheel(version)
    staging = Path(tempfile.mkdtemp(prefix=f"verl-{version}-", dir=_ensure(cache_dir())))
    try:
        with zipfile.ZipFile(wheel) as archive:
            members = [m for m in archive.namelist() if m.startswith("verl/")]
            archive.extractall(staging, members)
        (staging / ".complete").write_text(wheel.name)
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return target


def find_wheel(version: str) -> Path:
    name = f"verl-{version}-py3-none-any.whl"
    local = os.environ.get(WHEEL_DIR_ENV)
    if local:
        candidate = Path(local) / name
        if candidate.is_file():
            return candidate
        raise WheelError(
            f"{WHEEL_DIR_ENV}={local} has no {name}; download it with `pip download --no-deps verl=={version}`"
        )
    wheels = _ensure(cache_dir() / "wheels")
    cached = wheels / name
    if cached.is_file():
        return cached
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "-q",
        "-d",
        str(wheels),
        f"verl=={version}",
    ]
    try:
        completed = subprocess.run(command, check=False, capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise WheelError(f"could not run pip to download verl=={version}: {exc}") from None
    if completed.returncode != 0 or not cached.is_file():
        detail = (completed.stderr or completed.stdout).strip().splitlines()[-1:] or ["no output"]
        raise WheelError(
            f"could not download verl=={version} from PyPI ({detail[0]}). Without network, download the wheel "
            f"elsewhere and point {WHEEL_DIR_ENV} at its folder."
        )
    return cached


def _ensure(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path
