-- Named queries of the runner, loaded by name (pgtimers/runner/queries.py).
-- Each block starts with `-- name: <name>`; the lines after it up to the next
-- block are the statement. Parameters are $1, $2 ... (asyncpg).

-- name: claim_request
-- The oldest run-now request no runner holds (CALL timers.run).
SELECT r.id,
       (extract(epoch FROM coalesce(t.timeout, interval '10 minutes')) * 1000)::bigint AS timeout_ms
  FROM timers.run_requests r
  LEFT JOIN timers.timers t ON t.id = r.timer_id
 WHERE r.finished_at IS NULL AND r.requested_at > now() - interval '5 minutes'
 ORDER BY r.id
 LIMIT 1
   FOR UPDATE OF r SKIP LOCKED

-- name: claim_due
-- The earliest due timer on the server's clock that no run holds, served by
-- index timers_due; $1 = ids to leave alone for a while (their run raised).
SELECT t.id, t.next_due_at,
       (extract(epoch FROM coalesce(t.timeout, interval '10 minutes')) * 1000)::bigint AS timeout_ms
  FROM timers.timers t
 WHERE t.next_due_at <= now() AND t.test_clock IS NULL
   AND t.id <> ALL ($1::bigint[])
 ORDER BY t.next_due_at, t.id
 LIMIT 1
   FOR UPDATE SKIP LOCKED

-- name: claim_due_test_clock
-- The same for timers on a test clock: due when the clock has reached them.
SELECT t.id, t.next_due_at,
       (extract(epoch FROM coalesce(t.timeout, interval '10 minutes')) * 1000)::bigint AS timeout_ms
  FROM timers.timers t
  JOIN timers.test_clocks c ON c.name = t.test_clock
 WHERE t.test_clock IS NOT NULL AND t.next_due_at IS NOT NULL AND t.next_due_at <= c.now
   AND t.id <> ALL ($1::bigint[])
 ORDER BY t.next_due_at, t.id
 LIMIT 1
   FOR UPDATE OF t SKIP LOCKED

-- name: claim_keyed
-- The next keyed timer in tick order (owed_at, place, key bytes) on a clock
-- whose fire lock this transaction takes (sql/code/14_keyed.sql); no row when none.
SELECT k.id, k.owed_at, k.timeout_ms FROM timers._keyed_claim($1::bigint[]) k

-- name: fire_keyed
SELECT timers._keyed_fire($1, $2, $3)

-- name: reset_session
-- After a run: whatever session state a timer's SQL left (plain SET, temp tables,
-- cursors, LISTEN, session advisory locks, prepared statements) goes, so nothing
-- leaks into the next run on this connection. RESET ALL returns to the
-- connection's startup settings (application_name, keepalives).
RESET ALL; DISCARD TEMP; CLOSE ALL; UNLISTEN *; SELECT pg_advisory_unlock_all(); DEALLOCATE ALL

-- name: set_timeout
-- The run's time limit, for the rest of the run's transaction.
SELECT set_config('statement_timeout', $1::text, true)

-- name: run_due
SELECT timers._run_due($1, $2, $3)

-- name: run_request
SELECT timers._run_request($1, $2)

-- name: next_wake
-- The server's clock now, the earliest due time of anything (it may have passed: a
-- run holds it), and the earliest due time still to come.
SELECT db_now, wake_at, next_at FROM timers._next_wake()

-- name: schema_installed
SELECT to_regclass('timers.timers') IS NOT NULL
   AND to_regprocedure('timers._run_due(bigint,timestamptz,text)') IS NOT NULL

-- name: in_recovery
SELECT pg_is_in_recovery()

-- name: runner_start
SELECT timers._runner_start($1, $2, $3, $4, $5)

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
