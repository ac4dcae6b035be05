-- DuckDB: the sample-flow CSV files as rows (no header; 6 columns), bad rows to the rejects tables.
-- `read_path` is the file read: the trace file itself, or the clean copy of a damaged one (salvage.py).
CREATE OR REPLACE TEMP VIEW raw_events AS
SELECT f.file_id, r.job_id, r.sample_id, r.ts, r.content
FROM read_csv({{paths}}, {{csv_options}}, store_rejects = true,
              rejects_table = '{{rejects}}', rejects_scan = '{{rejects}}_scans') AS r
JOIN files AS f ON f.read_path = r.filename
-- cat and status are not used, but read: DuckDB checks a field's bytes only when a column is
-- used, and a row with bytes that are not UTF-8 in any field is refused (as Spark's is)
WHERE {{torn_filter}} AND length(r.cat) IS DISTINCT FROM -1 AND length(r.status) IS DISTINCT FROM -1
