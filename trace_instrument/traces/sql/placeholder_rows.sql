-- Rows whose sample id has a placeholder uid (backend.PLACEHOLDER_UIDS): their count and the first three.
-- The ids are told apart once each, not once per row.
SELECT file_id, sample_id, ts, count(*) OVER () AS n
FROM events
WHERE code IS NOT NULL AND code <> {{event(SYNC_PARAMS)}}
  AND sample_id IN (SELECT sample_id FROM (SELECT DISTINCT sample_id FROM events) AS ids
                    WHERE {{is_placeholder(sample_id)}})
ORDER BY ts, file_id
LIMIT 3
