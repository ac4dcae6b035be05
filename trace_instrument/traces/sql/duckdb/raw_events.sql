-- DuckDB: the sample-flow CSV files as rows (no header; 6 columns), bad rows to the rejects tables.
CREATE OR REPLACE TEMP VIEW raw_events AS
SELECT f.file_id, r.job_id, r.sample_id, r.ts, r.content
FROM read_csv({{paths}},
              columns = {'job_id': 'VARCHAR', 'cat': 'VARCHAR', 'sample_id': 'VARCHAR', 'status': 'VARCHAR',
                         'ts': 'BIGINT', 'content': 'VARCHAR'},
              header = false, auto_detect = false, delim = ',', quote = '"', escape = '"',
              filename = true, store_rejects = true,
              rejects_table = 'csv_rejects', rejects_scan = 'csv_scans') AS r
JOIN files AS f ON f.path = r.filename
WHERE {{torn_filter}}
