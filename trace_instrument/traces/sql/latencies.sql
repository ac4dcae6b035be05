-- Stage latencies: per transition, count, p50/p90/p99, max, negatives and the slowest sample ids,
-- from latency_counts (Dialect.latency_counts_of); the quantiles as Dialect.count_quantiles
-- defines them. The slowest ids come from the transitions at or above each kind's third largest
-- latency (slow_candidates: the run's candidates, slow_candidates.sql, or a selection's transitions).
WITH {{count_quantiles(latency_counts, prev_code, code)}},
third AS (
    SELECT prev_code, code, {{third_largest()}} AS dt
    FROM ranked
    GROUP BY prev_code, code
),
slowest AS (
    SELECT t.prev_code, t.code, {{top_ids(e.sample_id, t.dt, 3)}} AS ids
    FROM slow_candidates AS t
    JOIN third AS th ON th.prev_code = t.prev_code AND th.code = t.code AND t.dt >= th.dt
    JOIN entities_all AS e ON e.skey = t.skey
    GROUP BY t.prev_code, t.code
)
SELECT c.prev_code, c.code, c.n, q.p50, q.p90, q.p99, c.max_dt, c.negative, s.ids
FROM (SELECT prev_code, code, sum(k) AS n, max(dt) AS max_dt, sum(CASE WHEN dt < 0 THEN k ELSE 0 END) AS negative
      FROM latency_counts
      GROUP BY prev_code, code) AS c
LEFT JOIN quantiles AS q ON q.prev_code = c.prev_code AND q.code = c.code
LEFT JOIN slowest AS s ON s.prev_code = c.prev_code AND s.code = c.code
