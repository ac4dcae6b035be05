-- Each trajectory with its step: the training step its CSV rows carry (verl logs a batch's rollout
-- metrics at the step that trains it), or, when {{by_train}} is FALSE, its own global_step.
-- batch_max_length: the longest response of the step's batch (verl's v1 trainer pads a batch to it).
CREATE OR REPLACE TEMP VIEW step_trajectories AS
SELECT step, n_turns, completion_tokens, reason, response_length, max_response_length, min_global_steps,
       max_global_steps, max(response_length) OVER (PARTITION BY step) AS batch_max_length
FROM (SELECT CASE WHEN {{by_train}} THEN e.train_step ELSE t.global_step END AS step,
             t.n_turns, t.completion_tokens, t.stop_reason AS reason, t.response_length, t.max_response_length,
             t.min_global_steps, t.max_global_steps
      FROM trajectories AS t
      LEFT JOIN entities AS e ON e.sample_id = t.prompt_uid || '/' || t.request_id AND {{by_train}}) AS stepped
