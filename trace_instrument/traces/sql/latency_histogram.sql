-- Latency distributions on a log scale: 10 bins per decade of milliseconds (bin 0: up to 1 ms),
-- from latency_counts.
SELECT prev_code, code,
       CAST(floor(log10(greatest(dt, 1)) * 10) AS BIGINT) AS bin,
       sum(k) AS n
FROM latency_counts
GROUP BY prev_code, code, CAST(floor(log10(greatest(dt, 1)) * 10) AS BIGINT)
