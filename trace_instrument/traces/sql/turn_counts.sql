-- Turns per trajectory: distribution and the exact histogram (one bin per turn count); the turns
-- of all trajectories together.
SELECT count(*) AS n, avg(n_turns) AS mean, min(n_turns) AS lo, max(n_turns) AS hi,
       {{quantiles(n_turns, 0.5, 0.9, 0.95, 0.99)}} AS q, coalesce(sum(n_turns), 0) AS turns
FROM trajectories
