-- Completion tokens per rollout: the sum of its turns' completion tokens (no tool observations).
SELECT count(*) AS n, avg(completion_tokens) AS mean, min(completion_tokens) AS lo, max(completion_tokens) AS hi,
       {{quantiles(completion_tokens, 0.5, 0.9, 0.95, 0.99)}} AS q
FROM trajectories
WHERE completion_tokens IS NOT NULL
