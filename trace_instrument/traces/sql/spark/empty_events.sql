-- No sample-flow files: empty events and contents tables, so every view still runs.
CREATE TABLE contents AS
SELECT CAST(NULL AS BIGINT) AS cid, CAST(NULL AS STRING) AS content, CAST(NULL AS INT) AS code,
       CAST(NULL AS BIGINT) AS step, CAST(NULL AS STRING) AS param, CAST(NULL AS STRING) AS stage,
       CAST(NULL AS STRING) AS detail, CAST(NULL AS STRING) AS bad_content
WHERE FALSE;

CREATE TABLE events_all AS
SELECT CAST(NULL AS INT) AS file_id, CAST(NULL AS STRING) AS job_id, CAST(NULL AS STRING) AS sample_id,
       CAST(NULL AS BIGINT) AS ts, CAST(NULL AS BIGINT) AS cid, CAST(NULL AS INT) AS code,
       CAST(NULL AS BIGINT) AS step
WHERE FALSE
