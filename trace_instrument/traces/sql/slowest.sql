-- The slowest rollouts: a trajectory's own agent loop (started -> agent_run_completed), with the
-- time it then waited for training and its first-to-last-row span beside it.
SELECT sample_id,
       rollout_end_ts - rollout_start_ts AS rollout,
       train_start_ts - rollout_end_ts AS waiting,
       last_ts - first_ts AS total
FROM entities
WHERE is_traj AND rollout_start_ts IS NOT NULL AND rollout_end_ts IS NOT NULL
ORDER BY rollout DESC, sample_id
LIMIT {{limit}}
