-- Spark: the CSV rows (read by the DataFrame reader into raw_csv) with their file ids; rows the
-- reader could not fill (no timestamp or no content) are left out and counted by the loader.
CREATE OR REPLACE TEMP VIEW raw_events AS
SELECT f.file_id, r.job_id, r.sample_id, r.ts, r.content
FROM raw_csv AS r
JOIN files AS f ON f.uri = r.path
WHERE r.ts IS NOT NULL AND r.content IS NOT NULL AND {{torn_filter}}
