-- The analysis a previous run stored for the same step range (DuckDB cache only).
SELECT analysis FROM cache_results WHERE steps = {{key}}
