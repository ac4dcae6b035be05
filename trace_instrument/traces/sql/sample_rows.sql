-- The CSV rows of the samples {{ids}} (a trajectory's and its prompt's sample-level rows): the
-- prompt's first, each in pipeline order; time, event, step, the detail's value (a tool name, a
-- score) and file.
SELECT sample_id, ts, code, step, param, path
FROM (SELECT e.sample_id, e.ts, e.code, e.step, c.param, f.path
      FROM events AS e
      JOIN contents AS c ON c.cid = e.cid
      JOIN files AS f ON f.file_id = e.file_id
      WHERE e.sample_id IN ({{ids}}) AND e.code IS NOT NULL) AS r
ORDER BY sample_id LIKE '%/sample' DESC, {{order_key}}
