-- DuckDB: the trajectory tables from traj_lines. {{target}}: trajectories_all at load, or (analyze
-- --follow) the rows of the lines appended since, from line {{first_line}} on (a line's rowid is its
-- trajectory's id: traj_lines only ever grows, so the ids stay).
CREATE TABLE {{target}} AS
SELECT rowid AS traj_id, file_id,
       fmt,
       prompt_uid, sample_index,
       p.request_id AS request_id, p.n_samples AS n_samples, p.global_step AS global_step,
       p.created_at_ts AS created_at_ts, p.completed_at_ts AS completed_at_ts, p.total_time_ms AS total_time_ms,
       coalesce(len(p.turns), 0) AS n_turns,
       CAST(list_sum(list_transform(p.turns, lambda t: t.completion_token_count)) AS BIGINT) AS completion_tokens,
       p.turns[-1].finish_reason AS finish_reason, p.agent_stop_reason AS agent_stop_reason,
       {{stop_bucket(p.agent_stop_reason, p.turns[-1].finish_reason)}} AS stop_reason,
       p.response_length AS response_length, p.max_response_length AS max_response_length,
       p.min_global_steps AS min_global_steps, p.max_global_steps AS max_global_steps,
       list_sum(list_transform(p.turns, lambda t: t.observation_time_ms)) AS observation_ms
FROM traj_lines
WHERE p IS NOT NULL AND (p.request_id IS NOT NULL OR p.turns IS NOT NULL) AND rowid >= {{first_line}};

-- a view: the turns are unnested when a query needs them (the sglang breakdown, the export)
CREATE OR REPLACE VIEW turns_all AS
SELECT traj_id, {{turn_columns(t)}}
FROM (SELECT rowid AS traj_id, unnest(p.turns) AS t FROM traj_lines
      WHERE p IS NOT NULL AND p.turns IS NOT NULL) AS u
