-- Trajectories for the timeline: the slowest ones (first row to last row), then a uniform
-- sample (by a hash of the id) of the others.
CREATE OR REPLACE TEMP TABLE perfetto_selected AS
WITH ranked AS (
    SELECT sample_id, last_ts - first_ts AS total,
           row_number() OVER (ORDER BY last_ts - first_ts DESC, sample_id) AS slow_rank,
           {{hash_of(sample_id)}} AS h
    FROM entities
    WHERE is_traj
)
SELECT sample_id FROM ranked WHERE slow_rank <= {{slowest}}
UNION ALL
SELECT sample_id FROM (
    SELECT sample_id FROM ranked WHERE slow_rank > {{slowest}} ORDER BY h, sample_id LIMIT {{uniform}}
) AS uniform_sample
