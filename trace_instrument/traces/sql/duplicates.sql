-- Rows identical to the row before them in their sample's order (left out of the latencies).
SELECT count(*) AS n FROM transitions WHERE dup
