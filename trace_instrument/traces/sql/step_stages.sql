-- Per step and training stage: the time of the stage's last row (the weight sync: its first).
SELECT step, code, CASE WHEN code = {{event(SYNC_PARAMS)}} THEN min(ts) ELSE max(ts) END AS ts
FROM events
WHERE step IS NOT NULL AND code BETWEEN {{event(TRAIN_SAMPLE)}} AND {{event(SYNC_PARAMS)}}
  AND code <> {{event(FILTER_TRAJECTORIES)}}
GROUP BY step, code
ORDER BY step, code
