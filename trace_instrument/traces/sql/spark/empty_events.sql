-- No sample-flow files: an empty events table, so every view still runs.
CREATE TABLE events_all AS
SELECT CAST(NULL AS INT) AS file_id, CAST(NULL AS STRING) AS job_id, CAST(NULL AS STRING) AS sample_id,
       CAST(NULL AS BIGINT) AS ts, CAST(NULL AS INT) AS code, CAST(NULL AS BIGINT) AS step,
       CAST(NULL AS STRING) AS param, CAST(NULL AS STRING) AS stage, CAST(NULL AS STRING) AS detail,
       CAST(NULL AS STRING) AS bad_content
WHERE FALSE
