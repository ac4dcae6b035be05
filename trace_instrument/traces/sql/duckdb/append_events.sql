-- `analyze --follow`: the rows of the appended lines (in the attached database `delta`) join
-- `contents` (new contents get the next ids) and `events_all` (pointing at the merged contents), by way
-- of `appended_events`, which the event summaries of the appended rows are built from.
INSERT INTO contents
SELECT (SELECT coalesce(max(cid), 0) FROM contents) + row_number() OVER (ORDER BY d.content), d.content, d.code,
       d.step, d.param, d.stage, d.detail, d.bad_content
FROM delta.contents AS d
WHERE NOT EXISTS (SELECT 1 FROM contents AS m WHERE m.content IS NOT DISTINCT FROM d.content);

CREATE TEMP TABLE appended_events AS
SELECT e.file_id, e.job_id, e.sample_id, e.ts, m.cid, e.code, e.step
FROM delta.events_all AS e
JOIN delta.contents AS d ON d.cid = e.cid
JOIN contents AS m ON m.content IS NOT DISTINCT FROM d.content;

INSERT INTO events_all SELECT * FROM appended_events
