-- Named queries of pgtimers/cli/values.py: one option's value, cast alone, so a value
-- PostgreSQL cannot read is an error that names its option. Nothing is changed.

-- name: time
SELECT %(value)s::text::timestamptz

-- name: interval
SELECT %(value)s::text::interval
