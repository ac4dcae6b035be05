-- `analyze --follow`: the sglang values of the appended trajectories (sglang_values.sql into
-- `sglang_values_new` and `sglang_buckets_new`) added to the run's. Counts and sums add up, bounds
-- widen: the same buckets as a build over every value gives, since turns only come, never go.
INSERT INTO sglang_values_all SELECT * FROM sglang_values_new;

CREATE OR REPLACE TABLE sglang_buckets_all AS
SELECT field, bucket, CAST(sum(n) AS BIGINT) AS n, min(lo) AS lo, max(hi) AS hi,
       CAST(sum(n_small) AS BIGINT) AS n_small, sum(sum_small) AS sum_small
FROM (SELECT * FROM sglang_buckets_all UNION ALL SELECT * FROM sglang_buckets_new) AS both_parts
GROUP BY field, bucket
