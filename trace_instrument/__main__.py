"""`python -m trace_instrument`: the same entry point as the `trace-instrument` command."""

from trace_instrument.cli import main

main()
