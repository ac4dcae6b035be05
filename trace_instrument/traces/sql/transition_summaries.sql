-- Three small tables built from the transitions {{source}} once (Dialect.latency_counts_of,
-- tool_counts_of, file_pairs_of), so that the views which would otherwise scan every transition
-- read a few thousand rows instead: the latencies, the tool times, the clock skew, the duplicate
-- rows, and the links between files that group them into runs. `analyze --follow` builds them from
-- a refresh's new transitions and from those they replace, and merges both in
-- (merge_transition_summaries.sql).
CREATE TABLE latency_counts{{suffix}} AS
{{latency_counts_of({{source}})}};

CREATE TABLE tool_counts{{suffix}} AS
{{tool_counts_of({{source}})}};

CREATE TABLE file_pairs{{suffix}} AS
{{file_pairs_of({{source}})}}
