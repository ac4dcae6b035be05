-- Per sample file and job id: time span, steps and rows (traces/runs.py groups the files into runs).
SELECT file_id, coalesce(job_id, '') AS job_id, min(ts), max(ts), min(step), max(step), count(*)
FROM events_all
GROUP BY file_id, coalesce(job_id, '')
