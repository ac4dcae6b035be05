-- Parquet `events`: one row per sample-flow CSV row.
SELECT f.host, f.pid, e.job_id, e.sample_id, {{uid_of(e.sample_id)}} AS uid,
       CASE WHEN e.sample_id LIKE '%/sample' THEN NULL ELSE {{traj_of(e.sample_id)}} END AS traj_uid,
       e.ts AS ts_ms, n.event AS event, coalesce(n.stage, c.stage) AS stage, c.detail AS unknown_detail,
       e.step AS global_step, c.param AS param, e.code AS event_code
FROM events AS e
JOIN files AS f ON f.file_id = e.file_id
JOIN contents AS c ON c.cid = e.cid
LEFT JOIN event_names AS n ON n.code = e.code
