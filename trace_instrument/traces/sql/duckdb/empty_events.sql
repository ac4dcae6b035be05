-- No sample-flow files: an empty events table, so every view still runs.
CREATE TABLE events_all (file_id INTEGER, job_id VARCHAR, sample_id VARCHAR, ts BIGINT, code INTEGER, step BIGINT,
                     param VARCHAR, stage VARCHAR, detail VARCHAR, bad_content VARCHAR)
