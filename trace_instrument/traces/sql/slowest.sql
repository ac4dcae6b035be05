-- The slowest trajectories, first row to last row.
SELECT sample_id, last_ts - first_ts AS total
FROM entities
WHERE is_traj
ORDER BY total DESC, sample_id
LIMIT {{limit}}
