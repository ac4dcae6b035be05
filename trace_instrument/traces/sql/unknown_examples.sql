-- First examples of rows left out: unknown stage/detail, or content that does not parse.
SELECT e.file_id, e.sample_id, e.ts, c.stage, c.detail, c.bad_content
FROM events AS e
JOIN contents AS c ON c.cid = e.cid
WHERE e.code IS NULL AND {{which}}
-- ties broken by everything shown, so the same files give the same examples (NULLs as '': the engines sort NULLs apart)
ORDER BY e.file_id, e.ts, e.sample_id, coalesce(c.stage, ''), coalesce(c.detail, ''), coalesce(c.bad_content, '')
LIMIT 3
