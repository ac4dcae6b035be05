-- First examples of rows left out: unknown stage/detail, or content that does not parse.
SELECT file_id, sample_id, ts, stage, detail, bad_content
FROM events
WHERE code IS NULL AND {{which}}
ORDER BY file_id, ts
LIMIT 3
