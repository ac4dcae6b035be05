-- Per step: trajectories, turns per trajectory, completion tokens per trajectory and verl's
-- response_length (the trajectories that recorded it; clipped: it reached the recorded budget).
SELECT step, count(*) AS n,
       avg(n_turns), min(n_turns), max(n_turns), {{quantiles(n_turns, 0.5, 0.9, 0.95, 0.99)}},
       count(completion_tokens), avg(completion_tokens), min(completion_tokens), max(completion_tokens),
       count(response_length), avg(response_length), min(response_length), max(response_length),
       count(CASE WHEN response_length IS NOT NULL AND max_response_length IS NOT NULL THEN 1 END),
       count(CASE WHEN response_length = max_response_length THEN 1 END)
FROM step_trajectories
WHERE step IS NOT NULL
GROUP BY step
ORDER BY step
