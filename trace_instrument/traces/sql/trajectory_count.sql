-- Trajectories and their rows (sizes the timeline).
SELECT count(*) AS n, coalesce(sum(n_rows), 0) AS rows_ FROM entities WHERE is_traj
