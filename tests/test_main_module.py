"""`python -m trace_instrument` runs the same entry point as the `trace-instrument` command (in this
process, the entry point stood in for: the real one ends the process; the slow tier starts the module
as a real process, test_cli.test_python_dash_m_runs_the_cli)."""

from __future__ import annotations

import runpy
import signal
import sys
from collections.abc import Iterator

import pytest

from trace_instrument import cli

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@pytest.fixture
def handlers_kept() -> Iterator[None]:
    """The module catches the stop signals before the command line loads: put this process's back."""
    before = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


def test_the_module_runs_the_commands_entry_point(monkeypatch: pytest.MonkeyPatch, handlers_kept: None) -> None:
    calls: list[tuple[list[str], list[int]]] = []
    monkeypatch.setattr(cli, "main", lambda early: calls.append((list(sys.argv), list(early))))
    monkeypatch.setattr(sys, "argv", ["trace_instrument", "--version"])
    runpy.run_module("trace_instrument", run_name="__main__", alter_sys=False)
    assert calls == [(["trace_instrument", "--version"], [])], "the command's entry point, once, with the arguments"


def test_a_stop_signal_while_the_command_line_loads_is_handed_to_it(
    monkeypatch: pytest.MonkeyPatch, handlers_kept: None
) -> None:
    """The handlers the module sets record each stop signal for the command line (a real signal
    during the imports: tests/test_orphans.py, slow tier)."""
    handed: list[list[int]] = []

    def entry(early: list[int]) -> None:
        for signum in STOP_SIGNALS:
            handler = signal.getsignal(signum)
            assert callable(handler), "a handler of the module's own is set while the command line loads"
            handler(signum, None)
        handed.append(list(early))

    monkeypatch.setattr(cli, "main", entry)
    monkeypatch.setattr(sys, "argv", ["trace_instrument"])
    runpy.run_module("trace_instrument", run_name="__main__", alter_sys=False)
    assert handed == [list(STOP_SIGNALS)], "every signal that came before the command line loaded is handed to it"
