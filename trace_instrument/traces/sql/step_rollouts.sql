-- Per step: trajectories, turns per trajectory, completion tokens per trajectory and verl's
-- response_length (the trajectories that recorded it; clipped: it reached the recorded budget, or the
-- longest response of the step, which verl's v1 trainer pads its batch to), and
-- the trajectories that recorded their weight versions, of them those that spanned more than one.
SELECT step, count(*) AS n,
       avg(n_turns), min(n_turns), max(n_turns), {{quantiles(n_turns, 0.5, 0.9, 0.95, 0.99)}},
       count(completion_tokens), avg(completion_tokens), min(completion_tokens), max(completion_tokens),
       count(response_length), avg(response_length), min(response_length), max(response_length),
       count(CASE WHEN response_length IS NOT NULL AND max_response_length IS NOT NULL THEN 1 END),
       count(CASE WHEN response_length = max_response_length THEN 1 END),
       count(CASE WHEN response_length = batch_max_length THEN 1 END),
       count(CASE WHEN min_global_steps IS NOT NULL AND max_global_steps IS NOT NULL THEN 1 END),
       count(CASE WHEN max_global_steps > min_global_steps THEN 1 END)
FROM step_trajectories
WHERE step IS NOT NULL
GROUP BY step
ORDER BY step
