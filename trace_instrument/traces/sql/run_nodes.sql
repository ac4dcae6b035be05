-- Per sample file and job id: time span, steps, rows, and whether it holds rows only the trainer
-- writes (uids drawn, training stages) (traces/runs.py groups the files into runs).
SELECT e.file_id, coalesce(e.job_id, '') AS job_id, min(e.first_ts), max(e.last_ts), min(c.step), max(c.step),
       sum(e.n),
       max(CASE WHEN c.code IN ({{event(UID_GENERATED, TRAJ_UID_GENERATED)}})
                  OR c.code BETWEEN {{event(TRAIN_SAMPLE)}} AND {{event(TRAIN_UPDATE)}} THEN 1 ELSE 0 END)
FROM event_counts_all AS e
JOIN contents AS c ON c.cid = e.cid
GROUP BY e.file_id, coalesce(e.job_id, '')
