-- Response length per rollout: the sum of its turns' completion tokens.
SELECT count(*) AS n, avg(response_tokens) AS mean, min(response_tokens) AS lo, max(response_tokens) AS hi,
       {{quantiles(response_tokens, 0.5, 0.9, 0.95, 0.99)}} AS q
FROM trajectories
WHERE response_tokens IS NOT NULL
