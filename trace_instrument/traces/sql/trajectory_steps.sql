-- The global steps the trajectories carry.
SELECT DISTINCT global_step FROM trajectories WHERE global_step IS NOT NULL
