"""Reading trace folders back: the engine behind ``analyze`` and ``export`` (``analyze.analyze``).

Returns typed results (``model``); never prints or exits. DuckDB is the default
engine; ``spark_backend`` runs the same SQL files on Spark. The package imports
nothing itself: the command line (``traces.cli``) loads the reader when a reader
command runs, so the codemod's commands start without it.
"""
