-- Trajectory lines by format: "raw_message" (current) or "flat" (the old one).
SELECT fmt, count(*) AS n FROM trajectories GROUP BY fmt ORDER BY fmt
