"""trace_instrument: instrument a verl checkout with sample-flow, progress and trajectory tracing."""

__version__ = "0.1.0"
