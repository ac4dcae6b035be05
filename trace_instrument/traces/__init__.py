"""Reading trace folders back: the engine behind ``analyze`` and ``export``.

Returns typed results (``model``); never prints or exits. DuckDB is the default
engine; ``spark_backend`` runs the same SQL files on Spark.
"""

from trace_instrument.traces.analyze import Options, analyze
from trace_instrument.traces.model import Analysis, TraceInputError

__all__ = ["Analysis", "Options", "TraceInputError", "analyze"]
