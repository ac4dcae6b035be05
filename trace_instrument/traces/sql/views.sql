-- The views every query reads: the rows of one run (the files {{run_files}}, or every file), and of
-- those the whole run or the samples generated in steps [{{lo}}, {{hi}}]. A sample's files all
-- belong to one run (runs.py joins files that share a uid), so its first file says which.
CREATE OR REPLACE TEMP VIEW entities AS
SELECT * FROM entities_all
WHERE ({{every_file}} OR first_file IN ({{run_files}})) AND ({{all}} OR gen_step BETWEEN {{lo}} AND {{hi}});
CREATE OR REPLACE TEMP VIEW events AS
SELECT * FROM events_all
WHERE ({{every_file}} OR file_id IN ({{run_files}}))
  AND ({{all}} OR sample_id IN (SELECT sample_id FROM entities) OR (code = {{event(SYNC_PARAMS)}} AND step BETWEEN {{lo}} AND {{hi}}));
CREATE OR REPLACE TEMP VIEW transitions AS
SELECT * FROM transitions_all
WHERE ({{every_file}} OR file_id IN ({{run_files}})) AND ({{all}} OR skey IN (SELECT skey FROM entities));
-- The transition summaries (transition_summaries.sql) of the transitions `transitions` shows: the
-- load's, or with a selection those of its transitions.
CREATE OR REPLACE TEMP VIEW latency_counts AS
SELECT * FROM latency_counts_all WHERE {{every_file}} AND {{all}}
UNION ALL
{{latency_counts_of((SELECT * FROM transitions WHERE NOT ({{every_file}} AND {{all}})) AS selected)}};
CREATE OR REPLACE TEMP VIEW tool_counts AS
SELECT * FROM tool_counts_all WHERE {{every_file}} AND {{all}}
UNION ALL
{{tool_counts_of((SELECT * FROM transitions WHERE NOT ({{every_file}} AND {{all}})) AS selected)}};
CREATE OR REPLACE TEMP VIEW file_pairs AS
SELECT * FROM file_pairs_all WHERE {{every_file}} AND {{all}}
UNION ALL
{{file_pairs_of((SELECT * FROM transitions WHERE NOT ({{every_file}} AND {{all}})) AS selected)}};
-- The transitions the slowest of each kind are found among (latencies.sql): the run's candidates
-- (slow_candidates.sql), or those of a selection's transitions.
CREATE OR REPLACE TEMP VIEW slow_candidates AS
SELECT * FROM slow_candidates_all WHERE {{every_file}} AND {{all}}
UNION ALL
SELECT t.prev_code, t.code, t.dt, t.skey, t.cid IS NULL
FROM transitions AS t
JOIN ({{slow_thresholds_of(latency_counts)}}) AS th ON th.prev_code = t.prev_code AND th.code = t.code AND t.dt >= th.dt
WHERE NOT ({{every_file}} AND {{all}}) AND NOT t.dup;
CREATE OR REPLACE TEMP VIEW trajectories AS
SELECT * FROM trajectories_all
WHERE ({{every_file}} OR file_id IN ({{run_files}})) AND ({{all}} OR global_step BETWEEN {{lo}} AND {{hi}});
CREATE OR REPLACE TEMP VIEW turns AS
SELECT * FROM turns_all WHERE ({{every_file}} AND {{all}}) OR traj_id IN (SELECT traj_id FROM trajectories);
CREATE OR REPLACE TEMP VIEW sglang_values AS
SELECT * FROM sglang_values_all WHERE ({{every_file}} AND {{all}}) OR traj_id IN (SELECT traj_id FROM trajectories);
-- The buckets of sglang values (sglang_values.sql) that `sglang_values` shows: the load's, or with a
-- selection those of its values.
CREATE OR REPLACE TEMP VIEW sglang_buckets AS
SELECT * FROM sglang_buckets_all WHERE {{every_file}} AND {{all}}
UNION ALL
{{sglang_buckets_of((SELECT * FROM sglang_values WHERE NOT ({{every_file}} AND {{all}})) AS selected)}};
-- The event summaries (event_summaries.sql) of the rows `events` shows: the run's files' part of
-- the summary, or with a step selection the summary of its rows.
CREATE OR REPLACE TEMP VIEW event_counts AS
SELECT * FROM event_counts_all WHERE {{all}} AND ({{every_file}} OR file_id IN ({{run_files}}))
UNION ALL
{{event_counts_of((SELECT * FROM events WHERE NOT {{all}}) AS selected)}};
-- No placeholder row is a sample's or a sync row, so a step selection shows none of them.
CREATE OR REPLACE TEMP VIEW placeholder_events AS
SELECT * FROM placeholder_events_all WHERE {{all}} AND ({{every_file}} OR file_id IN ({{run_files}}))
