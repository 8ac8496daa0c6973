-- Named queries of `pgtimers save` (pgtimers/cli/save.py). Parameters are %(name)s (psycopg).

-- name: save_timer
-- The timer as one JSON object (pgtimers.options.timer_json): an option left out takes
-- timers.save's default.
SELECT row_to_json(s) FROM timers.save_json(%(timer)s::jsonb) s;
