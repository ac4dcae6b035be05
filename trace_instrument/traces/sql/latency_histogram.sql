-- Latency distributions on a log scale: 10 bins per decade of milliseconds (bin 0: up to 1 ms).
SELECT prev_code, code,
       CAST(floor(log10(greatest(dt, 1)) * 10) AS BIGINT) AS bin,
       count(*) AS n
FROM transitions
WHERE NOT dup
GROUP BY prev_code, code, CAST(floor(log10(greatest(dt, 1)) * 10) AS BIGINT)
