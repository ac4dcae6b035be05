-- First examples of rows left out: unknown stage/detail, or content that does not parse.
SELECT e.file_id, e.sample_id, e.ts, c.stage, c.detail, c.bad_content
FROM events AS e
JOIN contents AS c ON c.cid = e.cid
WHERE e.code IS NULL AND {{which}}
ORDER BY e.file_id, e.ts
LIMIT 3
