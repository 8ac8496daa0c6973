-- pgtimers code: the status view: one row per timer.
--
-- Repeatable: applied whole on every install and upgrade, after the versioned
-- migrations (docs/design.md). Each object here is defined in this file only.

CREATE OR REPLACE VIEW timers.status AS
SELECT
    t.name,
    current_database()::text AS database,
    t.schedule,
    -- A timer's SQL may hold secrets: readers see it for their own timers only.
    CASE WHEN pg_has_role(current_user, timers._role('admin'), 'MEMBER')
           OR pg_has_role(current_user, (SELECT p.proowner FROM pg_proc p WHERE p.pronamespace = 'timers_exec'::regnamespace AND p.proname = t.executor), 'MEMBER')
         THEN t.sql END AS sql,
    -- turned on or off while running: shown as asked
    coalesce((SELECT pc.action = 'enable' FROM timers.pending_changes pc WHERE pc.timer_id = t.id),
             t.enabled) AS enabled,
    (extract(epoch FROM t.created_at) * 1000)::bigint AS created_ms,
    (extract(epoch FROM t.updated_at) * 1000)::bigint AS updated_ms,
    -- the role it runs as: its executor's owner (a rename or REASSIGN OWNED shows), else the
    -- name it was saved by (the executor is gone: DROP OWNED)
    coalesce(pg_get_userbyid((SELECT p.proowner FROM pg_proc p WHERE p.pronamespace = 'timers_exec'::regnamespace AND p.proname = t.executor)), t.owner)::text AS created_by,
    -- when it runs next: its due time moved by its jitter, or a failed run's retry
    coalesce((extract(epoch FROM t.fire_at) * 1000)::bigint, 0) AS next_run_ms,
    coalesce((extract(epoch FROM t.last_run_at) * 1000)::bigint, 0) AS last_run_ms,
    coalesce((extract(epoch FROM t.last_due_at) * 1000)::bigint, 0) AS last_due_ms,
    t.last_late_ms,
    t.max_late_ms,
    t.last_ok,
    t.last_error,
    t.last_took_ms,
    t.last_rows,
    t.runs,
    t.failures,
    -- failed due times: an attempt followed by a retry is not (yet) a failure
    (SELECT count(*) FROM timers.runs r
      WHERE r.timer_id = t.id AND r.ok = false AND r.kind <> 'skipped' AND r.retry_at IS NULL
        AND r.started_at > now() - interval '24 hours') AS failures_24h,
    t.skipped,
    coalesce((extract(epoch FROM t.last_skip_at) * 1000)::bigint, 0) AS last_skip_ms,
    t.last_skip_reason,
    t.caught_up,
    -- a run holds the timer's row lock until it commits; only pgtimers' roles can take
    -- it (this session's own lock, taken by a change it is making, is no run); an
    -- autonomous run under way holds none, and has its timers.autonomous_runs row
    ((t.xmax <> '0'::xid AND EXISTS (
        SELECT 1 FROM pg_locks l
         WHERE l.locktype = 'transactionid' AND l.transactionid = t.xmax AND l.granted
           AND l.pid <> pg_backend_pid()))
     OR (t.autonomous AND EXISTS (SELECT 1 FROM timers.autonomous_runs o WHERE o.timer_id = t.id)))
        AS running,
    t.zone AS timezone,
    coalesce(t.catch_up, 'skip') AS catch_up,
    t.start_at,
    t.end_at,
    t.max_runs,
    t.expired,
    t.locked,
    t.retries,
    t.retry_delay,
    t.pause_after,
    t.jitter,
    t.priority::integer AS priority,
    -- turned off by pause_after (timers.enable turns it on again), else 0
    coalesce((extract(epoch FROM t.paused_at) * 1000)::bigint, 0) AS paused_ms,
    -- how old a due time missed while no runner served may be and still run late (NULL: none)
    t.catch_up_window,
    -- the SQL runs as the owner's own login, statement by statement, outside one transaction
    t.autonomous,
    -- how long after a due time its successful commit may come (NULL: no deadline)
    t.deadline,
    -- when a due time last missed its deadline (0: never), and how many have
    coalesce((extract(epoch FROM t.deadline_missed_at) * 1000)::bigint, 0) AS deadline_missed_ms,
    t.deadline_missed,
    -- 'all', or 'failures': a run that went well keeps no timers.runs row
    t.history,
    -- when a run last committed successfully (0: never)
    coalesce((extract(epoch FROM t.last_success_at) * 1000)::bigint, 0) AS last_success_ms,
    -- the file set (timers.apply) that declares it; NULL: saved by hand
    t.managed_by,
    -- the run group it belongs to (NULL: none; timers.set_group)
    t.run_group,
    -- due, not running, and its group's max_running timers are running: it waits for one
    -- of them to end (a run holds the timer's row lock and a slot of its group till commit)
    CASE WHEN t.run_group IS NULL
              OR NOT coalesce(t.fire_at <= coalesce(timers._now(t.test_clock), now()), false)
         THEN false
         ELSE (SELECT coalesce(bool_and(x.id <> t.id), true)
                      AND count(*) >= (SELECT g.max_running FROM timers.run_groups g WHERE g.name = t.run_group)
                 FROM timers.timers x
                WHERE x.run_group = t.run_group AND x.xmax <> '0'::xid AND EXISTS (
                      SELECT 1 FROM pg_locks l
                       WHERE l.locktype = 'transactionid' AND l.transactionid = x.xmax AND l.granted
                         AND l.pid <> pg_backend_pid())) END AS waiting_for_group
FROM timers.timers t
-- deleted while running: gone already
WHERE NOT EXISTS (SELECT 1 FROM timers.pending_changes pc WHERE pc.timer_id = t.id AND pc.action = 'delete');

COMMENT ON VIEW timers.status IS
    'One row per timer: the fields of GET /api/timers (to_jsonb(row) is the HTTP body), plus timezone, catch_up, start_at, end_at, max_runs, expired, locked and the run policies retries, retry_delay, pause_after, jitter, priority, paused_ms (turned off by pause_after), catch_up_window, autonomous (the SQL runs outside one transaction, as its owner), deadline, deadline_missed_ms and deadline_missed (due times with no successful commit within the deadline), history (all or failures), last_success_ms, managed_by (the file set of timers.apply that declares it), run_group and waiting_for_group (due, and its run group''s max_running timers are running).';

-- VOLATILE on purpose: it must see the row the same statement has just written.
CREATE OR REPLACE FUNCTION timers._status(p_name text) RETURNS timers.status
    LANGUAGE plpgsql VOLATILE
    -- the name (or key) index whatever the statistics say: a table analyzed while empty
    -- would make each look-up a scan, and a bulk save quadratic
    SET enable_seqscan = off SET jit = off
    -- PL/pgSQL keeps the view's plan; as a SQL function it was planned on every call
    -- (0.4 ms of a 1.8 ms save)
    AS $$
DECLARE
    v_row timers.status;
BEGIN
    SELECT s.* INTO v_row FROM timers.status s WHERE lower(s.name) = lower(p_name) COLLATE "default";
    RETURN v_row;
END $$;

-- ---------------------------------------------------------------------------
-- Rights
-- ---------------------------------------------------------------------------
REVOKE ALL ON FUNCTION
    timers._status(text)
    FROM PUBLIC, pgtimers_reader, pgtimers_admin, pgtimers_runner;
GRANT EXECUTE ON FUNCTION
    timers._status(text)
    TO PUBLIC;
REVOKE ALL ON timers.status FROM PUBLIC, pgtimers_reader, pgtimers_admin, pgtimers_runner;
GRANT SELECT ON timers.status TO pgtimers_reader, pgtimers_runner;
