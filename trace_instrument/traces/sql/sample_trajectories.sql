-- Where the trajectories {{ids}} (`prompt_uid/request_id`) are: their file, with the fields the
-- trajectory view shows besides the turns' texts.
SELECT t.prompt_uid || '/' || t.request_id AS sample_id, f.path, t.global_step,
       t.stop_reason, t.agent_stop_reason, t.finish_reason, t.response_length, t.max_response_length,
       t.created_at_ts, t.completed_at_ts, t.total_time_ms
FROM trajectories AS t
JOIN files AS f ON f.file_id = t.file_id
WHERE t.prompt_uid || '/' || t.request_id IN ({{ids}})
ORDER BY 1, f.path
