-- Stop reason of each trajectory: its last turn's finish_reason (empty or missing: unknown).
SELECT coalesce(NULLIF(stop_reason, ''), 'unknown') AS reason, count(*) AS n
FROM trajectories
GROUP BY coalesce(NULLIF(stop_reason, ''), 'unknown')
ORDER BY n DESC, reason
