-- Per trajectory file: its trajectories' time span (ms), steps and count.
SELECT file_id,
       CAST(min(created_at_ts) * 1000 AS BIGINT),
       CAST(max(coalesce(completed_at_ts, created_at_ts)) * 1000 AS BIGINT),
       min(global_step), max(global_step), count(*)
FROM trajectories_all
GROUP BY file_id
