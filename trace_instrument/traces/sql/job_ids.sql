SELECT job_id, count(*) AS n FROM events GROUP BY job_id ORDER BY n DESC, job_id
