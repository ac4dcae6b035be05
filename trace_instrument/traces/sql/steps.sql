-- Step windows from the rows that carry global_step: data preparation, rollout (AGENT_LOOP rows),
-- training (TRAIN_* rows) and the weight sync.
SELECT step,
       min(CASE WHEN code BETWEEN {{event(UID_GENERATED)}} AND {{event(DISPATCHED_TO_WORKER)}} THEN ts END) AS data_ts,
       min(CASE WHEN code IN ({{event(AGENT_TASK_STARTED, SESSION_STARTED, AGENT_RUN_COMPLETED)}}) THEN ts END) AS rollout_start,
       max(CASE WHEN code IN ({{event(AGENT_TASK_STARTED, SESSION_STARTED, AGENT_RUN_COMPLETED)}}) THEN ts END) AS rollout_end,
       min(CASE WHEN code BETWEEN {{event(TRAIN_SAMPLE)}} AND {{event(TRAIN_UPDATE)}} THEN ts END) AS train_start,
       max(CASE WHEN code BETWEEN {{event(TRAIN_SAMPLE)}} AND {{event(TRAIN_UPDATE)}} THEN ts END) AS train_end,
       min(CASE WHEN code = {{event(SYNC_PARAMS)}} THEN ts END) AS sync_ts,
       count(CASE WHEN code = {{event(AGENT_RUN_COMPLETED)}} THEN 1 END) AS completed,
       count(CASE WHEN code = {{event(TRAIN_UPDATE)}} THEN 1 END) AS trained
FROM events
WHERE step IS NOT NULL AND code IS NOT NULL
GROUP BY step
ORDER BY step
