-- Stage latencies: per transition, count, p50/p90/p99, max, negatives and the slowest sample ids.
SELECT prev_code, code, count(*) AS n,
       {{quantiles(dt, 0.5, 0.9, 0.99)}} AS q,
       max(dt) AS max_dt,
       count(CASE WHEN dt < 0 THEN 1 END) AS negative,
       {{top_ids(e.sample_id, dt, 3)}} AS slowest
FROM transitions AS t JOIN entities_all AS e USING (skey)
WHERE NOT dup
GROUP BY prev_code, code
