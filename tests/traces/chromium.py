"""Headless Chromium (Debian's package) for the HTML report test: DOM after scripts, console messages, screenshot."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--host-resolver-rules=MAP * ~NOTFOUND",  # offline: any network request fails
]


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.fail("Chromium is needed for the HTML report test: apt-get install -y chromium", pytrace=False)
    return path


def _run(page: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        return subprocess.run(
            [chromium(), *FLAGS, f"--user-data-dir={profile}", *extra, page.resolve().as_uri()],
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )


def dom_and_console(page: Path) -> tuple[str, list[str]]:
    """The DOM after the page's scripts ran, and the console messages it logged."""
    result = _run(page, "--enable-logging=stderr", "--v=0", "--virtual-time-budget=3000", "--dump-dom")
    console = [line for line in result.stderr.splitlines() if ":CONSOLE" in line]
    return result.stdout, console


def screenshot(page: Path, target: Path, width: int = 1440, height: int = 3600) -> Path:
    _run(page, f"--window-size={width},{height}", f"--screenshot={target}")
    return target


def dom_at_width(page: Path, width: int, height: int = 2400) -> str:
    """The DOM after the page's scripts ran, laid out in a window ``width`` px wide."""
    result = _run(page, f"--window-size={width},{height}", "--virtual-time-budget=5000", "--dump-dom")
    return result.stdout
