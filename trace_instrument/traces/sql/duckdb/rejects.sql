-- Rows the CSV reader refused (wrong column count, bad bytes, a timestamp that is not a number).
SELECT s.file_path, e.line, any_value(CAST(e.error_type AS VARCHAR)) AS error, any_value(e.csv_line) AS text
FROM csv_rejects AS e JOIN csv_scans AS s ON s.scan_id = e.scan_id AND s.file_id = e.file_id
GROUP BY s.file_path, e.line
ORDER BY s.file_path, e.line
