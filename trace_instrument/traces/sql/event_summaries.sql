-- Two small tables built from the events {{source}} once, so that the views which would
-- otherwise scan the millions of events each time read a few thousand rows instead:
-- `{{counts}}`: rows and time span per sample file, job id and content. A content fixes its
-- code and step (events.sql), so per-file, per-job and per-step counts and spans follow from it.
-- `{{placeholders}}`: the rows of placeholder sample ids (backend.PLACEHOLDER_UIDS), which no
-- sample holds (entities.sql), the sync rows apart, as placeholder_rows.sql counts them.
-- `analyze --follow` builds both from the appended rows and merges them in (merge_event_summaries.sql).
CREATE TABLE {{counts}} AS
{{event_counts_of({{source}})}};

CREATE TABLE {{placeholders}} AS
SELECT file_id, sample_id, ts
FROM {{source}}
WHERE code IS NOT NULL AND code <> {{event(SYNC_PARAMS)}} AND {{is_placeholder(sample_id)}}
