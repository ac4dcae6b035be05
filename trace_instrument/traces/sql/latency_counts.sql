-- How many transitions of each kind (prev_code -> code) took each latency: a run's millions of
-- transitions take a few thousand distinct milliseconds, so the latency quantiles, the slowest
-- and the histograms are computed from these counts (a table while the views are computed).
CREATE TEMP TABLE latency_counts AS
SELECT prev_code, code, dt, count(*) AS k
FROM transitions
WHERE NOT dup
GROUP BY prev_code, code, dt
