-- Tool time by tool name: last generate response -> tool_executed row of the same trajectory,
-- from tool_counts (Dialect.tool_counts_of); the quantiles as Dialect.count_quantiles defines them.
WITH by_tool AS (
    SELECT c.param, t.tool_dt AS dt, sum(t.k) AS k
    FROM tool_counts AS t
    JOIN contents AS c ON c.cid = t.cid
    GROUP BY c.param, t.tool_dt
),
{{count_quantiles(by_tool, param)}}
SELECT b.param, sum(b.k) AS n, q.p50, q.p90, q.p99, max(b.dt) AS max_dt, sum(b.dt * b.k) AS total
FROM by_tool AS b
JOIN quantiles AS q ON q.param IS NOT DISTINCT FROM b.param
GROUP BY b.param, q.p50, q.p90, q.p99
ORDER BY total DESC, b.param
