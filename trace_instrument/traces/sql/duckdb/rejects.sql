-- The lines the CSV reader refused (wrong column count, bad bytes, a timestamp that is not a number),
-- with their text: the files that hold one are read again row by row (salvage.py).
SELECT s.file_path, e.line, any_value(e.csv_line) AS text
FROM {{rejects}} AS e JOIN {{rejects}}_scans AS s ON s.scan_id = e.scan_id AND s.file_id = e.file_id
GROUP BY s.file_path, e.line
ORDER BY s.file_path, e.line
