-- Tool time by tool name: last generate response -> tool_executed row of the same trajectory.
SELECT c.param, count(*) AS n, {{quantiles(t.tool_dt, 0.5, 0.9, 0.99)}} AS q, max(t.tool_dt) AS max_dt,
       sum(t.tool_dt) AS total
FROM transitions AS t
JOIN contents AS c ON c.cid = t.cid
WHERE t.code = {{event(TOOL_EXECUTED)}} AND t.tool_dt IS NOT NULL AND NOT t.dup
GROUP BY c.param
ORDER BY total DESC, c.param
