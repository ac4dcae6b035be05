-- Whether the run's trainer is verl's v1 one (only it writes TRAIN_SAMPLE rows: sampled from the
-- replay buffer), which pads a batch to its longest response rather than to rollout.response_length.
SELECT count(*) > 0 FROM event_counts AS e JOIN contents AS c ON c.cid = e.cid WHERE c.code = {{event(TRAIN_SAMPLE)}}
