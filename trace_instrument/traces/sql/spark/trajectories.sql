-- Spark: trajectory JSONL lines (read as text into traj_text) parsed with from_json; the old flat
-- format is the line itself, the current one is the raw_message string.
CREATE TABLE traj_lines AS
SELECT file_id, line_no, line_len, top IS NOT NULL AND line_is_object AS is_json,
       top.prompt_uid AS prompt_uid, top.sample_index AS sample_index,
       CASE WHEN top.raw_message IS NULL THEN 'flat' ELSE 'raw_message' END AS fmt,
       CASE WHEN top IS NULL OR NOT line_is_object THEN left(line, 120) END AS bad_text,
       CASE WHEN top IS NULL OR NOT line_is_object THEN NULL
            ELSE from_json(coalesce(top.raw_message, line), '{{payload_schema}}') END AS p
FROM (SELECT f.file_id, monotonically_increasing_id() AS line_no, length(t.value) AS line_len, t.value AS line,
             from_json(t.value, '{{top_schema}}') AS top,
             get_json_object(t.value, '$') IS NOT NULL AND ltrim(t.value) LIKE '{%' AS line_is_object
      FROM traj_text AS t JOIN files AS f ON f.uri = t.path
      WHERE {{torn_filter}}) AS parsed;

CREATE TABLE trajectories_all AS
SELECT line_no AS traj_id, file_id, fmt, prompt_uid, sample_index,
       p.request_id AS request_id, p.n_samples AS n_samples, p.global_step AS global_step,
       p.created_at_ts AS created_at_ts, p.completed_at_ts AS completed_at_ts, p.total_time_ms AS total_time_ms,
       coalesce(size(p.turns), 0) AS n_turns,
       aggregate(p.turns, CAST(NULL AS BIGINT),
                 (acc, t) -> CASE WHEN t.completion_token_count IS NULL THEN acc
                                  ELSE coalesce(acc, 0) + t.completion_token_count END) AS completion_tokens,
       element_at(p.turns, -1).finish_reason AS finish_reason, p.agent_stop_reason AS agent_stop_reason,
       {{stop_bucket(p.agent_stop_reason, element_at(p.turns, -1).finish_reason)}} AS stop_reason,
       p.response_length AS response_length, p.max_response_length AS max_response_length,
       p.min_global_steps AS min_global_steps, p.max_global_steps AS max_global_steps,
       aggregate(p.turns, CAST(NULL AS DOUBLE),
                 (acc, t) -> CASE WHEN t.observation_time_ms IS NULL THEN acc
                                  ELSE coalesce(acc, 0) + t.observation_time_ms END) AS observation_ms
FROM traj_lines
WHERE p IS NOT NULL AND (p.request_id IS NOT NULL OR p.turns IS NOT NULL);

CREATE TABLE turns_all AS
SELECT traj_id, {{turn_columns(t)}}
FROM (SELECT line_no AS traj_id, explode(p.turns) AS t FROM traj_lines
      WHERE p IS NOT NULL AND p.turns IS NOT NULL) AS u
