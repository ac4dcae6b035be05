-- One row per sample id: a trajectory (`uid/N`) or a prompt's sample-level rows (`uid/sample`).
-- The pipeline order is `ord` (see events.py), then time: clock skew between hosts cannot reorder stages.
-- `skey` stands for the id in the transitions (see Backend.build_samples).
-- {{target}}: entities_all from {{events}} = events_all, or (analyze --follow) the samples of the
-- appended rows from {{events}} = their rows (a copy taken once for this and transitions.sql).
CREATE TABLE {{target}} AS
SELECT a.*, r.score
FROM (
SELECT sample_id,
       {{sample_key}} AS skey,
       {{uid_of(sample_id)}} AS uid,
       sample_id NOT LIKE '%/sample' AS is_traj,
       count(*) AS n_rows,
       min(ts) AS first_ts,
       max(ts) AS last_ts,
       min_by(code, {{order_key}}) AS first_code,
       min_by(ts, {{order_key}}) AS first_ordered_ts,
       min_by(file_id, {{order_key}}) AS first_file,
       max_by(code, {{order_key}}) AS last_code,
       max_by(ts, {{order_key}}) AS last_ordered_ts,
       max_by(file_id, {{order_key}}) AS last_file,
       min(CASE WHEN code IN ({{event(AGENT_TASK_STARTED, SESSION_STARTED)}}) THEN ts END) AS rollout_start_ts,
       max(CASE WHEN code = {{event(AGENT_RUN_COMPLETED)}} THEN ts END) AS rollout_end_ts,
       min(CASE WHEN code BETWEEN {{event(TRAIN_SAMPLE)}} AND {{event(TRAIN_UPDATE)}} THEN ts END) AS train_start_ts,
       max(CASE WHEN code = {{event(AGENT_RUN_COMPLETED)}} THEN step END) AS completed_step,
       max(CASE WHEN code IN ({{event(AGENT_TASK_STARTED, SESSION_STARTED)}}) THEN step END) AS started_step,
       max(CASE WHEN code = {{event(TRAIN_UPDATE)}} THEN step END) AS train_step,
       coalesce(max(CASE WHEN code = {{event(AGENT_RUN_COMPLETED)}} THEN step END), max(CASE WHEN code IN ({{event(AGENT_TASK_STARTED, SESSION_STARTED)}}) THEN step END), min(step)) AS gen_step,
       max(CASE WHEN code BETWEEN {{event(AGENT_TASK_STARTED)}} AND {{event(AGENT_RUN_COMPLETED)}} THEN file_id END) AS worker_file,
       bool_or(code IN ({{event(UID_GENERATED, TRAJ_UID_GENERATED, SESSION_STARTED)}})) AS m_generated,
       bool_or(code IN ({{event(DISPATCHED_TO_MANAGER, DISPATCHED_TO_WORKER)}})) AS m_dispatched,
       bool_or(code IN ({{event(AGENT_TASK_STARTED, SESSION_STARTED)}})) AS m_started,
       bool_or(code = {{event(AGENT_RUN_COMPLETED)}}) AS m_completed,
       bool_or(code IN ({{event(ROLLOUT_REWARD, TRAIN_REWARD)}})) AS m_reward,
       bool_or(code = {{event(TRAIN_UPDATE)}}) AS m_trained
FROM {{events}}
-- a placeholder uid (backend.PLACEHOLDER_UIDS) joins unrelated rows: they are counted, never a sample
WHERE code IS NOT NULL AND code <> {{event(SYNC_PARAMS)}} AND NOT {{is_placeholder(sample_id)}}
GROUP BY sample_id
) AS a
-- the reward score: the last ROLLOUT_REWARD row's (reward_score_computed_score=X); of rows in the
-- same last millisecond, the largest score (NaN above every number), one that is no number (NULL)
-- only when none is. Apart from the rest: the few reward rows join their contents, not every row.
LEFT JOIN (
    SELECT sample_id, max_by(score, {{tuple_of(ts, score IS NOT NULL, score)}}) AS score
    FROM (SELECT ev.sample_id, ev.ts, TRY_CAST(c.param AS DOUBLE) AS score
          FROM {{events}} AS ev
          JOIN contents AS c ON c.cid = ev.cid
          WHERE ev.code = {{event(ROLLOUT_REWARD)}}) AS rewards
    GROUP BY sample_id
) AS r ON r.sample_id = a.sample_id
