-- Per step: trajectories, turns per trajectory and completion tokens per trajectory.
SELECT step, count(*) AS n,
       avg(n_turns), min(n_turns), max(n_turns), {{quantiles(n_turns, 0.5, 0.9, 0.95, 0.99)}},
       avg(response_tokens), min(response_tokens), max(response_tokens)
FROM step_trajectories
WHERE step IS NOT NULL
GROUP BY step
ORDER BY step
