-- Named queries of the runner's connections (pgtimers/runner/connect.py), loaded by name.
-- Each block starts with `-- name: <name>`; parameters are $1, $2 ... (asyncpg).

-- name: run_session_settings
-- A dead runner must let go of its row locks soon, even during a long statement: the
-- server checks the client socket and TCP keepalives probe the peer (25 s); a runner
-- whose path stalled while it held a transaction open (a run with its own time limit)
-- lets go of it after 15 s idle. Names are looked
-- up in pg_catalog only: a database's own search_path (ALTER DATABASE ... SET) could put
-- a schema someone else writes first, and the runner's login may be a superuser. The
-- claims' notices (timers._say_claimed) need client_min_messages at notice. Set after
-- connecting, not as startup parameters, which PgBouncer refuses. One simple query. A
-- statement's time limit, unless the runner sets one, is a run's (answers.RUN_TIMEOUT_MS;
-- a test checks).
SET search_path = pg_catalog, pg_temp; SET client_min_messages = notice;
SET client_connection_check_interval = '5s'; SET tcp_keepalives_idle = 10;
SET tcp_keepalives_interval = 5; SET tcp_keepalives_count = 3;
SET statement_timeout = '10min'; SET idle_in_transaction_session_timeout = '15s'

-- name: mark_session
-- A mark of this client connection on the server session that serves it.
SELECT set_config('pgtimers.runner_session', $1::text, false)

-- name: session_seen
-- The mark on the server session serving this query, and its backend.
SELECT current_setting('pgtimers.runner_session', true), pg_backend_pid()
