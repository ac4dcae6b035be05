-- Per step and training stage: the time of the stage's last row (the weight sync: its first).
SELECT c.step, c.code, CASE WHEN c.code = {{event(SYNC_PARAMS)}} THEN min(e.first_ts) ELSE max(e.last_ts) END AS ts
FROM event_counts AS e
JOIN contents AS c ON c.cid = e.cid
WHERE c.step IS NOT NULL AND c.code BETWEEN {{event(TRAIN_SAMPLE)}} AND {{event(SYNC_PARAMS)}}
  AND c.code <> {{event(FILTER_TRAJECTORIES)}}
GROUP BY c.step, c.code
ORDER BY c.step, c.code
