-- Parquet `turns`: one row per turn of a trajectory.
SELECT * FROM turns
