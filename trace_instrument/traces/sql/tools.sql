-- Tool time by tool name: last generate response -> tool_executed row of the same trajectory.
SELECT param, count(*) AS n, {{quantiles(tool_dt, 0.5, 0.9, 0.99)}} AS q, max(tool_dt) AS max_dt,
       sum(tool_dt) AS total
FROM transitions
WHERE code = 9 AND tool_dt IS NOT NULL AND NOT dup
GROUP BY param
ORDER BY total DESC, param
