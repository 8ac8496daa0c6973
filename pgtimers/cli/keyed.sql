-- Named queries of `pgtimers keyed` (pgtimers/cli/keyed.py), loaded by name
-- through pgtimers.queries. Parameters are %(name)s (psycopg).
-- They read the view timers.keyed through timers.list_keyed, in tick order, so
-- a column the view gains shows by itself; readers see `sql` only for their own timers.

-- name: keyed_rows
-- The text output: typed rows, in the order timers.list_keyed returns them (tick order).
SELECT k.*
  FROM timers.list_keyed(%(on)s::text, %(status)s::text, %(test_clock)s::text) k

-- name: keyed_json
-- --json: each row as row_to_json gives it (columns in the view's order), in tick order.
SELECT row_to_json(k)
  FROM timers.list_keyed(%(on)s::text, %(status)s::text, %(test_clock)s::text) k

-- name: keyed_owners
-- One row per owner: counts per status, next_timer and next_owed_at (all its timers).
SELECT o.*
  FROM timers.keyed_owners o
 WHERE %(on)s::text IS NULL OR o."on" = %(on)s::text
 ORDER BY o."on"
