-- The job ids of the rows, most rows first.
SELECT job_id, sum(n) AS n FROM event_counts GROUP BY job_id ORDER BY n DESC, job_id
