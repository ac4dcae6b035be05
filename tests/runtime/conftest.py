"""Load templates/runtime standalone, as it would be installed into a verl checkout.

The sources are copied to ``<tmp>/verl/utils/tracing/`` (parents get empty
``__init__.py`` files) and imported from there, in a fresh module namespace per
test; tests that need process-global behaviour (fork, atexit, stderr reports)
run a script in a subprocess against the same copy. No verl, torch or ray.
"""

from __future__ import annotations

import atexit
import importlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

RUNTIME_SRC = Path(__file__).resolve().parents[2] / "templates" / "runtime"
DEFAULT_PACKAGE = "verl.utils.tracing"
# Environment the runtime reads at import; tests control all of it.
RUNTIME_ENV_VARS = ("VERL_TRACE_DIR", "DLC_JOB_ID", "VERL_TRACE_DISCOVERY_DIR")


def install_runtime(root: Path, package: str = DEFAULT_PACKAGE) -> Path:
    """Copy the runtime sources into ``root`` as ``package``; returns ``root``."""
    parts = package.split(".")
    for depth in range(1, len(parts)):
        parent = root.joinpath(*parts[:depth])
        parent.mkdir(parents=True, exist_ok=True)
        (parent / "__init__.py").touch()
    shutil.copytree(RUNTIME_SRC, root.joinpath(*parts), ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return root


def _purge_modules(top_level: str) -> None:
    for name in [m for m in sys.modules if m == top_level or m.startswith(top_level + ".")]:
        del sys.modules[name]


class RuntimeLoader:
    """Imports fresh copies of the runtime; cleans up after the test."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
        self.tmp_path = tmp_path
        self.monkeypatch = monkeypatch
        self.discovery_dir = tmp_path / "discovery"
        self.discovery_dir.mkdir()
        self._loaded = []  # (module, sys.path entry, top-level name)

    def __call__(self, trace_dir=None, job_id=None, package: str = DEFAULT_PACKAGE):
        """Import the package with ``$VERL_TRACE_DIR``/``$DLC_JOB_ID`` set as given."""
        root = install_runtime(self.tmp_path / f"pkgroot{len(self._loaded)}", package)
        self._set_env("VERL_TRACE_DIR", trace_dir)
        self._set_env("DLC_JOB_ID", job_id)
        self._set_env("VERL_TRACE_DISCOVERY_DIR", str(self.discovery_dir))
        top_level = package.split(".")[0]
        _purge_modules(top_level)
        sys.path.insert(0, str(root))
        module = importlib.import_module(package)
        self._loaded.append((module, str(root), top_level))
        return module

    def _set_env(self, name, value):
        if value is None:
            self.monkeypatch.delenv(name, raising=False)
        else:
            self.monkeypatch.setenv(name, str(value))

    # Helpers, exposed through the fixture so test modules never import conftest.
    csv_path = staticmethod(lambda trace_dir, pid=None: sample_csv_path(trace_dir, pid))
    read_csv = staticmethod(lambda runtime, trace_dir: read_sample_csv(runtime, trace_dir))
    writer = staticmethod(lambda runtime: sample_writer(runtime))

    def cleanup(self):
        for module, root, top_level in reversed(self._loaded):
            try:
                module.writer.close_all(5.0)
                module.progress.close_file()
                module.losses.stop_reporting()
                # Drops provoked on purpose must not be reported when pytest exits.
                atexit.unregister(module.writer._flush_and_report_at_exit)
            finally:
                _purge_modules(top_level)
                if root in sys.path:
                    sys.path.remove(root)


@pytest.fixture
def load_runtime(tmp_path, monkeypatch):
    """Factory: ``load_runtime(trace_dir=None, job_id=None, package=...)`` -> fresh package module."""
    loader = RuntimeLoader(tmp_path, monkeypatch)
    yield loader
    loader.cleanup()


@pytest.fixture
def trace_dir(tmp_path):
    return tmp_path / "trace"


@pytest.fixture
def traced(load_runtime, trace_dir):
    """The runtime loaded with tracing on (``$VERL_TRACE_DIR`` = ``trace_dir``)."""
    return load_runtime(trace_dir=trace_dir)


def sample_csv_path(trace_dir: Path, pid: int | None = None) -> Path:
    return Path(trace_dir) / "sample" / f"{socket.gethostname()}-pid{pid or os.getpid()}.csv"


def read_sample_csv(runtime, trace_dir: Path) -> bytes:
    assert runtime.flush(10), "flush timed out"
    path = sample_csv_path(trace_dir)
    return path.read_bytes() if path.exists() else b""


def sample_writer(runtime):
    sink = runtime.trace._sample_sink
    return sink[1] if sink else None


class ScriptRunner:
    """Runs Python snippets in a subprocess against a private copy of the runtime."""

    def __init__(self, tmp_path: Path):
        self.tmp_path = tmp_path
        self.root = install_runtime(tmp_path / "subproc_root")
        self.discovery_dir = tmp_path / "subproc_discovery"
        self.discovery_dir.mkdir()

    def env(self, **overrides):
        env = {k: v for k, v in os.environ.items() if k not in RUNTIME_ENV_VARS}
        env["PYTHONPATH"] = str(self.root)
        env["VERL_TRACE_DISCOVERY_DIR"] = str(self.discovery_dir)
        env.update({k: str(v) for k, v in overrides.items()})
        return env

    def run(self, code: str, timeout: float = 60, stdout=subprocess.PIPE, **env_overrides):
        """Run ``code``; returns (CompletedProcess, time.monotonic() when it ended)."""
        proc = subprocess.run(  # noqa: PLW1510 - the caller asserts the exit code
            [sys.executable, "-c", textwrap.dedent(code)],
            env=self.env(**env_overrides),
            cwd=self.tmp_path,
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            timeout=timeout,
        )
        return proc, time.monotonic()


@pytest.fixture
def script(tmp_path):
    return ScriptRunner(tmp_path)


NOBODY = 65534  # the conventional uid and gid of "nobody"
# Runs first in an unprivileged script: everything the script needs is imported
# while it may still read root's files (the interpreter may live under /root),
# then root drops to nobody, so EPERM paths (sticky /tmp, other users' files) are taken.
DROP_PRIVILEGES = f"""
import errno, io, json, logging, os, signal, socket, sys, tempfile, threading, time, traceback
import verl.utils.tracing as tracing
if os.geteuid() == 0:
    os.setgroups([])
    os.setgid({NOBODY})
    os.setuid({NOBODY})
"""


class UnprivilegedRunner(ScriptRunner):
    """A ScriptRunner whose scripts run as nobody (or as the current user when that is not root).

    ``shared`` is a folder every user may traverse, for the files such a script reads and writes.
    """

    def __init__(self, tmp_path: Path):
        super().__init__(tmp_path)
        self.shared = Path(tempfile.mkdtemp(prefix="verl-trace-test-"))
        self.shared.chmod(0o755)

    def folder(self, name: str, mode: int = 0o777) -> Path:
        path = self.shared / name
        path.mkdir()
        path.chmod(mode)
        return path

    def run(self, code: str, timeout: float = 60, stdout=subprocess.PIPE, **env_overrides):
        return super().run(DROP_PRIVILEGES + textwrap.dedent(code), timeout, stdout, **env_overrides)

    def cleanup(self):
        shutil.rmtree(self.shared, ignore_errors=True)


@pytest.fixture
def unprivileged(tmp_path):
    """Runs scripts as nobody; see UnprivilegedRunner."""
    runner = UnprivilegedRunner(tmp_path)
    yield runner
    runner.cleanup()
