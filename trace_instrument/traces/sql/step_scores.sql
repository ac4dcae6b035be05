-- Per step: the reward score of each scored sample (entities.sql: its last ROLLOUT_REWARD row's
-- reward_score_computed_score=X), counted in the step that trained it, or, when {{by_train}} is
-- FALSE, the step that generated it (as the per-step rollouts count).
SELECT step, count(*) AS n, {{exact_mean(score)}}, min(score), max(score)
FROM (SELECT CASE WHEN {{by_train}} THEN train_step ELSE gen_step END AS step, score FROM entities) AS scored
-- a score that is not a finite number (nan, inf) is no score (both engines sort NaN above every number)
WHERE step IS NOT NULL AND score BETWEEN -1.7e308 AND 1.7e308
GROUP BY step
ORDER BY step
