-- Pairs of sample files that share a prompt (each file paired with the lowest file of each of its uids).
SELECT DISTINCT file_id, anchor
FROM (SELECT file_id, min(file_id) OVER (PARTITION BY uid) AS anchor FROM sample_uid_files) AS w
WHERE file_id <> anchor
