-- The file (host-pid) that wrote the training and sync rows: the trainer, the clock reference.
SELECT file_id, count(*) AS n FROM events WHERE code BETWEEN 12 AND 19 GROUP BY file_id ORDER BY n DESC, file_id LIMIT 1
