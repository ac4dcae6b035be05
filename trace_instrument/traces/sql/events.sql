-- The typed events: `contents`, one row per distinct content, and `events_all`, one row per
-- sample-flow CSV row pointing at its content by `cid`.
-- code: the pipeline event (see trace_instrument/traces/events.py); NULL = unknown stage/detail
-- or content that is not `from=A|to=B|stage=S[|global_step=N][|detail=D]`.
-- Each distinct content is parsed once and joined back to its rows: a run repeats a few thousand
-- contents (stage, detail, step) millions of times, and parsing every row costs a third more than
-- reading the files twice. The rows carry the content's id, code and step; the sparse text
-- (tool name, unknown stage, unparsable content) stays in `contents`, so the large sorts and joins
-- carry an integer instead. DuckDB runs these statements with each join's right side as its hash
-- table (DuckDBBackend._joins_as_written): the small side (contents, files) is on the right.
CREATE TABLE contents AS
SELECT row_number() OVER (ORDER BY content) AS cid, content, code, step, param, stage, detail, bad_content
FROM (
    SELECT content, code,
           TRY_CAST(NULLIF(step_text, '') AS BIGINT) AS step,
           CASE WHEN code IN ({{event(TOOL_EXECUTED, ROLLOUT_REWARD)}}) THEN split_part(detail, '=', 2) END AS param,
           CASE WHEN code IS NULL THEN stage END AS stage,
           CASE WHEN code IS NULL THEN detail END AS detail,
           CASE WHEN code IS NULL AND stage = '' THEN coalesce(content, '') END AS bad_content
    FROM (
        SELECT content,
               p.stage AS stage, p.step AS step_text, p.detail AS detail,
               CASE p.stage
                   WHEN 'DATA_PREPROCESS' THEN CASE p.detail WHEN 'uid_generated' THEN {{event(UID_GENERATED)}}
                                                            WHEN 'traj_uid_generated_by_repeat' THEN {{event(TRAJ_UID_GENERATED)}} END
                   WHEN 'DATA_DISPATCH' THEN CASE p.detail WHEN 'dispatched_to_agent_loop_manager' THEN {{event(DISPATCHED_TO_MANAGER)}}
                                                          WHEN 'dispatched_to_agent_loop_worker' THEN {{event(DISPATCHED_TO_WORKER)}} END
                   WHEN 'AGENT_LOOP' THEN CASE WHEN p.detail = 'agent_task_started' THEN {{event(AGENT_TASK_STARTED)}}
                                               WHEN p.detail LIKE 'session_started%' THEN {{event(SESSION_STARTED)}}
                                               WHEN p.detail = 'agent_run_completed' THEN {{event(AGENT_RUN_COMPLETED)}} END
                   WHEN 'LLM_GENERATE' THEN CASE p.detail WHEN 'sending_generate_request' THEN {{event(GENERATE_REQUEST_SENT)}}
                                                         WHEN 'received_generate_response' THEN {{event(GENERATE_RESPONSE_RECEIVED)}} END
                   WHEN 'AGENT_TOOL' THEN CASE WHEN p.detail LIKE 'tool_executed_name=%' THEN {{event(TOOL_EXECUTED)}} END
                   WHEN 'ROLLOUT_REWARD' THEN CASE WHEN p.detail LIKE 'reward_score_computed%' THEN {{event(ROLLOUT_REWARD)}} END
                   WHEN 'TRAIN_SAMPLE' THEN {{event(TRAIN_SAMPLE)}}
                   WHEN 'TRAIN_REWARD' THEN {{event(TRAIN_REWARD)}}
                   WHEN 'TRAIN_LOGPROB' THEN {{event(TRAIN_LOGPROB)}}
                   WHEN 'TRAIN_REF_LOGPROB' THEN {{event(TRAIN_REF_LOGPROB)}}
                   WHEN 'TRAIN_ADVANTAGE' THEN {{event(TRAIN_ADVANTAGE)}}
                   WHEN 'TRAIN_UPDATE' THEN {{event(TRAIN_UPDATE)}}
                   WHEN 'FILTER_TRAJECTORIES' THEN {{event(FILTER_TRAJECTORIES)}}
                   WHEN 'SYNC_PARAMS' THEN {{event(SYNC_PARAMS)}}
               END AS code
        FROM (SELECT content, {{content_struct(content, parts)}} AS p
              FROM (SELECT content, {{content_parts(content)}} AS parts
                    FROM (SELECT DISTINCT content FROM raw_events) AS distinct_contents) AS split) AS r
    ) AS parsed
) AS parsed_contents;

CREATE TABLE events_all AS
SELECT r.file_id, r.job_id, r.sample_id, {{plain_timestamp(r.ts)}} AS ts, c.cid, c.code, c.step
FROM raw_events AS r
JOIN contents AS c ON c.content IS NOT DISTINCT FROM r.content
