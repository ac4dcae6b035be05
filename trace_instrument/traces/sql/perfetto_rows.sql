-- The rows of the selected trajectories, each trajectory in pipeline order.
SELECT e.sample_id, e.code, e.ts, e.file_id, e.param
FROM events AS e
JOIN perfetto_selected AS s ON s.sample_id = e.sample_id
WHERE e.code IS NOT NULL AND e.code <> 19
ORDER BY e.sample_id, {{order_key}}, e.code
