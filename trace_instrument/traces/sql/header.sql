-- Rows read, time span, unknown rows.
SELECT count(*) AS n, min(ts) AS first_ts, max(ts) AS last_ts,
       count(CASE WHEN code IS NULL AND bad_content IS NULL THEN 1 END) AS unknown_stage,
       count(CASE WHEN bad_content IS NOT NULL THEN 1 END) AS bad_content
FROM events
