-- Server-side timing of turns (only when sglang reported it), per field of SGLANG_FIELDS: count,
-- mean, min, max and p50/p90/p99, from the buckets of the values ({{buckets}}, sglang_values.sql)
-- and the values of the few buckets that hold a quantile ({{values}}), not a sort of every value.
-- A quantile is the linear interpolation of Dialect.count_quantiles (interpolated_quantiles).
-- The value at position i is in the bucket whose cumulative count first exceeds i, at i less the
-- values of the buckets before it. `ordered` says whether every bucket's values lie above the
-- bucket's before it, which that needs (views.py computes again with one bucket a field if not).
WITH buckets AS (
    SELECT field, bucket, n, lo, hi, n_small, sum_small,
           sum(n) OVER (PARTITION BY field ORDER BY bucket ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS upto,
           max(hi) OVER (PARTITION BY field ORDER BY bucket ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS below
    FROM {{buckets}} AS all_buckets
),
fields AS (
    SELECT field, sum(n) AS n, {{mean_of_parts(sum(n), sum(n_small), sum(sum_small), NULL)}} AS exact_mean,
           sum(n_small) AS n_small, min(lo) AS lo, max(hi) AS hi,
           count(CASE WHEN below > lo THEN 1 END) = 0 AS ordered
    FROM buckets
    GROUP BY field
),
positions AS (
    SELECT field, q, h, CAST(floor(h) AS BIGINT) AS lo_at, CAST(ceil(h) AS BIGINT) AS hi_at
    FROM (SELECT f.field, w.q, CAST(f.n - 1 AS DOUBLE) * w.p AS h
          FROM fields AS f
          CROSS JOIN ({{quantile_points()}}) AS w) AS wanted
),
wanted AS (
    SELECT p.field, b.bucket, p.at - (b.upto - b.n) AS offset_in_bucket
    FROM (SELECT field, lo_at AS at FROM positions UNION SELECT field, hi_at FROM positions) AS p
    JOIN buckets AS b ON b.field = p.field AND b.upto > p.at AND b.upto - b.n <= p.at
),
picked AS (
    SELECT v.field, v.bucket, v.value,
           row_number() OVER (PARTITION BY v.field, v.bucket ORDER BY v.value) - 1 AS offset_in_bucket
    FROM {{values}} AS v
    JOIN (SELECT DISTINCT field, bucket FROM wanted) AS w ON w.field = v.field AND w.bucket = v.bucket
),
at_position AS (
    SELECT w.field, b.upto - b.n + w.offset_in_bucket AS at, p.value
    FROM wanted AS w
    JOIN buckets AS b ON b.field = w.field AND b.bucket = w.bucket
    JOIN picked AS p ON p.field = w.field AND p.bucket = w.bucket AND p.offset_in_bucket = w.offset_in_bucket
),
quantiles AS (
    SELECT p.field, {{interpolated_quantiles(p.q, lo.value, hi.value, p.h, p.lo_at)}}
    FROM positions AS p
    JOIN at_position AS lo ON lo.field = p.field AND lo.at = p.lo_at
    JOIN at_position AS hi ON hi.field = p.field AND hi.at = p.hi_at
    GROUP BY p.field
)
SELECT f.field, f.n, f.exact_mean, f.n_small, f.lo, f.hi, q.p50, q.p90, q.p99, f.ordered
FROM fields AS f
LEFT JOIN quantiles AS q ON q.field = f.field
ORDER BY f.field
