-- pgtimers code: who may use pgtimers' schemas and tables, and what each table is.
--
-- Repeatable: applied whole on every install and upgrade, after the versioned
-- migrations (docs/design.md). Rights are taken away first, then granted, so what
-- a database ends with is exactly what this file says.

REVOKE ALL ON SCHEMA timers, timers_exec FROM PUBLIC, pgtimers_reader, pgtimers_admin, pgtimers_runner;
GRANT USAGE ON SCHEMA timers TO pgtimers_reader, pgtimers_runner;
REVOKE ALL ON ALL TABLES IN SCHEMA timers FROM PUBLIC, pgtimers_reader, pgtimers_admin, pgtimers_runner;

GRANT SELECT ON timers.audit TO pgtimers_admin;
GRANT SELECT ON timers.calendar_days TO pgtimers_reader;
GRANT SELECT ON timers.calendar_days TO pgtimers_runner;
GRANT SELECT ON timers.calendar_weeks TO pgtimers_reader;
GRANT SELECT ON timers.calendar_weeks TO pgtimers_runner;
GRANT SELECT ON timers.calendars TO pgtimers_reader;
GRANT SELECT ON timers.calendars TO pgtimers_runner;
GRANT INSERT ON timers.callers TO pgtimers_admin;
GRANT SELECT, DELETE ON timers.callers TO pgtimers_runner;
GRANT SELECT ON timers.keyed_events TO pgtimers_reader;
GRANT SELECT, INSERT ON timers.keyed_events TO pgtimers_runner;
GRANT SELECT ON timers.keyed_policies TO pgtimers_reader;
GRANT SELECT ON timers.keyed_policies TO pgtimers_runner;
GRANT SELECT ON timers.keyed_timers TO pgtimers_runner;
GRANT SELECT ON timers.locks TO pgtimers_runner;
GRANT SELECT ON timers.pending_changes TO pgtimers_runner;
GRANT SELECT, DELETE ON timers.run_requests TO pgtimers_runner;
GRANT SELECT ON timers.runners TO pgtimers_reader;
GRANT SELECT, INSERT, UPDATE, DELETE ON timers.runners TO pgtimers_runner;
GRANT SELECT ON timers.runs TO pgtimers_reader;
GRANT SELECT, INSERT, DELETE ON timers.runs TO pgtimers_runner;
GRANT SELECT ON timers.settings TO pgtimers_reader;
GRANT SELECT ON timers.settings TO pgtimers_runner;
GRANT SELECT ON timers.test_clocks TO pgtimers_reader;
GRANT SELECT ON timers.test_clocks TO pgtimers_runner;
GRANT SELECT ON timers.timers TO pgtimers_runner;
GRANT UPDATE (status, fired_at, late_by, attempt, wakes, commit, superseded_by, superseded_at, cause, ok, error, sqlstate, rows, took_ms, updated_at)
    ON timers.keyed_timers TO pgtimers_runner;
GRANT UPDATE (note)
    ON timers.locks TO pgtimers_runner;
GRANT UPDATE (finished_at, result)
    ON timers.run_requests TO pgtimers_runner;
-- (a pause after failures turns a timer off through timers._pause: never this grant)
GRANT UPDATE (next_due_at, expired, last_due_at, last_run_at, last_late_ms, max_late_ms, last_ok, last_error, last_took_ms, last_rows, runs, scheduled_runs, failures, skipped, last_skip_at, last_skip_reason, caught_up, catch_up_due_at, retry_due_at, retry_attempt, retry_at, fail_streak, deadline_due_at, deadline_missed, deadline_missed_at, last_success_at, took_counts, took_sum_ms, late_counts, late_sum_ms)
    ON timers.timers TO pgtimers_runner;
GRANT SELECT ON timers.follows TO pgtimers_reader;
-- (what a timer follows, by name: timers._follow_links)
GRANT SELECT (id, name) ON timers.timers TO pgtimers_reader;
GRANT SELECT ON timers.follows TO pgtimers_runner;
GRANT SELECT ON timers.follow_dues TO pgtimers_reader;
GRANT SELECT, INSERT, DELETE ON timers.follow_dues TO pgtimers_runner;
GRANT UPDATE (waiting_for, skip_reason, state, ready_at)
    ON timers.follow_dues TO pgtimers_runner;
GRANT SELECT ON timers.autonomous_runs TO pgtimers_reader;
GRANT SELECT, INSERT, DELETE ON timers.autonomous_runs TO pgtimers_runner;
-- (the runner says which session of the owner runs the attempt; never what the attempt is)
GRANT UPDATE (owner_pid, owner_login)
    ON timers.autonomous_runs TO pgtimers_runner;
GRANT SELECT ON timers.backfill_jobs TO pgtimers_reader;
GRANT SELECT, DELETE ON timers.backfill_jobs TO pgtimers_runner;
GRANT UPDATE (done, failed, state, next_at, ended_at, note)
    ON timers.backfill_jobs TO pgtimers_runner;
GRANT SELECT ON timers.run_groups TO pgtimers_reader;
GRANT SELECT ON timers.run_groups TO pgtimers_runner;
-- (a run locks a slot row FOR UPDATE, which needs UPDATE; it never changes one)
GRANT SELECT, UPDATE (slot) ON timers.run_group_slots TO pgtimers_runner;
GRANT SELECT ON timers.events TO pgtimers_reader;
GRANT SELECT, INSERT, DELETE ON timers.events TO pgtimers_runner;
-- (the runner adds what a run said, which reaches it after the run's commit)
GRANT UPDATE (messages)
    ON timers.events TO pgtimers_runner;
GRANT UPDATE (messages)
    ON timers.runs TO pgtimers_runner;
GRANT SELECT, INSERT ON timers.notify_cursors TO pgtimers_runner;
GRANT UPDATE (last_event_id, seen_at)
    ON timers.notify_cursors TO pgtimers_runner;
GRANT SELECT, INSERT ON timers.event_deliveries TO pgtimers_runner;
GRANT UPDATE (attempts, next_at, leased_until, leased_by, delivered_at, given_up_at, last_status, last_error)
    ON timers.event_deliveries TO pgtimers_runner;

COMMENT ON TABLE timers.runners IS
    'Runners serving this database; a runner is live while the control backend it registered is connected, or while it is parked (parked_until).';
COMMENT ON COLUMN timers.runners.parked_until IS
    'Set while the runner has closed its control session for want of connections: it serves the database until then, and is back by then.';
COMMENT ON TABLE timers.run_requests IS
    'Run-now requests of CALL timers.run, with the result the runner wrote.';
COMMENT ON TABLE timers.timers IS
    'The timers (raw rows; read timers.status). Changed only through timers.save/enable/delete and the runner.';
COMMENT ON TABLE timers.runs IS
    'History: one row per run or skipped due time (kind, due_at, took_ms, late_ms, ok, error, reason); kept runs_retention.';
COMMENT ON TABLE timers.events IS
    'The event outbox: one row per failed, skipped, retry_given_up, paused, backfill_done, deadline_missed and recovered event, written with what it reports; kept runs_retention.';
COMMENT ON TABLE timers.notify_cursors IS
    'Per webhook target of the runners'' [[notify]] sections: the last event looked at for it.';
COMMENT ON TABLE timers.event_deliveries IS
    'Webhook deliveries of events (read timers.deliveries): one row per event and target, claimed by one runner at a time, retried for 24 hours.';
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
COMMENT ON TABLE timers.keyed_timers IS
    'Keyed occurrence timers (seed 000): read them through view timers.keyed; change them with timers.arm/move/hold/resume/repin.';
COMMENT ON TABLE timers.keyed_events IS
    'One row per arm, re-arm (with its cause), fire, supersede, hold, resume and void of a keyed timer.';
COMMENT ON TABLE timers.keyed_policies IS
    'Named silence spans of keyed timers; change one with timers.set_policy, which re-arms its timers.';
COMMENT ON TABLE timers.locks IS
    'Row locks of pgtimers'' coordination (runner start, pruning, one keyed fire per clock); only pgtimers'' roles can take them.';
COMMENT ON TABLE timers.pending_changes IS
    'Changes asked for while the timer ran (disable, enable, delete): applied when its run ends.';
COMMENT ON COLUMN timers.timers.executor IS
    'The function of schema timers_exec the timer''s SQL runs in: its owner is the role the timer runs as.';
COMMENT ON COLUMN timers.keyed_timers.executor IS
    'The function of schema timers_exec the keyed timer''s SQL runs in: its owner is the role it runs as.';
COMMENT ON TABLE timers.backfill_jobs IS
    'One row per timers.backfill call (read view timers.backfills): the due times from_at <= d < to_at of a timer, run oldest first; next_at is the next one to run.';
COMMENT ON TABLE timers.run_groups IS
    'Run groups: at most max_running timers of a group run at once, across all runners (timers.set_group; timers.save(..., run_group => name) makes one with max_running 1).';
COMMENT ON TABLE timers.run_group_slots IS
    'Slots 1..max_running of each run group: a run of a timer of the group locks one (FOR UPDATE SKIP LOCKED) in its own transaction, so it frees when the run ends.';
COMMENT ON COLUMN timers.timers.run_group IS
    'The run group it belongs to (NULL: none): it runs only while a slot of the group is free.';
COMMENT ON COLUMN timers.timers.fire_at IS
    'When a runner acts on the timer next: a failed run''s retry (retry_at), else next_due_at moved by its jitter (an offset in [0, jitter) that depends only on the timer and the due time).';
COMMENT ON COLUMN timers.timers.fail_streak IS
    'Due times in a row whose last attempt failed; pause_after of them turn the timer off (paused_at). timers.enable resets it.';
COMMENT ON COLUMN timers.timers.zone IS
    'The zone the timer''s wall times are read in: its timezone, else the database''s default (timers.set_timezone), else UTC.';
COMMENT ON COLUMN timers.timers.catch_up_window IS
    'How old a due time missed while no runner served may be and still run late (NULL: no window, catch_up alone decides); older ones are skipped (docs/running.md, "Catch-up and skips").';
COMMENT ON COLUMN timers.timers.origin_at IS
    'The timer''s clock when it was created: pgtimers.prev_due_at never names a due time at or before it (NULL: a timer from before revision 0025, no such bound).';
COMMENT ON COLUMN timers.timers.autonomous IS
    'Whether the timer''s SQL runs as its owner in a session of its own, statement by statement, each committing by itself (VACUUM, CREATE INDEX CONCURRENTLY, procedures that COMMIT), instead of in the runner''s transaction (docs/running.md, "Autonomous timers").';
COMMENT ON TABLE timers.autonomous_runs IS
    'The attempts of autonomous timers under way: claimed and committed as started, not yet reported back. One whose sessions are gone is recorded as failed, "interrupted: ...".';
COMMENT ON TABLE timers.follows IS
    'Timers that wait for other timers (timers.save(..., after => ARRAY[...])): one row per follower and timer it follows, by id, in the order given.';
COMMENT ON TABLE timers.follow_dues IS
    'The due times of followers: one row per follower and due time an upstream recorded, waiting for the upstreams still to succeed (waiting_for), ready to run or to be skipped (skip_reason), then done; written with the upstream''s record, claimed by one runner.';
