-- Samples per milestone: prompts (any row of the prompt), and trajectories (their own rows, or
-- their prompt's sample-level rows for the milestones that v1 records per prompt).
WITH prompt_rows AS (
    SELECT * FROM entities WHERE NOT is_traj
),
traj_flags AS (
    SELECT t.m_generated OR coalesce(s.m_generated, FALSE) AS g,
           t.m_dispatched OR coalesce(s.m_dispatched, FALSE) AS d,
           t.m_started OR coalesce(s.m_started, FALSE) AS st,
           t.m_completed AS c, t.m_reward AS r, t.m_trained AS tr
    FROM entities AS t
    LEFT JOIN prompt_rows AS s ON s.uid = t.uid
    WHERE t.is_traj
),
prompt_flags AS (
    SELECT uid, bool_or(m_generated) AS g, bool_or(m_dispatched) AS d, bool_or(m_started) AS st,
           bool_or(m_completed) AS c, bool_or(m_reward) AS r, bool_or(m_trained) AS tr
    FROM entities
    GROUP BY uid
)
SELECT 'prompts' AS level,
       count(CASE WHEN g THEN 1 END), count(CASE WHEN d THEN 1 END), count(CASE WHEN st THEN 1 END),
       count(CASE WHEN c THEN 1 END), count(CASE WHEN r THEN 1 END), count(CASE WHEN tr THEN 1 END)
FROM prompt_flags
UNION ALL
SELECT 'trajectories',
       count(CASE WHEN g THEN 1 END), count(CASE WHEN d THEN 1 END), count(CASE WHEN st THEN 1 END),
       count(CASE WHEN c THEN 1 END), count(CASE WHEN r THEN 1 END), count(CASE WHEN tr THEN 1 END)
FROM traj_flags
