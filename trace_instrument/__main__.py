"""`python -m trace_instrument` and the `trace-instrument` command.

The stop signals are caught before the command line loads (a quarter of a second of imports): one
that comes meanwhile ends the run as any later one does, with its line and exit code, rather than
with a traceback of the import or no word at all.
"""

from __future__ import annotations

import signal

# engine.files.STOP_SIGNALS, by name: that module is not to be loaded yet (tests/test_orphans.py holds them equal)
EARLY_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")


def main() -> None:
    """Record a stop signal while the command line loads; it then ends the run (cli.main)."""
    early: list[int] = []
    for name in EARLY_SIGNALS:
        signum = getattr(signal, name, None)
        if signum is not None and signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, lambda number, frame: early.append(number))
    from trace_instrument import cli

    cli.main(early)


if __name__ == "__main__":
    main()
