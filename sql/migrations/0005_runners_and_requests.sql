-- pgtimers migration 0005: runners and requests.
--
-- Versioned: applied once, in order, and frozen once released (docs/design.md).

-- The due time that the next run catches up (the seed's single catch-up run);
-- the run of next_due_at counts as caught_up when the two are equal.
ALTER TABLE timers.timers ADD COLUMN IF NOT EXISTS catch_up_due_at timestamptz;

-- The claim index serves the server's clock only; test-clock timers have their own.
DROP INDEX IF EXISTS timers.timers_due;

CREATE INDEX timers_due ON timers.timers (next_due_at, id)
    WHERE next_due_at IS NOT NULL AND test_clock IS NULL;

CREATE INDEX timers_due_test_clock ON timers.timers (test_clock, next_due_at, id)
    WHERE next_due_at IS NOT NULL AND test_clock IS NOT NULL;

-- Runners that serve this database. A runner is live while its control
-- session holds the shared advisory lock (timers._runner_lock_class(), 0):
-- that ends with its connection, so a killed runner is not live any more.
CREATE TABLE IF NOT EXISTS timers.runners (
    id          text PRIMARY KEY,
    host        text NOT NULL,
    os_pid      integer NOT NULL,
    backend_pid integer NOT NULL,
    version     text NOT NULL DEFAULT '',
    workers     integer NOT NULL DEFAULT 0,
    started_at  timestamptz NOT NULL DEFAULT now(),
    seen_at     timestamptz NOT NULL DEFAULT now()
);

-- Run-now requests (CALL timers.run): the runner fills in result.
CREATE TABLE IF NOT EXISTS timers.run_requests (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    timer_id     bigint NOT NULL,
    timer        text NOT NULL,
    requested_by name NOT NULL,
    requested_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    finished_at  timestamptz,
    result       jsonb
);

CREATE INDEX IF NOT EXISTS run_requests_open ON timers.run_requests (id) WHERE finished_at IS NULL;
