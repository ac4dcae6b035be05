-- Generation throughput per step: completion tokens of the step's trajectories over their span.
SELECT global_step, count(*) AS n, sum(completion_tokens) AS tokens,
       min(created_at_ts) AS first_s, max(completed_at_ts) AS last_s
FROM trajectories
WHERE global_step IS NOT NULL
GROUP BY global_step
ORDER BY global_step
