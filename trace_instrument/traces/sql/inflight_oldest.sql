-- The oldest never-trained samples with their ids (see inflight.sql).
WITH run AS (SELECT CAST({{end_ts}} AS BIGINT) AS end_ts),
with_traj AS (SELECT DISTINCT uid FROM entities WHERE is_traj),
never_trained AS (
    SELECT sample_id, last_code, last_ordered_ts, last_file FROM entities WHERE is_traj AND NOT m_trained
    UNION ALL
    SELECT e.sample_id, e.last_code, e.last_ordered_ts, e.last_file
    FROM entities AS e LEFT JOIN with_traj AS w ON w.uid = e.uid
    WHERE NOT e.is_traj AND w.uid IS NULL AND NOT e.m_trained
)
SELECT sample_id, last_code, last_ordered_ts, run.end_ts - last_ordered_ts AS age, last_file
FROM never_trained CROSS JOIN run
ORDER BY age DESC, sample_id
LIMIT {{limit}}
