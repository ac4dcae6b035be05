-- Parquet `trajectories`: one row per trajectory JSONL line.
SELECT t.traj_id, f.path AS file, f.pid AS worker_pid, t.fmt AS line_format, t.prompt_uid, t.sample_index,
       t.request_id, t.prompt_uid || '/' || t.request_id AS sample_id, t.n_samples, t.global_step,
       t.created_at_ts, t.completed_at_ts, t.total_time_ms, t.n_turns, t.completion_tokens,
       t.stop_reason, t.agent_stop_reason, t.finish_reason, t.response_length, t.max_response_length,
       t.min_global_steps, t.max_global_steps,
       t.observation_ms
FROM trajectories AS t
JOIN files AS f ON f.file_id = t.file_id
