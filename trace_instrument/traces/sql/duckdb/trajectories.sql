-- DuckDB: trajectory JSONL lines, new format ({prompt_uid, sample_index, raw_message}) or the old
-- flat one, parsed to one row per trajectory; lines that are not JSON objects keep `ok` false.
-- The rows keep the lines' order (files in the order of {{paths}}, each line by line: the backend
-- runs this with insertion order preserved, and the file id is looked up, not joined), so each
-- line's rowid, a trajectory's id, is the same on every read of the same files.
CREATE TABLE traj_lines AS
SELECT file_id, line_len,
       top IS NOT NULL AS is_json,
       top.prompt_uid AS prompt_uid, top.sample_index AS sample_index,
       CASE WHEN top.raw_message IS NULL THEN 'flat' ELSE 'raw_message' END AS fmt,
       CASE WHEN top IS NULL THEN left(line, 120) END AS bad_text,
       CASE WHEN top IS NULL THEN NULL
            WHEN top.raw_message IS NULL THEN TRY(json_transform(line, '{{payload_schema}}'))
            ELSE TRY(json_transform(top.raw_message, '{{payload_schema}}'))
       END AS p
FROM (SELECT {{file_ids}}[list_position({{paths}}, r.filename)] AS file_id, length(r.line) AS line_len, r.line,
             TRY(json_transform(r.line, '{{top_schema}}')) AS top
      FROM (SELECT filename, line
            FROM read_csv({{paths}}, columns = {'line': 'VARCHAR'}, header = false, auto_detect = false,
                          delim = '{{unit_sep}}', quote = '', escape = '', filename = true, max_line_size = 1073741824,
                          store_rejects = true, rejects_table = 'jsonl_rejects', rejects_scan = 'jsonl_scans')
            WHERE {{torn_filter}}) AS r) AS parsed;
