-- Trajectory files and the sample files that hold rows of their prompts.
SELECT DISTINCT t.file_id, u.file_id
FROM (SELECT DISTINCT file_id, prompt_uid FROM trajectories_all) AS t
JOIN sample_uid_files AS u ON u.uid = t.prompt_uid
