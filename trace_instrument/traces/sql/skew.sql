-- Smallest time of the transitions that cross from one file (host-pid) to another, per pair:
-- with both directions between two hosts, half their difference estimates the clock offset.
SELECT prev_file, file_id, min(dt) AS min_dt, sum(k) AS n
FROM file_pairs
WHERE NOT dup AND prev_file <> file_id
GROUP BY prev_file, file_id
