-- No sample-flow files: empty events and contents tables, so every view still runs.
CREATE TABLE contents (cid BIGINT, content VARCHAR, code INTEGER, step BIGINT, param VARCHAR, stage VARCHAR,
                       detail VARCHAR, bad_content VARCHAR);
CREATE TABLE events_all (file_id INTEGER, job_id VARCHAR, sample_id VARCHAR, ts BIGINT, cid BIGINT, code INTEGER,
                         step BIGINT)
