-- Named queries of the admin CLI (pgtimers list/show/save/...). Looked up by name.

-- name: list_timers
SELECT (extract(epoch FROM now()) * 1000)::bigint AS now_ms,
       coalesce(json_agg(row_to_json(s) ORDER BY lower(s.name)), '[]') AS timers
  FROM timers.status s;

-- name: show_timer
SELECT row_to_json(s) FROM timers.status s WHERE lower(s.name) = lower(%(name)s);

-- name: timer_history
SELECT to_jsonb(h) FROM (
    SELECT r.kind, r.due_at, r.started_at, r.took_ms, r.late_ms, r.ok, r.rows, r.error, r.reason,
           r.attempt, r.backfill_id
      FROM timers.runs r JOIN timers.timers t ON t.id = r.timer_id
     WHERE lower(t.name) = lower(%(name)s)
     ORDER BY r.started_at DESC, r.id DESC
     LIMIT %(limit)s) h;

-- name: timer_next
SELECT t, to_char(t AT TIME ZONE z.zone, 'Dy YYYY-MM-DD HH24:MI:SS') || ' ' || z.zone
  FROM (SELECT coalesce(%(timezone)s, timers._default_zone()) AS zone) z,
       timers.next_runs(%(schedule)s, %(n)s, timezone => z.zone) t;

-- name: enable_timer
SELECT row_to_json(s) FROM timers.enable(%(name)s, %(enabled)s) s;

-- name: delete_timer
SELECT timers.delete(%(name)s, cascade => %(cascade)s);

-- name: run_timer
CALL timers.run(%(name)s);
