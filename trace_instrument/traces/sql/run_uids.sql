-- Which sample files hold rows of which prompt (uid): two files sharing a uid belong to one run.
-- Placeholder uids (backend.PLACEHOLDER_UIDS) link nothing. The ids are made distinct before the
-- uid is cut out of them: a run has far fewer (sample, file) pairs than rows.
CREATE OR REPLACE TEMP VIEW sample_uid_files AS
SELECT DISTINCT uid, file_id
FROM (SELECT {{uid_of(sample_id)}} AS uid, file_id
      FROM (SELECT DISTINCT sample_id, file_id FROM events_all
            WHERE code IS NOT NULL AND code <> {{event(SYNC_PARAMS)}}) AS pairs) AS cut
WHERE NOT {{is_placeholder_uid(uid)}}
