-- Step windows from the rows that carry global_step: data preparation, rollout (AGENT_LOOP rows),
-- training (TRAIN_* rows) and the weight sync.
-- Read from the event summary: a content fixes its code and step.
SELECT c.step,
       min(CASE WHEN c.code BETWEEN {{event(UID_GENERATED)}} AND {{event(DISPATCHED_TO_WORKER)}} THEN e.first_ts END) AS data_ts,
       min(CASE WHEN c.code IN ({{event(AGENT_TASK_STARTED, SESSION_STARTED, AGENT_RUN_COMPLETED)}}) THEN e.first_ts END) AS rollout_start,
       max(CASE WHEN c.code IN ({{event(AGENT_TASK_STARTED, SESSION_STARTED, AGENT_RUN_COMPLETED)}}) THEN e.last_ts END) AS rollout_end,
       min(CASE WHEN c.code BETWEEN {{event(TRAIN_SAMPLE)}} AND {{event(TRAIN_UPDATE)}} THEN e.first_ts END) AS train_start,
       max(CASE WHEN c.code BETWEEN {{event(TRAIN_SAMPLE)}} AND {{event(TRAIN_UPDATE)}} THEN e.last_ts END) AS train_end,
       min(CASE WHEN c.code = {{event(SYNC_PARAMS)}} THEN e.first_ts END) AS sync_ts,
       coalesce(sum(CASE WHEN c.code = {{event(AGENT_RUN_COMPLETED)}} THEN e.n END), 0) AS completed,
       coalesce(sum(CASE WHEN c.code = {{event(TRAIN_UPDATE)}} THEN e.n END), 0) AS trained
FROM event_counts AS e
JOIN contents AS c ON c.cid = e.cid
WHERE c.step IS NOT NULL AND c.code IS NOT NULL
GROUP BY c.step
ORDER BY c.step
