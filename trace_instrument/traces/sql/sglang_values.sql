-- The sglang timing values of the turns of trajectories {{first_traj}} and later (every turn at
-- load; those of the lines `analyze --follow` appended): `{{values}}`, one row per turn and field
-- that sglang reported (SGLANG_FIELDS numbers the fields), with the value's bucket
-- (Dialect.value_bucket); `{{buckets}}`, their summary per field and bucket (sglang_buckets_of),
-- which sglang.sql reads instead of sorting every value.
CREATE TABLE {{values}} AS
SELECT traj_id, field, {{value_bucket(value)}} AS bucket, value
FROM (SELECT t.traj_id, f.field, {{sglang_value(f.field)}} AS value
      FROM turns_all AS t
      CROSS JOIN ({{sglang_field_numbers()}}) AS f
      WHERE t.traj_id >= {{first_traj}}) AS timed
WHERE value IS NOT NULL;

CREATE TABLE {{buckets}} AS
{{sglang_buckets_of({{values}})}}
