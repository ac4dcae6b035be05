-- Pairs of sample files that hold consecutive rows of one sample (or a prompt's row and its
-- trajectory's): every file of a sample is linked to the others through the chain of its rows.
-- Placeholder ids are not in transitions_all (nor in file_pairs_all), so they link nothing.
SELECT DISTINCT prev_file, file_id FROM file_pairs_all WHERE prev_file <> file_id
