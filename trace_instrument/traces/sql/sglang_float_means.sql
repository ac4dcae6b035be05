-- The float mean of the sglang fields {{fields}}, whose values are not all finite and below 10^18 (inf,
-- NaN, a huge value: Dialect.exact_mean's fallback).
SELECT field, avg(value) FROM sglang_values WHERE field IN ({{fields}}) GROUP BY field
