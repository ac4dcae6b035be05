-- Staleness: the step a trajectory was trained in minus the step it was generated in
-- (its agent_run_completed row; else its session / its prompt's agent_task_started row).
SELECT t.train_step, t.train_step - coalesce(t.completed_step, t.started_step, s.started_step) AS staleness,
       count(*) AS n
FROM entities AS t
LEFT JOIN (SELECT uid, started_step FROM entities WHERE NOT is_traj) AS s ON s.uid = t.uid
WHERE t.is_traj AND t.train_step IS NOT NULL
  AND coalesce(t.completed_step, t.started_step, s.started_step) IS NOT NULL
GROUP BY t.train_step, t.train_step - coalesce(t.completed_step, t.started_step, s.started_step)
ORDER BY 1, 2
