-- `analyze --follow`: the transition summaries (transition_summaries.sql) of a refresh's new
-- transitions (suffix `_new`) added to the run's, those of the transitions they replace (`_old`)
-- taken away. Counts add up: the same rows as a build over every transition gives.
CREATE OR REPLACE TABLE latency_counts_all AS
SELECT prev_code, code, dt, CAST(sum(k) AS BIGINT) AS k
FROM (SELECT * FROM latency_counts_all
      UNION ALL SELECT * FROM latency_counts_new
      UNION ALL SELECT prev_code, code, dt, -k FROM latency_counts_old) AS parts
GROUP BY prev_code, code, dt
HAVING sum(k) <> 0;

CREATE OR REPLACE TABLE tool_counts_all AS
SELECT cid, tool_dt, CAST(sum(k) AS BIGINT) AS k
FROM (SELECT * FROM tool_counts_all
      UNION ALL SELECT * FROM tool_counts_new
      UNION ALL SELECT cid, tool_dt, -k FROM tool_counts_old) AS parts
GROUP BY cid, tool_dt
HAVING sum(k) <> 0;

CREATE OR REPLACE TABLE file_pairs_all AS
SELECT prev_file, file_id, dt, dup, CAST(sum(k) AS BIGINT) AS k
FROM (SELECT * FROM file_pairs_all
      UNION ALL SELECT * FROM file_pairs_new
      UNION ALL SELECT prev_file, file_id, dt, dup, -k FROM file_pairs_old) AS parts
GROUP BY prev_file, file_id, dt, dup
HAVING sum(k) <> 0
