-- The sample files with at least one row of a real (not placeholder) sample: every such row is
-- some transition's second row (file_pairs_all counts them), or its sample's first row.
SELECT DISTINCT file_id FROM file_pairs_all
UNION
SELECT DISTINCT first_file FROM entities_all
