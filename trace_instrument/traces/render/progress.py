"""What a long read is doing, on stderr, for a terminal only: nothing for a read of a second or so."""

from __future__ import annotations

import threading
from types import TracebackType

from rich.console import Console
from rich.status import Status

SHOW_AFTER_SECONDS = 1.5


class ReadProgress:
    """A spinner with the current part of the read (``analyze``'s ``progress`` callback), shown
    only once the read has taken ``delay`` seconds and only when ``console`` is a terminal."""

    def __init__(self, console: Console, delay: float = SHOW_AFTER_SECONDS) -> None:
        self._console = console
        self._delay = delay
        self._lock = threading.Lock()
        self._message = "reading the traces"
        self._status: Status | None = None
        self._timer: threading.Timer | None = None

    def __call__(self, message: str) -> None:
        with self._lock:
            self._message = message
            if self._status is not None:
                self._status.update(message)

    def _show(self) -> None:
        with self._lock:
            if self._timer is None:  # stopped meanwhile
                return
            self._status = Status(self._message, console=self._console)
            self._status.start()

    def __enter__(self) -> ReadProgress:  # noqa: PYI034 - typing.Self needs Python 3.11
        if self._console.is_terminal:
            self._timer = threading.Timer(self._delay, self._show)
            self._timer.daemon = True
            self._timer.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, trace: TracebackType | None
    ) -> None:
        with self._lock:
            timer, self._timer = self._timer, None
            status, self._status = self._status, None
        if timer is not None:
            timer.cancel()
        if status is not None:
            status.stop()
