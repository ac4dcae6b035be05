-- The typed events: `contents`, one row per distinct content, and `events_all`, one row per
-- sample-flow CSV row pointing at its content by `cid`.
-- code: the pipeline event (event_of: as the runtime's format tells them, see traces/events.py);
-- NULL = unknown stage/detail or content that is not `from=A|to=B|stage=S[|global_step=N][|detail=D]`.
-- Each distinct content is parsed once and joined back to its rows: a run repeats a few thousand
-- contents (stage, detail, step) millions of times, and parsing every row costs a third more than
-- reading the files twice. The rows carry the content's id, code and step; the sparse text
-- (tool name, unknown stage, unparsable content) stays in `contents`, so the large sorts and joins
-- carry an integer instead. DuckDB runs these statements with each join's right side as its hash
-- table (DuckDBBackend._joins_as_written): the small side (contents, files) is on the right.
CREATE TABLE contents AS
SELECT row_number() OVER (ORDER BY content) AS cid, content, code, step, param, stage, detail, bad_content
FROM (
    SELECT content, code,
           TRY_CAST(NULLIF(step_text, '') AS BIGINT) AS step,
           CASE WHEN code IN ({{event(TOOL_EXECUTED, ROLLOUT_REWARD)}}) THEN split_part(detail, '=', 2) END AS param,
           CASE WHEN code IS NULL THEN stage END AS stage,
           CASE WHEN code IS NULL THEN detail END AS detail,
           CASE WHEN code IS NULL AND stage = '' THEN coalesce(content, '') END AS bad_content
    FROM (
        SELECT content,
               p.stage AS stage, p.step AS step_text, p.detail AS detail,
               {{event_of(p.stage, p.detail)}} AS code
        FROM (SELECT content, {{content_struct(content, parts)}} AS p
              FROM (SELECT content, {{content_parts(content)}} AS parts
                    FROM (SELECT DISTINCT content FROM raw_events) AS distinct_contents) AS split) AS r
    ) AS parsed
) AS parsed_contents;

CREATE TABLE events_all AS
SELECT r.file_id, r.job_id, r.sample_id, {{plain_timestamp(r.ts)}} AS ts, c.cid, c.code, c.step
FROM raw_events AS r
JOIN contents AS c ON c.content IS NOT DISTINCT FROM r.content
