-- DuckDB: the sample-flow CSV files as rows (no header; 6 columns), bad rows to the rejects tables.
-- `read_path` is the file read: the trace file itself, or the clean copy of a damaged one (salvage.py).
CREATE OR REPLACE TEMP VIEW raw_events AS
SELECT f.file_id, r.job_id, r.sample_id, r.ts, r.content
FROM read_csv({{paths}}, {{csv_options}}, store_rejects = true,
              rejects_table = '{{rejects}}', rejects_scan = '{{rejects}}_scans') AS r
JOIN files AS f ON f.read_path = r.filename
WHERE {{torn_filter}}
