-- Per step: the reward score of each scored sample (its last ROLLOUT_REWARD row's
-- reward_score_computed_score=X), counted in the step that trained it, or, when {{by_train}} is
-- FALSE, the step that generated it (as the per-step rollouts count).
SELECT step, count(*) AS n, {{exact_mean(score)}}, min(score), max(score)
FROM (SELECT CASE WHEN {{by_train}} THEN e.train_step ELSE e.gen_step END AS step, s.score
      -- of rows in the same last millisecond, the largest score: the same every time
      FROM (SELECT sample_id, max(score) AS score
            FROM (SELECT ev.sample_id, ev.ts, TRY_CAST(c.param AS DOUBLE) AS score,
                         max(ev.ts) OVER (PARTITION BY ev.sample_id) AS last_ts
                  FROM events AS ev
                  JOIN contents AS c ON c.cid = ev.cid
                  WHERE ev.code = {{event(ROLLOUT_REWARD)}}) AS rewards
            WHERE ts = last_ts
            GROUP BY sample_id) AS s
      JOIN entities AS e ON e.sample_id = s.sample_id) AS scored
-- a score that is not a finite number (nan, inf) is no score (both engines sort NaN above every number)
WHERE step IS NOT NULL AND score BETWEEN -1.7e308 AND 1.7e308
GROUP BY step
ORDER BY step
