SELECT CAST(floor(completion_tokens / {{width}}) AS BIGINT) AS bin, count(*) AS n
FROM trajectories
WHERE completion_tokens IS NOT NULL
GROUP BY CAST(floor(completion_tokens / {{width}}) AS BIGINT)
ORDER BY bin
