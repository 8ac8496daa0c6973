-- Named queries of the runner, loaded by name (pgtimers/runner/queries.py).
-- Each block starts with `-- name: <name>`; the lines after it up to the next
-- block are the statement. Parameters are $1, $2 ... (asyncpg).

-- name: fire_many
-- A batch of fires in one round trip, each in its own transaction (timers._fire_many):
-- {fired, results, more}. $8: the connection's mark of its claims' notices; $9, $10: its
-- session settings, put back before each fire's COMMIT; $11: a while the server refused
-- the runner's work, and the timers it holds back after their runs yielded, for the
-- reasons of due times found late (trouble.py, held.py). $2 holds the held timers too.
CALL timers._fire_many($1, $2::bigint[], $3::bigint[], $4, $5, $6, $7, $8, $9::text[], $10::text[],
                       $11::jsonb, NULL)

-- name: session_settings
-- The settings this session set itself (connect.sql's run_session_settings), read once
-- when it connects, before any run: what timers._session_reset puts back after each.
SELECT pg_catalog.array_agg(s.name ORDER BY s.name),
       pg_catalog.array_agg(pg_catalog.current_setting(s.name) ORDER BY s.name)
  FROM pg_catalog.pg_settings s
 WHERE s.source OPERATOR(pg_catalog.=) 'session'

-- name: session_reset
-- The end of a run with its own time limit, before its COMMIT: the session as it was
-- (timers._fire_many does the same after each of its fires).
SELECT timers._session_reset($1::text[], $2::text[])

-- name: run_lost
-- A run whose session ended while it ran, recorded as a failed attempt (NULL: nothing to
-- record, it committed or runs elsewhere).
SELECT timers._run_lost($1, $2, $3::text::timestamptz, $4, $5::jsonb)

-- name: set_timeout
-- The run's time limit, for the rest of the run's transaction; and its notices: the run
-- says when it starts (timers._execute), so that the runner knows what it said.
SELECT set_config('statement_timeout', $1::text, true),
       set_config('pgtimers.run_notices', 'on', true)

-- name: run_messages
-- What runs said ([{timer_id, started_at, messages, more}]), after their commit, into
-- their timers.runs rows and events (timers._run_messages): how many rows it wrote.
SELECT timers._run_messages($1::jsonb)

-- name: run_due
-- (the due time as text: it comes in a claim's JSON)
SELECT timers._run_due($1, $2::text::timestamptz, $3)

-- name: run_request
SELECT timers._run_request($1, $2)

-- name: run_backfill
SELECT timers._run_backfill($1, $2)

-- name: next_wake
-- The server's clock now, the earliest due time of anything (it may have passed: a
-- run holds it), and the earliest due time still to come.
SELECT db_now, wake_at, next_at FROM timers._next_wake()

-- name: schema_installed
SELECT pg_catalog.to_regclass('timers.timers') IS NOT NULL
   AND pg_catalog.to_regprocedure('timers._run_lost(text,bigint,timestamptz,text,jsonb)') IS NOT NULL

-- name: trust
-- The first object the runner would run code of, or have its code run on, in this
-- database that belongs to a role it must not trust (no row: all are trusted): schema
-- timers, every routine and relation in it, and the functions of triggers on its
-- tables. A role is trusted when running its code as the runner's login gives it
-- nothing it could not take already: a superuser; for a login that is not a superuser,
-- also the login itself and a role that can act as the login (a member of it, which on
-- PostgreSQL 16 includes one with the ADMIN option on it, or on 15 a role with
-- CREATEROLE, which can grant itself any role that is not a superuser). The session's
-- search_path is pg_catalog, pg_temp (connect.sql), so nothing here is looked up
-- elsewhere.
WITH login AS (
    SELECT r.oid, r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = session_user
), owned (what, owner) AS (
    SELECT 'schema timers', n.nspowner FROM pg_catalog.pg_namespace n WHERE n.nspname = 'timers'
    UNION ALL
    SELECT 'routine ' || p.oid::pg_catalog.regprocedure::text, p.proowner
      FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
     WHERE n.nspname = 'timers'
    UNION ALL
    SELECT 'relation ' || c.oid::pg_catalog.regclass::text, c.relowner
      FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = 'timers'
    UNION ALL
    SELECT 'trigger function ' || p.oid::pg_catalog.regprocedure::text, p.proowner
      FROM pg_catalog.pg_trigger t
      JOIN pg_catalog.pg_class c ON c.oid = t.tgrelid
      JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
      JOIN pg_catalog.pg_proc p ON p.oid = t.tgfoid
     WHERE n.nspname = 'timers'
)
SELECT o.what, r.rolname::text AS owner, session_user::text AS login, l.rolsuper AS login_super
  FROM owned o JOIN pg_catalog.pg_roles r ON r.oid = o.owner CROSS JOIN login l
 WHERE NOT (r.rolsuper
            OR (NOT l.rolsuper
                AND (r.oid = l.oid
                     OR pg_catalog.pg_has_role(r.oid, l.oid, 'MEMBER')
                     OR (r.rolcreaterole
                         AND pg_catalog.current_setting('server_version_num')::int < 160000))))
 ORDER BY o.what
 LIMIT 1

-- name: in_recovery
SELECT pg_is_in_recovery()

-- name: runner_start
SELECT timers._runner_start($1, $2, $3, $4, $5)

-- name: workers_blocked
-- The runner's worker sessions ($1: their pids) as the server sees them (blocked.py): what
-- each runs (application_name is 'pgtimers: <timer>' while it runs one), what it waits on
-- and who blocks it; and how many timers are due that none of them runs.
SELECT w.application_name, w.wait_event_type, w.wait_event,
       pg_catalog.pg_blocking_pids(w.pid) AS blocked_by,
       (SELECT pg_catalog.count(*) FROM timers.timers t
         WHERE t.fire_at OPERATOR(pg_catalog.<=) pg_catalog.now() AND t.test_clock IS NULL
           AND pg_catalog.left('pgtimers: ' OPERATOR(pg_catalog.||) t.name, 63) OPERATOR(pg_catalog.<>) ALL (
               SELECT a.application_name FROM pg_catalog.pg_stat_activity a
                WHERE a.pid OPERATOR(pg_catalog.=) ANY ($1::int[]))) AS due
  FROM pg_catalog.pg_stat_activity w
 WHERE w.pid OPERATOR(pg_catalog.=) ANY ($1::int[])
 ORDER BY w.pid

-- name: runner_beat
SELECT timers._runner_beat($1)

-- name: runner_stop
SELECT timers._runner_stop($1)

-- name: clock_jump
SELECT timers._server_clock_jumped($1, $2, $3)

-- name: prune
SELECT timers._prune()

-- name: default_zone
SELECT timers._default_zone()

-- name: set_timezone
SELECT timers.set_timezone($1)

-- name: list_databases
SELECT datname FROM pg_database WHERE datallowconn AND NOT datistemplate ORDER BY datname

-- name: connection_settings
-- The connection slots of the server, for the runner's default connection budget:
-- max_connections, the slots reserved for superusers, and (PostgreSQL 16+) those
-- reserved for roles with pg_use_reserved_connections.
SELECT current_setting('max_connections')::int,
       current_setting('superuser_reserved_connections')::int,
       coalesce(current_setting('reserved_connections', true), '0')::int

-- name: runner_park
SELECT timers._runner_park($1, $2)

-- name: ringing
-- The databases of this server where a session waits for the runner (timers._ring).
SELECT timers._ringing()

-- name: autonomous_began
-- An autonomous run's owner session is up: its backend pid and login
-- (timers._autonomous_alive tells by them whether the run can still report back).
SELECT timers._autonomous_began($1, $2, $3)

-- name: autonomous_finish
-- An autonomous run ended: its outcome ({ok, error, sqlstate, rows}) recorded as an
-- attempt of its kind (NULL: recorded already, as interrupted, or its timer is gone).
SELECT timers._autonomous_finish($1, $2::jsonb, $3)

-- name: deliveries_enqueue
-- The delivery rows of a webhook target for the new events of the outbox (NULL: another
-- runner is doing it now). $1 target, $2 events (NULL: all), $3 timer glob, $4 runner.
SELECT timers._deliveries_enqueue($1, $2::text[], $3, $4)

-- name: deliveries_claim
-- Deliveries of these targets to POST now, leased to this runner; committed before the
-- POSTs. $3: how many at most, $4: the lease in seconds.
SELECT * FROM timers._deliveries_claim($1::text[], $2, $3, make_interval(secs => $4::float8))

-- name: delivery_done
SELECT timers._delivery_done($1, $2, $3, $4)

-- name: delivery_failed
-- ('retrying' | 'undeliverable' | NULL when no longer this runner's, next try)
SELECT state, next_at FROM timers._delivery_failed($1, $2, $3, $4, $5)
