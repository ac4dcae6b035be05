-- No trajectory files: empty trajectories and turns tables.
CREATE TABLE trajectories_all AS
SELECT CAST(NULL AS BIGINT) AS traj_id, CAST(NULL AS INT) AS file_id, CAST(NULL AS STRING) AS fmt,
       CAST(NULL AS STRING) AS prompt_uid, CAST(NULL AS BIGINT) AS sample_index, CAST(NULL AS STRING) AS request_id,
       CAST(NULL AS BIGINT) AS n_samples, CAST(NULL AS BIGINT) AS global_step, CAST(NULL AS DOUBLE) AS created_at_ts,
       CAST(NULL AS DOUBLE) AS completed_at_ts, CAST(NULL AS DOUBLE) AS total_time_ms, CAST(NULL AS BIGINT) AS n_turns,
       CAST(NULL AS BIGINT) AS completion_tokens, CAST(NULL AS STRING) AS finish_reason,
       CAST(NULL AS STRING) AS agent_stop_reason, CAST(NULL AS STRING) AS stop_reason,
       CAST(NULL AS BIGINT) AS response_length, CAST(NULL AS BIGINT) AS max_response_length,
       CAST(NULL AS BIGINT) AS min_global_steps, CAST(NULL AS BIGINT) AS max_global_steps,
       CAST(NULL AS DOUBLE) AS observation_ms
WHERE FALSE;
CREATE TABLE turns_all AS
SELECT CAST(NULL AS BIGINT) AS traj_id, CAST(NULL AS BIGINT) AS turn_index, CAST(NULL AS BIGINT) AS prompt_tokens,
       CAST(NULL AS BIGINT) AS completion_tokens, CAST(NULL AS STRING) AS finish_reason,
       CAST(NULL AS DOUBLE) AS completion_ms,
       CAST(NULL AS DOUBLE) AS observation_ms, CAST(NULL AS DOUBLE) AS sglang_total_ms,
       CAST(NULL AS DOUBLE) AS sglang_queue_ms, CAST(NULL AS DOUBLE) AS sglang_ttft_ms,
       CAST(NULL AS DOUBLE) AS sglang_prefill_ms, CAST(NULL AS DOUBLE) AS sglang_decode_ms
WHERE FALSE
