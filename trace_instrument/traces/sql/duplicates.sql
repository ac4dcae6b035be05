-- Rows identical to the row before them in their sample's order (left out of the latencies).
SELECT coalesce(sum(k), 0) AS n FROM file_pairs WHERE dup
