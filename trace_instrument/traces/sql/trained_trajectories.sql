-- How many trajectories the CSV rows say were trained (their sample's TRAIN_UPDATE row).
SELECT count(*)
FROM trajectories AS t
JOIN entities AS e ON e.sample_id = t.prompt_uid || '/' || t.request_id
WHERE e.train_step IS NOT NULL
