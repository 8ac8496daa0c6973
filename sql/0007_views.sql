-- pgtimers 0007: views that read well in psql — recent runs, and trouble first.

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
       r.runner
  FROM timers.runs r
 WHERE r.started_at > now() - interval '24 hours'
 ORDER BY r.started_at DESC, r.id DESC;

COMMENT ON VIEW timers.recent_runs IS
    'Runs and skipped due times of the last 24 hours, newest first (kind: scheduled, catch_up, run_now, skipped).';

-- The seed's Monitor: failing timers first, then the most failures in 24 h, then the latest.
CREATE OR REPLACE VIEW timers.trouble AS
SELECT s.name,
       concat_ws('; ',
           CASE WHEN s.last_ok = false THEN 'last run failed' END,
           CASE WHEN s.failures_24h > 0 THEN s.failures_24h || ' failed in 24 h' END,
           CASE WHEN s.next_run_ms > 0
                 AND s.next_run_ms < (extract(epoch FROM now()) * 1000)::bigint - 60000
                THEN 'overdue by ' || ((extract(epoch FROM now()) * 1000)::bigint - s.next_run_ms) / 1000
                     || ' s: is a runner up?' END,
           CASE WHEN s.last_late_ms > 5000 THEN 'last run started ' || s.last_late_ms / 1000 || ' s late' END,
           CASE WHEN s.last_skip_ms > (extract(epoch FROM now()) * 1000)::bigint - 86400000
                THEN 'skipped: ' || s.last_skip_reason END) AS trouble,
       s.schedule,
       CASE WHEN s.last_run_ms = 0 THEN NULL ELSE to_timestamp(s.last_run_ms / 1000.0) END AS last_run,
       s.last_ok,
       s.last_late_ms,
       s.failures_24h,
       s.skipped,
       s.last_error,
       s.database
  FROM timers.status s
 WHERE s.last_ok = false
    OR s.failures_24h > 0
    OR (s.next_run_ms > 0 AND s.next_run_ms < (extract(epoch FROM now()) * 1000)::bigint - 60000)
    OR s.last_late_ms > 5000
    OR s.last_skip_ms > (extract(epoch FROM now()) * 1000)::bigint - 86400000
 ORDER BY (s.last_ok = false) DESC, s.failures_24h DESC, s.last_late_ms DESC, s.name;

COMMENT ON VIEW timers.trouble IS
    'Timers that need a look, worst first: failed last run, failures in 24 h, overdue (no runner?), late, skipped.';

GRANT SELECT ON timers.recent_runs, timers.trouble TO pgtimers_reader;

-- So that \d+ and \dt+ in psql explain every table too.
COMMENT ON TABLE timers.timers IS
    'The timers (raw rows; read timers.status). Changed only through timers.save/enable/delete and the runner.';
COMMENT ON TABLE timers.runs IS
    'History: one row per run or skipped due time (kind, due_at, took_ms, late_ms, ok, error, reason); kept runs_retention.';
COMMENT ON TABLE timers.audit IS
    'One row per change: save, run-now, enable/disable, delete, calendar and test-clock changes, unlock (admins only).';
COMMENT ON TABLE timers.settings IS
    'Settings of this database''s timers: timezone (timers.set_timezone), runs_retention.';
COMMENT ON TABLE timers.test_clocks IS
    'Frozen clocks for tests (timers.create_test_clock / advance_test_clock / delete_test_clock).';
COMMENT ON TABLE timers.calendars IS
    'Trading calendars and their known range (valid_from .. valid_until).';
COMMENT ON TABLE timers.calendar_weeks IS
    'Week eras of a calendar: from from_day on it trades on the days of the mask (bit 0 = Sunday).';
COMMENT ON TABLE timers.calendar_days IS
    'Exceptions to a calendar''s week: holidays (trading = false) and extra trading days.';
COMMENT ON TABLE timers.callers IS
    'Caller tickets: proof, within one transaction, of the role that called a public timers.* function.';
COMMENT ON TABLE timers.alembic_version IS
    'pgtimers'' own alembic revision (never the application''s alembic_version).';
