-- `analyze --follow`: the slowest transitions' candidates (slow_candidates.sql) after a refresh
-- replaced the transitions in `transitions_old` (a sample's own, or a trajectory's bridge, all at
-- once) by those in `transitions_new`, and merge_transition_summaries.sql brought the latency
-- counts up to date. Every transition at or above its kind's old threshold is a candidate: the
-- kept ones were, the new ones above it join. So the candidates hold every transition at or above
-- the new threshold where that is no lower than the old one; `slow_thresholds_lower` lists the
-- kinds where it is lower, and the backend then builds the candidates again from every transition.
DELETE FROM slow_candidates_all AS c
USING (SELECT DISTINCT skey, cid IS NULL AS bridge FROM transitions_old) AS o
WHERE o.skey = c.skey AND o.bridge = c.bridge;

INSERT INTO slow_candidates_all
SELECT n.prev_code, n.code, n.dt, n.skey, n.cid IS NULL
FROM transitions_new AS n
LEFT JOIN slow_thresholds_all AS th ON th.prev_code = n.prev_code AND th.code = n.code
WHERE NOT n.dup AND (th.dt IS NULL OR n.dt >= th.dt);

CREATE TEMP TABLE slow_thresholds_new AS
{{slow_thresholds_of(latency_counts_all)}};

CREATE TEMP TABLE slow_thresholds_lower AS
SELECT n.prev_code, n.code
FROM slow_thresholds_new AS n
JOIN slow_thresholds_all AS o ON o.prev_code = n.prev_code AND o.code = n.code
WHERE n.dt < o.dt;

CREATE OR REPLACE TABLE slow_thresholds_all AS SELECT * FROM slow_thresholds_new;

DELETE FROM slow_candidates_all AS c
USING slow_thresholds_all AS th
WHERE th.prev_code = c.prev_code AND th.code = c.code AND c.dt < th.dt
