"""The tool's own cache folder, and a small content-addressed pickle cache in it.

What is cached is keyed by the digest of everything it was computed from (file
bytes, spec texts, the tool's version), so a stale entry is never read: it is
simply never asked for again, and the oldest entries are pruned. A cache that
cannot be read or written is skipped silently; it only ever saves time.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import pickle
import tempfile
from pathlib import Path
from typing import Any

from trace_instrument import __version__

CACHE_ENV = "TRACE_INSTRUMENT_CACHE"
NO_CACHE_ENV = "TRACE_INSTRUMENT_NO_CACHE"  # set to 1 to compute everything afresh


def cache_dir() -> Path:
    """~/.cache/trace-instrument (or $XDG_CACHE_HOME/..., or $TRACE_INSTRUMENT_CACHE)."""
    base = os.environ.get(CACHE_ENV) or os.path.join(
        os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"), "trace-instrument"
    )
    return Path(base)


@functools.lru_cache(maxsize=8)
def code_digest(folder: Path, suffixes: tuple[str, ...] = (".py",), *files: Path) -> bytes:
    """The code a cached value was computed by: every file under ``folder`` ending in one of
    ``suffixes``, and ``files`` besides (each by its path and bytes), with the tool's version.
    Keyed by it, a value computed by other code is never read back (read once a process)."""
    hasher = hashlib.sha256(__version__.encode())
    found = sorted(p for p in folder.rglob("*") if p.suffix in suffixes and p.is_file())
    for path in [*found, *files]:
        data = path.read_bytes()
        name = (path.relative_to(folder).as_posix() if path.is_relative_to(folder) else path.name).encode()
        for part in (name, data):
            hasher.update(len(part).to_bytes(8, "little"))
            hasher.update(part)
    return hasher.digest()


def digest(*parts: bytes | str) -> str:
    """A key from everything a cached value depends on (the tool's own code included)."""
    hasher = hashlib.sha256(code_digest(Path(__file__).parent))
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        hasher.update(len(data).to_bytes(8, "little"))
        hasher.update(data)
    return hasher.hexdigest()


def file_digest(data: bytes) -> str:
    """A short digest of a file's bytes (which other files a cached result was computed with)."""
    return hashlib.sha256(data).hexdigest()[:16]


class PickleCache:
    """Values pickled under cache_dir()/<name>/<key>.pickle; at most `limit` entries are kept."""

    def __init__(self, name: str, limit: int = 2000):
        self.folder = cache_dir() / name
        self.limit = limit
        self.enabled = os.environ.get(NO_CACHE_ENV) != "1"

    def get(self, key: str) -> Any | None:
        if not self.enabled:
            return None
        try:
            with (self.folder / f"{key}.pickle").open("rb") as handle:
                return pickle.load(handle)
        except (OSError, pickle.PickleError, EOFError, AttributeError, ImportError, TypeError, ValueError):
            return None

    def put(self, key: str, value: Any) -> None:
        if not self.enabled:
            return
        with contextlib.suppress(OSError, pickle.PickleError, TypeError, AttributeError, RecursionError):
            self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd, name = tempfile.mkstemp(dir=self.folder, suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as handle:
                    pickle.dump(value, handle, protocol=pickle.HIGHEST_PROTOCOL)
                os.replace(name, self.folder / f"{key}.pickle")
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(name)
            self._prune()

    def _prune(self) -> None:
        entries = list(self.folder.glob("*.pickle"))
        if len(entries) <= self.limit:
            return
        entries.sort(key=lambda p: p.stat().st_mtime)
        for old in entries[: len(entries) - self.limit]:
            with contextlib.suppress(OSError):
                old.unlink()
