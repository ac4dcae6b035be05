"""Rendering analyses: terminal tables (rich), markdown, JSON metrics and the HTML report.

The UI layer of ``analyze``: it may import rich; the engine in ``trace_instrument.traces`` may not.
"""
