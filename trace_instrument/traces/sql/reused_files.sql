-- Sample files in which uids were drawn for a step after uids of a later step: one process draws
-- them step after step, so such a file holds two runs (a second run appended to a file of the same
-- host name and pid, as a restarted container gets). The first such pair of steps per file.
WITH drawn AS (
    SELECT e.file_id, c.step, min(e.first_ts) AS lo, max(e.last_ts) AS hi
    FROM event_counts_all AS e
    JOIN contents AS c ON c.cid = e.cid
    WHERE c.code = {{event(UID_GENERATED)}} AND c.step IS NOT NULL
    GROUP BY e.file_id, c.step
)
SELECT a.file_id, min(a.step) AS step, min(b.step) AS later_step
FROM drawn AS a
JOIN drawn AS b ON b.file_id = a.file_id AND b.step > a.step AND b.lo < a.hi
GROUP BY a.file_id
ORDER BY a.file_id
