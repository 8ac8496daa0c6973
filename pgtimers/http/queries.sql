-- Named queries of the HTTP API (pgtimers/http/timers.py, backfills.py, values.py, keyed.py,
-- stats.py, metrics.py), loaded with pgtimers.http.queries.query(name). Parameters are
-- $1, $2 ... (asyncpg). Every one runs under the caller's database role, through the same
-- timers.* functions and views a psql user calls: PostgreSQL privileges decide.
-- JSON is built by PostgreSQL (row_to_json of timers.status), so the HTTP body
-- of a timer is exactly its status row, fields in column order.

-- name: list_timers
-- GET /api/timers: the server's clock and every timer, by name, and whether the caller
-- may export them (a member of the admin role: the console shows Export only then).
SELECT json_build_object(
           'now_ms', (extract(epoch FROM now()) * 1000)::bigint,
           'timers', coalesce((SELECT json_agg(row_to_json(s) ORDER BY lower(s.name))
                                 FROM timers.status s), '[]'::json),
           'may_export', pg_has_role(timers._role('admin'), 'MEMBER'))::text

-- name: save_timer
-- POST /api/timers: the body as one JSON object (options.timer_json); a key left out
-- takes timers.save's default.
SELECT row_to_json(timers.save_json($1::jsonb))::text

-- name: cast_time
-- A body's time alone, to name the key of one PostgreSQL cannot read (values.py).
SELECT $1::text::timestamptz

-- name: cast_interval
SELECT $1::text::interval

-- name: enable_timer
SELECT row_to_json(timers.enable($1::text, $2::boolean))::text

-- name: delete_timer
SELECT timers.delete($1::text)::text

-- name: run_timer
-- Waits up to 60 s inside the procedure; it commits, so never inside a transaction.
CALL timers.run($1::text, NULL)

-- name: deadline_check
-- Tell the deadlines that have passed with no outcome (timers._deadline_check): a look
-- of the console or of GET /metrics tells them while no runner serves the database
-- (a reader's look leaves them to the runners and administrators).
-- (a DO block: a reader's plan of a call it may not make would fail, even if not taken)
DO $$
BEGIN
    IF pg_catalog.has_function_privilege('timers._deadline_check()', 'EXECUTE') THEN
        PERFORM timers._deadline_check();
    END IF;
END
$$

-- name: stats_timers
-- GET /api/stats: every timer with why it needs a look ('' when it does not),
-- in the order of timers.trouble (failed last, failures in 24 h, late), then by name.
SELECT coalesce(json_agg(x ORDER BY x.trouble = '', x.last_ok IS NOT DISTINCT FROM false DESC,
                         x.failures_24h DESC, x.last_late_ms DESC, lower(x.name)), '[]'::json)::text
  FROM (SELECT s.*, coalesce(t.trouble, '') AS trouble
          FROM timers.status s
          LEFT JOIN timers.trouble t ON t.name = s.name) x

-- name: undeliverable
-- GET /api/stats: the webhook deliveries given up (timers.deliveries), newest first, the
-- last 20 of the retention.
SELECT coalesce(json_agg(x), '[]'::json)::text
  FROM (SELECT d.event_id, d.event, d.timer, d.due_at, d.target, d.delivery_id, d.attempts,
               d.given_up_at, d.last_status, d.last_error
          FROM timers.deliveries d
         WHERE d.state = 'undeliverable'
         ORDER BY d.given_up_at DESC, d.event_id DESC
         LIMIT 20) x

-- name: live_runners
-- How many runners serve this database now (their liveness lock, see 0005_runner.sql).
SELECT timers._live_runners()

-- name: metrics_timers
SELECT s.name, s.runs, s.failures, s.failures_24h, s.skipped, s.last_late_ms, s.max_late_ms,
       s.last_ok, s.running, s.enabled, s.paused_ms, s.deadline_missed, s.last_success_ms
  FROM timers.status s
 ORDER BY lower(s.name)

-- name: metrics_database
-- GET /metrics: the run histograms summed over the database's timers (counts per bucket,
-- bounds in ms) and the events not yet delivered, by state.
SELECT timers._duration_buckets() AS duration_bounds_ms,
       (SELECT array_agg((SELECT coalesce(sum(m.took_counts[i]), 0) FROM timers.metrics m)::bigint
                         ORDER BY i)
          FROM generate_series(1, cardinality(timers._duration_buckets()) + 1) i) AS took_counts,
       (SELECT coalesce(sum(m.took_sum_ms), 0)::bigint FROM timers.metrics m) AS took_sum_ms,
       timers._lateness_buckets() AS lateness_bounds_ms,
       (SELECT array_agg((SELECT coalesce(sum(m.late_counts[i]), 0) FROM timers.metrics m)::bigint
                         ORDER BY i)
          FROM generate_series(1, cardinality(timers._lateness_buckets()) + 1) i) AS late_counts,
       (SELECT coalesce(sum(m.late_sum_ms), 0)::bigint FROM timers.metrics m) AS late_sum_ms,
       (SELECT u.events FROM timers.events_undelivered u WHERE u.state = 'pending')
           AS events_pending,
       (SELECT u.events FROM timers.events_undelivered u WHERE u.state = 'undeliverable')
           AS events_undeliverable

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

-- name: timer_history
-- GET /api/timers/{name}/history?window=: a timer's page in one statement. $1 the name,
-- $2 the chart's window (interval). NULL when there is no such timer. The timer's status
-- row; its next 10 due times in its zone (timers.next_runs from its next due time, as
-- scheduled: before jitter, before end_at); its last 100 runs and skipped due times (with
-- what each run said: its messages); the
-- runs of the window (the newest 5000) as chart points [started_ms, due_ms, late_ms,
-- took_ms, outcome, kind]; runs, failures and skips per hour of the window; whether the
-- caller may read timers.audit (timer_audit, below); what it follows and what follows it
-- (timers._follow_links). Times are Unix milliseconds.
WITH s AS (
    SELECT st.* FROM timers.status st WHERE lower(st.name) = lower($1::text)
), tid AS (
    -- the timer's own runs (a timer deleted and saved again under its name starts afresh)
    SELECT r.timer_id FROM timers.runs r, s WHERE r.timer = s.name ORDER BY r.id DESC LIMIT 1
), since AS (
    SELECT now() - $2::text::interval AS at
), runs AS (
    SELECT r.id, r.kind, r.started_at, r.took_ms, r.late_ms, r.ok, r.rows, r.error, r.reason,
           r.attempt, r.backfill_id, r.messages,
           (extract(epoch FROM r.due_at) * 1000)::bigint AS due_ms,
           (extract(epoch FROM r.started_at) * 1000)::bigint AS started_ms,
           CASE WHEN r.kind = 'skipped' THEN 'skipped' WHEN r.ok THEN 'ok' ELSE 'failed' END
               AS outcome,
           -- the hour it counts in: a skip's is its due time's (it is recorded later)
           coalesce(CASE WHEN r.kind = 'skipped' THEN r.due_at END, r.started_at) AS at
      FROM timers.runs r
     WHERE r.timer_id = (SELECT tid.timer_id FROM tid)
), recent AS (
    SELECT * FROM runs ORDER BY started_at DESC, id DESC LIMIT 100
), win AS (
    SELECT runs.* FROM runs, since WHERE runs.started_at > since.at
     ORDER BY started_at DESC, id DESC LIMIT 5000
), hours AS (
    SELECT (extract(epoch FROM h) * 1000)::bigint AS hour_ms,
           count(w.id) FILTER (WHERE w.outcome <> 'skipped') AS runs,
           count(w.id) FILTER (WHERE w.outcome = 'failed') AS failures,
           count(w.id) FILTER (WHERE w.outcome = 'skipped') AS skips
      FROM since
     CROSS JOIN generate_series(date_trunc('hour', since.at), now(), interval '1 hour') h
      LEFT JOIN win w ON w.at >= h AND w.at < h + interval '1 hour'
     GROUP BY h
), nxt AS (
    SELECT (extract(epoch FROM d) * 1000)::bigint AS due_ms
      FROM s, timers.next_runs(
               s.schedule, 10,
               after => CASE WHEN s.next_run_ms > 0
                             THEN to_timestamp((s.next_run_ms - 1) / 1000.0)
                             ELSE greatest(now(), s.start_at - interval '1 millisecond') END,
               timezone => s.timezone) d
     WHERE s.enabled AND NOT s.expired AND (s.end_at IS NULL OR d < s.end_at)
)
SELECT json_build_object(
           'now_ms', (extract(epoch FROM now()) * 1000)::bigint,
           'timer', row_to_json(s),
           'zone', s.timezone,
           'next_ms', coalesce((SELECT json_agg(due_ms ORDER BY due_ms) FROM nxt), '[]'::json),
           'runs', coalesce((SELECT json_agg(json_build_object(
                        'kind', r.kind, 'due_ms', r.due_ms, 'started_ms', r.started_ms,
                        'took_ms', r.took_ms, 'late_ms', r.late_ms, 'ok', r.ok, 'rows', r.rows,
                        'error', r.error, 'reason', r.reason, 'attempt', r.attempt,
                        'backfill', r.backfill_id, 'messages', r.messages) ORDER BY r.started_at DESC, r.id DESC)
                      FROM recent r), '[]'::json),
           'since_ms', (SELECT (extract(epoch FROM since.at) * 1000)::bigint FROM since),
           'points', coalesce((SELECT json_agg(json_build_array(
                          w.started_ms, w.due_ms, w.late_ms, w.took_ms, w.outcome, w.kind)
                        ORDER BY w.started_at, w.id)
                      FROM win w), '[]'::json),
           'points_cut', (SELECT count(*) = 5000 FROM win),
           'hours', coalesce((SELECT json_agg(json_build_array(hour_ms, runs, failures, skips)
                                ORDER BY hour_ms) FROM hours), '[]'::json),
           'audit_readable', has_table_privilege('timers.audit', 'SELECT'),
           'follows', timers._follow_links(s.name))::text
  FROM s

-- name: timer_audit
-- The timer's audit rows, newest first (run only for a caller who may read timers.audit).
SELECT coalesce(json_agg(json_build_object(
           'at_ms', (extract(epoch FROM a.at) * 1000)::bigint, 'actor', a.actor,
           'session', a.session, 'action', a.action, 'detail', a.detail)
         ORDER BY a.at DESC, a.id DESC), '[]'::json)::text
  FROM (SELECT * FROM timers.audit au WHERE lower(au.object) = lower($1::text)
         ORDER BY au.at DESC, au.id DESC LIMIT 50) a

-- name: backfill
-- POST /api/timers/{name}/backfill: timers.backfill; its id (backfill_row reads it after).
SELECT timers.backfill($1::text, $2::text::timestamptz, $3::text::timestamptz)

-- name: backfill_row
-- One timers.backfills row (a backfill just made is read in the same transaction).
SELECT row_to_json(b)::text FROM timers.backfills b WHERE b.id = $1::bigint

-- name: list_backfills
-- GET /api/backfills?timer=: timers.backfills, newest first; $1 NULL: every timer's.
SELECT coalesce(json_agg(row_to_json(b) ORDER BY b.id DESC), '[]'::json)::text
  FROM timers.backfills b
 WHERE $1::text IS NULL OR lower(b.timer) = lower($1::text)

-- name: cancel_backfill
SELECT row_to_json(timers.cancel_backfill($1::bigint))::text

-- name: apply
-- POST /api/apply (apply.py): timers.apply's plan in its order, and how many of its
-- rows change something (made, or that would be in a dry run).
SELECT json_build_object(
           'dry_run', $3::boolean,
           'plan', coalesce(json_agg(json_build_object('action', a.action, 'name', a.name,
                                                       'changes', a.changes) ORDER BY a.n), '[]'::json),
           'changed', count(*) FILTER (WHERE a.action <> 'unchanged'))::text
  FROM timers.apply($1::text::jsonb, $2::boolean, $3::boolean) WITH ORDINALITY a(action, name, changes, n)

-- name: export
-- GET /api/export?timers=PATTERN: timers.export, a declared set ($1 NULL: every timer).
SELECT timers.export($1::text)::text
