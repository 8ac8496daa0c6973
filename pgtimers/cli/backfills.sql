-- Named queries of `pgtimers backfill`, `backfills` and `cancel-backfill`
-- (pgtimers/cli/backfills.py). Parameters are %(name)s (psycopg). They call the same
-- timers.backfill, timers.cancel_backfill and view timers.backfills as psql users do.

-- name: backfill
SELECT timers.backfill(%(name)s::text, %(from_at)s::timestamptz, %(to_at)s::timestamptz)

-- name: cancel
SELECT (timers.cancel_backfill(%(id)s::bigint)).id

-- name: backfill_row
-- The text output: one row, typed.
SELECT b.* FROM timers.backfills b WHERE b.id = %(id)s::bigint

-- name: backfill_json
-- --json: one row as row_to_json gives it (GET /api/backfills answers the same).
SELECT row_to_json(b) FROM timers.backfills b WHERE b.id = %(id)s::bigint

-- name: backfill_rows
-- One timer's backfills (every timer's when NULL), newest first.
SELECT b.*
  FROM timers.backfills b
 WHERE %(timer)s::text IS NULL OR lower(b.timer) = lower(%(timer)s::text)
 ORDER BY b.id DESC

-- name: backfills_json
SELECT coalesce(json_agg(row_to_json(b) ORDER BY b.id DESC), '[]'::json)
  FROM timers.backfills b
 WHERE %(timer)s::text IS NULL OR lower(b.timer) = lower(%(timer)s::text)

-- name: live_runners
-- How many runners serve this database now (--wait says when none does).
SELECT timers._live_runners()
