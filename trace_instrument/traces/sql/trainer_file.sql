-- The file (host-pid) that wrote the training and sync rows: the trainer, the clock reference.
SELECT e.file_id, sum(e.n) AS n
FROM event_counts AS e
JOIN contents AS c ON c.cid = e.cid
WHERE c.code BETWEEN {{event(TRAIN_SAMPLE)}} AND {{event(SYNC_PARAMS)}}
GROUP BY e.file_id
ORDER BY n DESC, e.file_id
LIMIT 1
