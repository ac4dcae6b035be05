-- Trajectory files and a sample file of each of their prompts (any file of a sample is linked to
-- its others, so its first file says which run).
SELECT DISTINCT t.file_id, e.first_file
FROM (SELECT DISTINCT file_id, prompt_uid FROM trajectories_all) AS t
JOIN entities_all AS e ON e.uid = t.prompt_uid
