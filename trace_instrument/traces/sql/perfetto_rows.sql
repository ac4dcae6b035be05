-- The rows of the selected trajectories, each trajectory in pipeline order.
SELECT sample_id, code, ts, file_id, param
FROM (SELECT e.sample_id, e.code, e.ts, e.file_id, c.param
      FROM events AS e
      JOIN contents AS c ON c.cid = e.cid
      JOIN perfetto_selected AS s ON s.sample_id = e.sample_id
      WHERE e.code IS NOT NULL AND e.code <> {{event(SYNC_PARAMS)}}) AS selected_rows
ORDER BY sample_id, {{order_key}}, code
