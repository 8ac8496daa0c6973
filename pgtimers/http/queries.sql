-- Named queries of the HTTP API (pgtimers/http/timers.py, keyed.py, stats.py, metrics.py),
-- loaded with pgtimers.http.queries.query(name). Parameters are $1, $2 ...
-- (asyncpg). Every one runs under the caller's database role, through the same
-- timers.* functions and views a psql user calls: PostgreSQL privileges decide.
-- JSON is built by PostgreSQL (row_to_json of timers.status), so the HTTP body
-- of a timer is exactly its status row, fields in column order.

-- name: list_timers
-- GET /api/timers: the server's clock and every timer, by name.
SELECT json_build_object(
           'now_ms', (extract(epoch FROM now()) * 1000)::bigint,
           'timers', coalesce((SELECT json_agg(row_to_json(s) ORDER BY lower(s.name))
                                 FROM timers.status s), '[]'::json))::text

-- name: save_timer
-- POST /api/timers: create or replace; options left NULL take timers.save's defaults.
SELECT row_to_json(timers.save(
           name => $1::text, schedule => $2::text, sql => $3::text,
           enabled => coalesce($4::boolean, true), timezone => $5::text, catch_up => $6::text,
           start_at => $7::text::timestamptz, end_at => $8::text::timestamptz,
           max_runs => $9::bigint, timeout => $10::text::interval,
           locked => coalesce($11::boolean, false), test_clock => $12::text))::text

-- name: enable_timer
SELECT row_to_json(timers.enable($1::text, $2::boolean))::text

-- name: delete_timer
SELECT timers.delete($1::text)::text

-- name: run_timer
-- Waits up to 60 s inside the procedure; it commits, so never inside a transaction.
CALL timers.run($1::text, NULL)

-- name: stats_timers
-- GET /api/stats: every timer with why it needs a look ('' when it does not),
-- in the order of timers.trouble (failed last, failures in 24 h, late), then by name.
SELECT coalesce(json_agg(x ORDER BY x.trouble = '', x.last_ok IS NOT DISTINCT FROM false DESC,
                         x.failures_24h DESC, x.last_late_ms DESC, lower(x.name)), '[]'::json)::text
  FROM (SELECT s.*, coalesce(t.trouble, '') AS trouble
          FROM timers.status s
          LEFT JOIN timers.trouble t ON t.name = s.name) x

-- name: live_runners
-- How many runners serve this database now (their liveness lock, see 0005_runner.sql).
SELECT timers._live_runners()

-- name: metrics_timers
SELECT s.name, s.runs, s.failures, s.failures_24h, s.skipped, s.last_late_ms, s.max_late_ms,
       s.last_ok, s.running, s.enabled
  FROM timers.status s
 ORDER BY lower(s.name)

-- name: partitioned_tables
-- The range-partitioned tables of this database the caller can see, for "Keep data for...".
SELECT coalesce(json_agg(json_build_object(
           'table', format('%I.%I', n.nspname, c.relname),
           'key', pg_get_partkeydef(c.oid),
           'partitions', (SELECT count(*) FROM pg_inherits i WHERE i.inhparent = c.oid),
           'owner', pg_get_userbyid(c.relowner),
           'may_keep', pg_has_role(current_user, c.relowner, 'USAGE'),
           'timer', timers._keep_timer_name(c.oid))
         ORDER BY n.nspname, c.relname), '[]'::json)::text
  FROM pg_partitioned_table p
  JOIN pg_class c ON c.oid = p.partrelid
  JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE p.partstrat = 'r' AND NOT c.relispartition
   AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'timers', 'timers_exec')
   AND has_schema_privilege(n.oid, 'USAGE')

-- name: keep_data_for
SELECT row_to_json(timers.keep_data_for($1::text::regclass, $2::text::interval, $3::text))::text

-- name: list_keyed
-- GET /api/keyed?on=&status=&test_clock=: timers.keyed rows (row_to_json, so a column
-- the view gains shows by itself), in the order timers.list_keyed returns them (tick
-- order): json_agg over the one function scan keeps it. NULL: no filter.
SELECT coalesce(json_agg(row_to_json(k)), '[]'::json)::text
  FROM timers.list_keyed($1::text, $2::text, $3::text) k

-- name: keyed_timer
-- GET /api/keyed/{key}: the timer's timers.keyed row (NULL when there is none) and the
-- database's name, for the 404's message.
SELECT (SELECT row_to_json(k)::text FROM timers.keyed k WHERE k.key = $1::text),
       current_database()::text
