-- Per sample file and job id: time span, steps, rows, and whether it holds rows only the trainer
-- writes (uids drawn, training stages) (traces/runs.py groups the files into runs).
SELECT file_id, coalesce(job_id, '') AS job_id, min(ts), max(ts), min(step), max(step), count(*),
       max(CASE WHEN code IN ({{event(UID_GENERATED, TRAJ_UID_GENERATED)}})
                  OR code BETWEEN {{event(TRAIN_SAMPLE)}} AND {{event(TRAIN_UPDATE)}} THEN 1 ELSE 0 END)
FROM events_all
GROUP BY file_id, coalesce(job_id, '')
