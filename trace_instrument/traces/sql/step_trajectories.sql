-- Each trajectory with its step: the training step its CSV rows carry (verl logs a batch's rollout
-- metrics at the step that trains it), or, when {{by_train}} is FALSE, its own global_step.
CREATE OR REPLACE TEMP VIEW step_trajectories AS
SELECT CASE WHEN {{by_train}} THEN e.train_step ELSE t.global_step END AS step,
       t.n_turns, t.completion_tokens, t.stop_reason AS reason, t.response_length, t.max_response_length
FROM trajectories AS t
LEFT JOIN entities AS e ON e.sample_id = t.prompt_uid || '/' || t.request_id AND {{by_train}}
