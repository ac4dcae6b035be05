-- Every transition between consecutive stages of a sample, plus the bridge from a prompt's last
-- sample-level row to each of its trajectories' first row. `dup` marks a row identical to the one
-- before it (same stage, time and file: a duplicate row); `tool_dt` is the time from the last
-- generate response to a tool row. `skey` stands for the sample id (entities_all has both); `cid`
-- points at the row's content (the tool name is its `param`).
-- {{target}}: transitions_all from {{events}} = events_all, or (analyze --follow) those of the samples
-- whose rows {{events}} holds and the bridges to the trajectories of the prompts {{only_bridges}} selects.
CREATE TABLE {{target}} AS
SELECT skey, prev_code, code, ts - prev_ts AS dt, prev_file, file_id, cid,
       CASE WHEN code = {{event(TOOL_EXECUTED)}} THEN ts - last_recv END AS tool_dt,
       (code = prev_code AND ts = prev_ts AND file_id = prev_file) AS dup
FROM (
    SELECT skey, code, ts, file_id, cid,
           lag(code) OVER w AS prev_code,
           lag(ts) OVER w AS prev_ts,
           lag(file_id) OVER w AS prev_file,
           -- the same window as lag(): one sort serves both
           {{last_ignore_nulls(CASE WHEN code = {{event(GENERATE_RESPONSE_RECEIVED)}} THEN ts END)}} OVER w AS last_recv
    -- the key computed before the window: the sort then carries no text
    FROM (SELECT {{sample_key}} AS skey, code, ts, file_id, cid
          FROM {{events}}
          WHERE code IS NOT NULL AND code <> {{event(SYNC_PARAMS)}} AND NOT {{is_placeholder(sample_id)}}) AS keyed
    -- the order key alone: extra sort keys double the cost of this sort, the largest of the analysis
    WINDOW w AS (PARTITION BY skey ORDER BY {{order_key}})
) AS ordered
WHERE prev_code IS NOT NULL
UNION ALL
SELECT t.skey, s.last_code, t.first_code, t.first_ordered_ts - s.last_ordered_ts, s.last_file, t.first_file,
       CAST(NULL AS BIGINT), CAST(NULL AS BIGINT), FALSE
FROM entities_all AS t
JOIN entities_all AS s ON s.uid = t.uid AND NOT s.is_traj
WHERE t.is_traj AND {{only_bridges}}
