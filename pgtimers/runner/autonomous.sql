-- Named queries of an autonomous run's owner session (pgtimers/runner/autonomous.py).
-- Each block starts with `-- name: <name>`. Parameters are %s (psycopg).

-- name: whoami
-- Who the session is: the login the run acts as, and its backend.
SELECT session_user::text, current_user::text, pg_catalog.pg_backend_pid()

-- name: run_settings
-- The run context a timer's SQL reads, as session settings of the owner's session:
-- pgtimers.timer, due_at, prev_due_at ('' for none) and attempt.
SELECT pg_catalog.set_config('pgtimers.timer', %s, false),
       pg_catalog.set_config('pgtimers.due_at', %s, false),
       pg_catalog.set_config('pgtimers.prev_due_at', %s, false),
       pg_catalog.set_config('pgtimers.attempt', %s, false)
