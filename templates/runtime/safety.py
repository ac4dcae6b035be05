"""Failure containment: nothing in this package raises into, or deadlocks, the training code.

- ``warn_once`` logs a warning the first time a cause is seen, never raises.
- ``never_raise`` turns a method's failures into ``warn_once`` and a fallback.
- ``enter``/``leave`` mark the calling thread as inside the runtime. A second
  call made by the same thread while it is inside (a signal handler that traces,
  a ``__str__`` that logs progress) is refused by ``enter``: the caller drops
  and counts its record instead of waiting on a lock that this very thread holds.
"""

# Containment is this package's job: its entry points catch every exception, so that
# none reaches the training loop (see safety.py).
# ruff: noqa: BLE001, S110

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

logger = logging.getLogger(__name__.rsplit(".", 1)[0])

_warned_keys: set[object] = set()
_Result = TypeVar("_Result")


def warn_once(key: object, message: str, *args: object, exc_info: bool = False) -> None:
    """Log a warning the first time ``key`` is seen; never raises."""
    try:
        if key in _warned_keys:
            return
        _warned_keys.add(key)
        logger.warning(message, *args, exc_info=exc_info)
    except Exception:
        pass


def never_raise(
    fallback: Callable[[], Any] | None = None,
) -> Callable[[Callable[..., _Result]], Callable[..., _Result]]:
    """Decorator: swallow exceptions, warn once, return ``fallback()`` (or None)."""

    def decorate(func: Callable[..., _Result]) -> Callable[..., _Result]:
        @functools.wraps(func)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            try:
                return func(*args, **kwargs)
            except Exception:
                warn_once(func.__qualname__, "tracing: %s failed; continuing", func.__qualname__, exc_info=True)
                return fallback() if fallback is not None else None

        return guarded

    return decorate


_inside = threading.local()


def enter() -> bool:
    """Mark this thread as inside the runtime; False (and no mark) if it already is.

    Signal handlers run between two bytecodes of the thread they interrupt, so
    the check and the mark cannot be split by a handler that matters: one that
    runs before the mark finds no lock of ours held by this thread.
    """
    if getattr(_inside, "active", False):
        return False
    _inside.active = True
    return True


def leave() -> None:
    """Undo a successful ``enter()``."""
    _inside.active = False
