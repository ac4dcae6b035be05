-- Trajectories by stop reason (the agent loop's, else the last turn's finish reason, else unknown).
SELECT stop_reason AS reason, count(*) AS n
FROM trajectories
GROUP BY stop_reason
ORDER BY n DESC, reason
