"""`python -m trace_instrument` runs the same entry point as the `trace-instrument` command (in this
process, the entry point stood in for: the real one ends the process; the slow tier starts the module
as a real process, test_cli.test_python_dash_m_runs_the_cli)."""

from __future__ import annotations

import runpy
import sys

import pytest

from trace_instrument import cli


def test_the_module_runs_the_commands_entry_point(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[list[str]] = []
    monkeypatch.setattr(cli, "main", lambda: calls.append(list(sys.argv)))
    monkeypatch.setattr(sys, "argv", ["trace_instrument", "--version"])
    runpy.run_module("trace_instrument", run_name="__main__", alter_sys=False)
    assert calls == [["trace_instrument", "--version"]], "the command's entry point, once, with the arguments"
