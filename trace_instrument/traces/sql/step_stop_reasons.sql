-- Per step: trajectories by stop reason (empty or missing: unknown).
SELECT step, reason, count(*) AS n
FROM step_trajectories
WHERE step IS NOT NULL
GROUP BY step, reason
ORDER BY step, n DESC, reason
