-- Per worker process (trajectory file) and step: trajectories, tokens, span; summed per worker by the caller.
SELECT file_id, global_step, count(*) AS n, sum(completion_tokens) AS tokens,
       min(created_at_ts) AS first_s, max(completed_at_ts) AS last_s
FROM trajectories
GROUP BY file_id, global_step
