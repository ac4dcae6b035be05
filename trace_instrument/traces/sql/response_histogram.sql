SELECT CAST(floor(response_tokens / {{width}}) AS BIGINT) AS bin, count(*) AS n
FROM trajectories
WHERE response_tokens IS NOT NULL
GROUP BY CAST(floor(response_tokens / {{width}}) AS BIGINT)
ORDER BY bin
