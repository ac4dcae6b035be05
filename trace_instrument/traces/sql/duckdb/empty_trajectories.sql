-- No trajectory files: empty trajectories and turns tables.
CREATE TABLE trajectories_all (traj_id BIGINT, file_id INTEGER, fmt VARCHAR, prompt_uid VARCHAR, sample_index BIGINT,
                           request_id VARCHAR, n_samples BIGINT, global_step BIGINT, created_at_ts DOUBLE,
                           completed_at_ts DOUBLE, total_time_ms DOUBLE, n_turns BIGINT, completion_tokens BIGINT,
                           finish_reason VARCHAR, agent_stop_reason VARCHAR, stop_reason VARCHAR,
                           response_length BIGINT, max_response_length BIGINT, min_global_steps BIGINT,
                           max_global_steps BIGINT, observation_ms DOUBLE);
CREATE TABLE turns_all (traj_id BIGINT, turn_index BIGINT, prompt_tokens BIGINT, completion_tokens BIGINT,
                    finish_reason VARCHAR, completion_ms DOUBLE, observation_ms DOUBLE,
                    sglang_total_ms DOUBLE, sglang_queue_ms DOUBLE, sglang_ttft_ms DOUBLE, sglang_prefill_ms DOUBLE,
                    sglang_decode_ms DOUBLE)
