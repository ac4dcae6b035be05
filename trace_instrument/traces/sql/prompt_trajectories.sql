-- The trajectories of the prompt {{uid}} that the run's rows or trajectory lines know.
SELECT sample_id FROM entities WHERE uid = {{uid}} AND is_traj
UNION
SELECT prompt_uid || '/' || request_id FROM trajectories WHERE prompt_uid = {{uid}}
ORDER BY 1
