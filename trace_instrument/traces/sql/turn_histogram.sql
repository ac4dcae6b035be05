SELECT n_turns, count(*) AS n FROM trajectories GROUP BY n_turns ORDER BY n_turns
