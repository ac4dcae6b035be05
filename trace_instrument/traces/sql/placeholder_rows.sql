-- Rows whose sample id has the placeholder uid PLACEHOLDER_UIDS[{{which}}] (backend.py): their count
-- and the first three. One query per placeholder: each skips the blocks its prefix cannot be in.
SELECT file_id, sample_id, ts, count(*) OVER () AS n
FROM events
WHERE code IS NOT NULL AND code <> {{event(SYNC_PARAMS)}} AND {{is_placeholder_of(sample_id, {{which}})}}
ORDER BY ts, file_id, sample_id
LIMIT 3
