-- The sample files with at least one row under a real (not placeholder) uid.
SELECT DISTINCT file_id FROM sample_uid_files
