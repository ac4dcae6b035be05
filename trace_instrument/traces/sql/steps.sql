-- Step windows from the rows that carry global_step: data preparation, rollout (AGENT_LOOP rows),
-- training (TRAIN_* rows) and the weight sync.
SELECT step,
       min(CASE WHEN code BETWEEN 1 AND 4 THEN ts END) AS data_ts,
       min(CASE WHEN code IN (5, 6, 10) THEN ts END) AS rollout_start,
       max(CASE WHEN code IN (5, 6, 10) THEN ts END) AS rollout_end,
       min(CASE WHEN code BETWEEN 12 AND 17 THEN ts END) AS train_start,
       max(CASE WHEN code BETWEEN 12 AND 17 THEN ts END) AS train_end,
       min(CASE WHEN code = 19 THEN ts END) AS sync_ts,
       count(CASE WHEN code = 10 THEN 1 END) AS completed,
       count(CASE WHEN code = 17 THEN 1 END) AS trained
FROM events
WHERE step IS NOT NULL AND code IS NOT NULL
GROUP BY step
ORDER BY step
