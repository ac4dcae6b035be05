-- Turns per trajectory: distribution and the exact histogram (one bin per turn count).
SELECT count(*) AS n, avg(n_turns) AS mean, min(n_turns) AS lo, max(n_turns) AS hi,
       {{quantiles(n_turns, 0.5, 0.9, 0.95, 0.99)}} AS q
FROM trajectories
