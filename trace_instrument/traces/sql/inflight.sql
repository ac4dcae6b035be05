-- Samples never trained: trajectories without TRAIN_UPDATE, and prompts that never got a
-- trajectory. Grouped by their last stage and their generation step (`gen_step`, entities.sql: the
-- views sum the groups up either way); age is measured to `end_ts`, the last row of the run (its
-- selected steps), which the header query has found.
WITH run AS (SELECT CAST({{end_ts}} AS BIGINT) AS end_ts),
with_traj AS (SELECT DISTINCT uid FROM entities WHERE is_traj),
never_trained AS (
    SELECT sample_id, last_code, last_ordered_ts, last_file, gen_step FROM entities WHERE is_traj AND NOT m_trained
    UNION ALL
    SELECT e.sample_id, e.last_code, e.last_ordered_ts, e.last_file, e.gen_step
    FROM entities AS e LEFT JOIN with_traj AS w ON w.uid = e.uid
    WHERE NOT e.is_traj AND w.uid IS NULL AND NOT e.m_trained
)
SELECT last_code, gen_step, count(*) AS n, max(run.end_ts - last_ordered_ts) AS oldest
FROM never_trained CROSS JOIN run
GROUP BY last_code, gen_step
