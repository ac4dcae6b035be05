-- Stage latencies: per transition, count, p50/p90/p99, max, negatives and the slowest sample ids,
-- from latency_counts. A quantile is the linear interpolation quantile_cont and Spark's percentile
-- define: with h = (n - 1) q, the latencies lo and hi at the 0-based positions floor(h) and ceil(h)
-- in ascending order, lo + (hi - lo) (h - floor(h)), in doubles, the same arithmetic on both
-- engines (quantile_cont itself may round its last bit otherwise). The latency at position i is
-- the smallest whose cumulative count exceeds i. The slowest ids come from the transitions at or
-- above each kind's third largest latency only.
WITH ranked AS (
    SELECT prev_code, code, dt, k,
           sum(k) OVER (PARTITION BY prev_code, code ORDER BY dt ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS upto,
           sum(k) OVER (PARTITION BY prev_code, code) AS timed
    FROM latency_counts
    WHERE dt IS NOT NULL
),
positions AS (
    SELECT prev_code, code, q, h, CAST(floor(h) AS BIGINT) AS lo_at, CAST(ceil(h) AS BIGINT) AS hi_at
    FROM (SELECT g.prev_code, g.code, w.q, CAST(g.timed - 1 AS DOUBLE) * w.p AS h
          FROM (SELECT DISTINCT prev_code, code, timed FROM ranked) AS g
          CROSS JOIN (SELECT 1 AS q, CAST(0.5 AS DOUBLE) AS p
                      UNION ALL SELECT 2, CAST(0.9 AS DOUBLE)
                      UNION ALL SELECT 3, CAST(0.99 AS DOUBLE)) AS w) AS wanted
),
bounds AS (
    SELECT p.prev_code, p.code, p.q, p.h, p.lo_at,
           CAST(min(CASE WHEN r.upto > p.lo_at THEN r.dt END) AS DOUBLE) AS lo,
           CAST(min(CASE WHEN r.upto > p.hi_at THEN r.dt END) AS DOUBLE) AS hi
    FROM positions AS p
    JOIN ranked AS r ON r.prev_code = p.prev_code AND r.code = p.code
    GROUP BY p.prev_code, p.code, p.q, p.h, p.lo_at
),
quantiles AS (
    SELECT prev_code, code,
           max(CASE WHEN q = 1 THEN lo + (hi - lo) * (h - lo_at) END) AS p50,
           max(CASE WHEN q = 2 THEN lo + (hi - lo) * (h - lo_at) END) AS p90,
           max(CASE WHEN q = 3 THEN lo + (hi - lo) * (h - lo_at) END) AS p99
    FROM bounds
    GROUP BY prev_code, code
),
third AS (
    SELECT prev_code, code, coalesce(max(CASE WHEN timed - upto + k >= 3 THEN dt END), min(dt)) AS dt
    FROM ranked
    GROUP BY prev_code, code
),
slowest AS (
    SELECT t.prev_code, t.code, {{top_ids(e.sample_id, t.dt, 3)}} AS ids
    FROM transitions AS t
    JOIN third AS th ON th.prev_code = t.prev_code AND th.code = t.code AND t.dt >= th.dt
    JOIN entities_all AS e ON e.skey = t.skey
    WHERE NOT t.dup
    GROUP BY t.prev_code, t.code
)
SELECT c.prev_code, c.code, c.n, q.p50, q.p90, q.p99, c.max_dt, c.negative, s.ids
FROM (SELECT prev_code, code, sum(k) AS n, max(dt) AS max_dt, sum(CASE WHEN dt < 0 THEN k ELSE 0 END) AS negative
      FROM latency_counts
      GROUP BY prev_code, code) AS c
LEFT JOIN quantiles AS q ON q.prev_code = c.prev_code AND q.code = c.code
LEFT JOIN slowest AS s ON s.prev_code = c.prev_code AND s.code = c.code
