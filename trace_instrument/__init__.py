"""trace_instrument: instrument a verl checkout with sample-flow, progress and trajectory tracing."""

# the one definition of the release (pyproject.toml reads it); bump it whenever anchors/ or templates/
# change, with the runtime's copy (templates/runtime/__init__.py): tests/test_release.py says how
__version__ = "0.3.0"
