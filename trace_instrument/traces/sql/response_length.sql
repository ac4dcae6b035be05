-- verl's response_length per rollout (len(AgentLoopOutput.response_ids), tool observations
-- included), over the trajectories that recorded it; clipped: it reached the recorded budget
-- (rollout.response_length), as verl's response_length/clip_ratio counts.
SELECT count(response_length) AS n, avg(response_length) AS mean, min(response_length) AS lo,
       max(response_length) AS hi,
       count(CASE WHEN response_length IS NOT NULL AND max_response_length IS NOT NULL THEN 1 END) AS budgeted,
       count(CASE WHEN response_length = max_response_length THEN 1 END) AS clipped
FROM trajectories
