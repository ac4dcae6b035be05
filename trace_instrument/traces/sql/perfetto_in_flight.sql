-- Trajectories in flight over time (first row to last row), sampled in equal time buckets.
WITH deltas AS (
    SELECT first_ts AS ts, 1 AS d FROM entities WHERE is_traj
    UNION ALL
    SELECT last_ts AS ts, -1 AS d FROM entities WHERE is_traj
),
running AS (
    SELECT ts, sum(d) OVER (ORDER BY ts, d DESC ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS n FROM deltas
),
bounds AS (SELECT min(ts) AS lo, greatest(max(ts) - min(ts), 1) AS span FROM deltas)
SELECT max(ts) AS ts, max_by(n, ts) AS n
FROM running CROSS JOIN bounds
GROUP BY CAST(floor((ts - lo) * {{buckets}} / span) AS BIGINT)
ORDER BY ts
