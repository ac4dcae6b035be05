-- `analyze --follow`: the summaries of the appended rows (event_summaries.sql into `event_counts_new`
-- and `placeholder_events_new`) merged into the run's. Counts add up, spans widen: the same rows
-- as a build over every event gives, since events_all only grew by the appended rows.
CREATE OR REPLACE TABLE event_counts_all AS
SELECT file_id, job_id, cid, CAST(sum(n) AS BIGINT) AS n, min(first_ts) AS first_ts, max(last_ts) AS last_ts
FROM (SELECT * FROM event_counts_all UNION ALL SELECT * FROM event_counts_new) AS both_parts
GROUP BY file_id, job_id, cid;

INSERT INTO placeholder_events_all SELECT * FROM placeholder_events_new
