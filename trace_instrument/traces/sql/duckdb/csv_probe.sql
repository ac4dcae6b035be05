-- DuckDB: read one sample file alone, with the options of raw_events (does this file stop the scan?).
SELECT count(*) FROM read_csv({{paths}}, {{csv_options}}, store_rejects = true,
                              rejects_table = 'csv_probe_rejects', rejects_scan = 'csv_probe_scans')
