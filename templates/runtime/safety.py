"""Failure containment: nothing in this package raises into, or deadlocks, the training code.

- ``warn_once`` logs a warning the first time a cause is seen, never raises.
- ``never_raise`` turns a method's failures into ``warn_once`` and a fallback.
- ``enter``/``leave`` mark the calling thread as inside the runtime. A second
  call made by the same thread while it is inside (a signal handler that traces,
  a ``__str__`` that logs progress) is refused by ``enter``: the caller drops
  and counts its record instead of waiting on a lock that this very thread holds.
- ``raised_by_signal_handler`` tells the exceptions that are not the tracing's
  own failure: every ``except`` that may run in the caller's thread re-raises
  those, unchanged (a step watchdog's ``TimeoutError`` must end the step).
"""

# Containment is this package's job: no failure of the tracing's own reaches the training
# loop, and nothing else (a signal handler's exception) is kept from it (see safety.py).

from __future__ import annotations

import functools
import logging
import signal
import sys
import threading
import types
import weakref
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
    except Exception as exc:
        if raised_by_signal_handler(exc):
            raise


def never_raise(
    fallback: Callable[[], Any] | None = None,
) -> Callable[[Callable[..., _Result]], Callable[..., _Result]]:
    """Decorator: swallow exceptions, warn once, return ``fallback()`` (or None)."""

    def decorate(func: Callable[..., _Result]) -> Callable[..., _Result]:
        @functools.wraps(func)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            try:
                return func(*args, **kwargs)
            except Exception as exc:
                if raised_by_signal_handler(exc):
                    raise
                warn_once(func.__qualname__, "tracing: %s failed; continuing", func.__qualname__, exc_info=True)
                return fallback() if fallback is not None else None

        return guarded

    return decorate


_inside = threading.local()


def enter() -> bool:
    """Mark this thread as inside the runtime; False (and no new mark) if it already is.

    The mark is the entry point's frame (the caller of ``enter``), and a mark
    counts only while that frame is still on this thread's stack. So whatever
    interrupts an entry point where no ``finally`` can help (a signal handler's
    exception right after ``enter`` returned, or inside ``leave``), the mark it
    leaves is stale and the next call goes in: no interruption point can shut
    a thread out for good. Checking the stack costs only when a mark is found
    (a re-entrant call, or the first call after such an interruption).
    """
    holder = getattr(_inside, "holder", None)
    if holder is not None:
        if _on_stack(holder, sys._getframe(1)):
            return False
        _release_abandoned_locks()  # what interrupted that call may have left a lock held too
    _inside.holder = sys._getframe(1)
    return True


def _on_stack(frame: types.FrameType, top: types.FrameType | None) -> bool:
    while top is not None:
        if top is frame:
            return True
        top = top.f_back
    return False


def leave() -> None:
    """Undo a successful ``enter()``; after an exception, also release what it left held."""
    if sys.exc_info()[1] is not None:
        _release_abandoned_locks()
    _inside.holder = None


# Locks the runtime takes with a timeout in the caller's thread.
_recoverable_locks: weakref.WeakSet[Any] = weakref.WeakSet()


def lock() -> Any:
    """A lock for code that runs in the caller's thread, released if an interruption abandons it.

    ``acquire(timeout=...)`` cannot be made one step with the ``try`` that releases:
    a signal handler may raise right after it returned. Such a lock stays held by
    the interrupted thread, and would make every other thread wait out its
    timeout on each call. So these are RLocks, whose owner is known: when a call
    ends in an exception, or a stale mark shows one did (``enter``), the calling
    thread is outside the runtime and releases whatever of them it still owns.
    """
    new = threading.RLock()
    _recoverable_locks.add(new)
    return new


def _release_abandoned_locks() -> None:
    for held in list(_recoverable_locks):
        while held._is_owned():
            held.release()


def raised_by_signal_handler(exc: BaseException) -> bool:
    """True if ``exc`` came out of a signal handler: the caller's, to receive unchanged.

    A Python signal handler runs between two bytecodes of the main thread, or
    inside a blocking call it interrupts; whatever it raises propagates through
    the function registered for the signal, whose frame is in the traceback.
    A failure of the tracing itself (formatting a caller's value, the runtime's
    I/O) has no such frame. Only called on a failure path: reading the current
    handlers costs a few microseconds.
    """
    tb = exc.__traceback__
    if tb is None or tb.tb_next is None:  # raised in the catching frame itself: no handler ran
        return False
    handlers = _signal_handler_codes()
    while tb is not None:
        if tb.tb_frame.f_code in handlers:
            return True
        tb = tb.tb_next
    return False


def _signal_handler_codes() -> set[types.CodeType]:
    codes = set()
    for number in signal.valid_signals():
        try:
            code = _code_of(signal.getsignal(number))
        except (OSError, ValueError):  # a number this platform cannot ask about
            continue
        if code is not None:
            codes.add(code)
    return codes


def _code_of(handler: object) -> types.CodeType | None:
    """The code object a call of ``handler`` runs first (function, method, partial, callable object)."""
    for _ in range(8):  # partials of partials, within reason
        if isinstance(handler, functools.partial):
            handler = handler.func
            continue
        if handler is None or isinstance(handler, int):  # SIG_DFL, SIG_IGN, a handler set from C
            return None
        function = getattr(handler, "__func__", handler)
        if isinstance(function, types.FunctionType):
            return function.__code__
        call = getattr(type(handler), "__call__", None)  # noqa: B004 - its code, not whether it is callable
        return call.__code__ if isinstance(call, types.FunctionType) else None
    return None
