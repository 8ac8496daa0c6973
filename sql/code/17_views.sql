-- pgtimers code: views that read well in psql: recent runs, trouble first.
--
-- Repeatable: applied whole on every install and upgrade, after the versioned
-- migrations (docs/design.md). Each object here is defined in this file only.

-- Runs and skipped due times of the last 24 hours, newest first.
CREATE OR REPLACE VIEW timers.recent_runs AS
SELECT r.timer,
       r.kind,
       r.due_at,
       r.started_at,
       r.took_ms,
       r.late_ms,
       r.ok,
       r.rows,
       r.error,
       r.reason,
       r.runner,
       r.attempt,
       r.retry_at
  FROM timers.runs r
 WHERE r.started_at > now() - interval '24 hours'
 ORDER BY r.started_at DESC, r.id DESC;

COMMENT ON VIEW timers.recent_runs IS
    'Runs and skipped due times of the last 24 hours, newest first (kind: scheduled, catch_up, retry, backfill, run_now, skipped).';

-- The seed's Monitor: failing timers first, then the most failures in 24 h, then the latest.
CREATE OR REPLACE VIEW timers.trouble AS
SELECT x.name, x.trouble, x.schedule, x.last_run, x.last_ok, x.last_late_ms, x.failures_24h,
       x.skipped, x.last_error, x.database, x.late_by
  FROM (
    SELECT s.name,
           concat_ws('; ',
               CASE WHEN s.paused_ms > 0 THEN 'paused after ' || s.pause_after || ' failed due '
                         || CASE WHEN s.pause_after = 1 THEN 'time' ELSE 'times' END
                         || ' in a row: SELECT timers.enable(' || quote_literal(s.name) || ') turns it on' END,
               CASE WHEN s.last_ok = false THEN 'last run failed' END,
               CASE WHEN s.failures_24h > 0 THEN s.failures_24h || ' failed in 24 h' END,
               CASE WHEN s.next_run_ms > 0 AND NOT s.running
                     AND s.next_run_ms < (extract(epoch FROM now()) * 1000)::bigint - 60000
                    THEN 'overdue by ' || ((extract(epoch FROM now()) * 1000)::bigint - s.next_run_ms) / 1000
                         || ' s: is a runner up?' END,
               CASE WHEN s.last_late_ms > 5000 THEN 'last run started ' || s.last_late_ms / 1000 || ' s late' END,
               CASE WHEN s.last_skip_ms > (extract(epoch FROM now()) * 1000)::bigint - 86400000
                    THEN 'skipped: ' || s.last_skip_reason END,
               CASE WHEN s.deadline_missed_ms > (extract(epoch FROM now()) * 1000)::bigint - 86400000
                    THEN 'deadline ' || s.deadline::text || ' missed at '
                         || timers._iso(to_timestamp(s.deadline_missed_ms / 1000.0)) END) AS trouble,
           s.schedule,
           CASE WHEN s.last_run_ms = 0 THEN NULL ELSE to_timestamp(s.last_run_ms / 1000.0) END AS last_run,
           s.last_ok,
           s.last_late_ms,
           s.failures_24h,
           s.skipped,
           s.last_error,
           s.database,
           NULL::interval AS late_by
      FROM timers.status s
     WHERE s.last_ok = false
        OR s.paused_ms > 0
        OR s.failures_24h > 0
        OR (s.next_run_ms > 0 AND NOT s.running
            AND s.next_run_ms < (extract(epoch FROM now()) * 1000)::bigint - 60000)
        OR s.last_late_ms > 5000
        OR s.last_skip_ms > (extract(epoch FROM now()) * 1000)::bigint - 86400000
        OR s.deadline_missed_ms > (extract(epoch FROM now()) * 1000)::bigint - 86400000
    UNION ALL
    SELECT k.key COLLATE "default",
           concat_ws('; ',
               CASE WHEN k.status = 'fired' AND k.ok = false THEN 'its run failed' END,
               CASE WHEN k.status = 'fired' AND k.late_by > interval '5 minutes'
                    THEN 'fired ' || k.late_by::text || ' late' END,
               CASE WHEN k.status = 'armed' THEN 'owed since ' || timers._iso(k.owed_at)
                    || ' and not fired: is a runner up?' END) COLLATE "default",
           ('keyed ' || k.kind || ' owed ' || coalesce(timers._iso(k.owed_at), '-')) COLLATE "default",
           k.fired_at,
           k.ok,
           coalesce(timers._ms(k.late_by), 0),
           CASE WHEN k.ok = false THEN 1 ELSE 0 END::bigint,
           0::bigint,
           k.error,
           current_database()::text,
           CASE WHEN k.status = 'armed' THEN coalesce(timers._now(k.test_clock), now()) - k.owed_at
                ELSE k.late_by END
      FROM timers.keyed_timers k
     WHERE (k.status = 'fired' AND k.fired_at > coalesce(timers._now(k.test_clock), now()) - interval '24 hours'
            AND (k.ok = false OR k.late_by > interval '5 minutes'))
        OR (k.status = 'armed' AND k.owed_at < coalesce(timers._now(k.test_clock), now()) - interval '5 minutes')
  ) x
 ORDER BY (x.last_ok = false) DESC, x.failures_24h DESC, x.last_late_ms DESC, x.name;

COMMENT ON VIEW timers.trouble IS
    'Timers that need a look, worst first: paused after failures, failed last run, failures in 24 h, overdue (no runner?), late, skipped; and keyed timers (name = key) that failed, fired more than 5 minutes late (late_by), or are owed more than 5 minutes and not fired.';

CREATE OR REPLACE TRIGGER read_only INSTEAD OF INSERT OR UPDATE OR DELETE ON timers.trouble
    FOR EACH ROW EXECUTE FUNCTION timers._read_only_view();

-- ---------------------------------------------------------------------------
-- Rights
-- ---------------------------------------------------------------------------
REVOKE ALL ON timers.recent_runs FROM PUBLIC, pgtimers_reader, pgtimers_admin, pgtimers_runner;
GRANT SELECT ON timers.recent_runs TO pgtimers_reader;
REVOKE ALL ON timers.trouble FROM PUBLIC, pgtimers_reader, pgtimers_admin, pgtimers_runner;
GRANT SELECT ON timers.trouble TO pgtimers_reader;
