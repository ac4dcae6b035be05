-- Rows read, time span, unknown rows. Counted per content first: the unknown and unparsable
-- contents are known from `contents` alone (the event summary has the counts per content).
SELECT coalesce(sum(e.n), 0) AS n, min(e.first_ts) AS first_ts, max(e.last_ts) AS last_ts,
       coalesce(sum(CASE WHEN c.code IS NULL AND c.bad_content IS NULL THEN e.n END), 0) AS unknown_stage,
       coalesce(sum(CASE WHEN c.bad_content IS NOT NULL THEN e.n END), 0) AS bad_content
FROM (SELECT cid, sum(n) AS n, min(first_ts) AS first_ts, max(last_ts) AS last_ts FROM event_counts GROUP BY cid) AS e
JOIN contents AS c ON c.cid = e.cid
