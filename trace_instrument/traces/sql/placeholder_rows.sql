-- Rows whose sample id has a placeholder uid (PLACEHOLDER_UIDS, backend.py): their count and the
-- first three, from the placeholder rows kept apart at load (event_summaries.sql).
SELECT file_id, sample_id, ts, count(*) OVER () AS n
FROM placeholder_events
ORDER BY ts, file_id, sample_id
LIMIT 3
