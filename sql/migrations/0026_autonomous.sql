-- pgtimers migration 0026: autonomous timers, whose SQL runs as its owner outside one
-- transaction (VACUUM, CREATE INDEX CONCURRENTLY, procedures that COMMIT).
--
-- Versioned: applied once, in order, and frozen once released (docs/design.md).

ALTER TABLE timers.timers
    -- the option of timers.save: run the SQL in a session of the owner's own login,
    -- statement by statement, each committing by itself (docs/running.md, "Autonomous timers")
    ADD COLUMN autonomous boolean NOT NULL DEFAULT false;

-- The attempts of autonomous timers that have started and not yet reported back: at most
-- one per timer (the claim passes a timer over while it has one). Written, with the run's
-- timers.runs row (ok NULL: running), in the transaction that claims the due time; the
-- outcome replaces both. An attempt whose runner session and owner session are both gone
-- (runner_pid, owner_pid: backends of runner_login and owner_login since server_started)
-- never reports back: the next runner that looks records it as failed, "interrupted: ...".
CREATE TABLE timers.autonomous_runs (
    timer_id        bigint PRIMARY KEY REFERENCES timers.timers (id) ON DELETE CASCADE,
    run_id          bigint NOT NULL,
    source          text NOT NULL CHECK (source IN ('timer', 'retry', 'request')),
    kind            text NOT NULL,
    due_at          timestamptz,
    attempt         integer NOT NULL,
    request_id      bigint,
    planned_at      timestamptz,
    next_due        timestamptz,
    skips           jsonb NOT NULL DEFAULT '[]',
    runner          text NOT NULL,
    runner_pid      integer NOT NULL,
    runner_login    oid NOT NULL,
    owner_pid       integer,
    owner_login     oid,
    server_started  timestamptz NOT NULL,
    started_at      timestamptz NOT NULL
);

-- A timer's definition from jsonb gained autonomous: a changed return type, which
-- CREATE OR REPLACE cannot make. The code (sql/code/09_timers_api.sql) creates it again.
DROP FUNCTION IF EXISTS timers._timer_args(jsonb);
