-- The file (host-pid) that wrote the training and sync rows: the trainer, the clock reference.
SELECT file_id, count(*) AS n FROM events WHERE code BETWEEN {{event(TRAIN_SAMPLE)}} AND {{event(SYNC_PARAMS)}} GROUP BY file_id ORDER BY n DESC, file_id LIMIT 1
