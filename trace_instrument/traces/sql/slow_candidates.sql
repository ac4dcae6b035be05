-- The transitions the slowest of each kind are found among (latencies.sql), so that the views need
-- not scan every transition: `slow_thresholds_all`, each kind's latency at or above which at least
-- three transitions lie (Dialect.third_largest), and `slow_candidates_all`, the transitions (not
-- duplicates) at or above it. `analyze --follow` keeps both up to date (merge_slow_candidates.sql).
CREATE TABLE slow_thresholds_all AS
{{slow_thresholds_of(latency_counts_all)}};

CREATE TABLE slow_candidates_all AS
SELECT t.prev_code, t.code, t.dt, t.skey, t.cid IS NULL AS bridge
FROM transitions_all AS t
JOIN slow_thresholds_all AS th ON th.prev_code = t.prev_code AND th.code = t.code AND t.dt >= th.dt
WHERE NOT t.dup
