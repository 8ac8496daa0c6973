-- pgtimers migration 0018: run policies: retries, pause after failures, jitter, priority.
--
-- Versioned: applied once, in order, and frozen once released (docs/design.md).

ALTER TABLE timers.timers
    -- the options of timers.save
    ADD COLUMN retries     integer NOT NULL DEFAULT 0
        CONSTRAINT timers_retries CHECK (retries BETWEEN 0 AND 100),
    ADD COLUMN retry_delay interval NOT NULL DEFAULT interval '30 seconds',
    ADD COLUMN pause_after integer CONSTRAINT timers_pause_after CHECK (pause_after >= 1),
    ADD COLUMN jitter      interval,
    ADD COLUMN priority    smallint NOT NULL DEFAULT 0
        CONSTRAINT timers_priority CHECK (priority BETWEEN -100 AND 100),
    -- the next attempt of a due time whose run failed: which due time, its number, when
    ADD COLUMN retry_due_at  timestamptz,
    ADD COLUMN retry_attempt integer,
    ADD COLUMN retry_at      timestamptz,
    -- due times in a row whose last attempt failed; pause_after turns the timer off
    ADD COLUMN fail_streak integer NOT NULL DEFAULT 0,
    ADD COLUMN paused_at   timestamptz,
    -- When a runner acts next: a retry's time, else the next due time moved by the
    -- timer's jitter, an offset in [0, jitter) that depends on the timer and the due
    -- time only (a hash of both), so every runner and every restart agree on it. A
    -- stored column the server keeps in step with what it reads, built-ins only.
    ADD COLUMN fire_at timestamptz GENERATED ALWAYS AS (
        CASE WHEN retry_at IS NOT NULL THEN retry_at
             WHEN jitter IS NULL OR next_due_at IS NULL THEN next_due_at
             ELSE timezone('UTC', timezone('UTC', next_due_at) + jitter * (
                      (hashint8extended(id, (extract(epoch FROM next_due_at - timestamptz '1970-01-01 00:00:00+00')
                                             * 1000000)::bigint) & 4294967295)::float8 / 4294967296.0))
        END) STORED,
    ADD CONSTRAINT timers_retry_whole CHECK ((retry_at IS NULL) = (retry_due_at IS NULL)
                                             AND (retry_at IS NULL) = (retry_attempt IS NULL));

-- The claim indexes read fire_at now; timers with a priority have one of their own, so
-- that the claim takes them first without walking the others.
DROP INDEX timers.timers_due;
DROP INDEX timers.timers_due_test_clock;

CREATE INDEX timers_due ON timers.timers (fire_at, id)
    WHERE fire_at IS NOT NULL AND test_clock IS NULL;

CREATE INDEX timers_due_ranked ON timers.timers (fire_at)
    WHERE fire_at IS NOT NULL AND test_clock IS NULL AND priority <> 0;

CREATE INDEX timers_due_test_clock ON timers.timers (test_clock, fire_at, id)
    WHERE fire_at IS NOT NULL AND test_clock IS NOT NULL;

-- Each attempt is a run: its number, and the time of the retry it was followed by
-- (NULL: none, so a failed row without one is a due time's final outcome).
ALTER TABLE timers.runs
    ADD COLUMN attempt  integer NOT NULL DEFAULT 1,
    ADD COLUMN retry_at timestamptz,
    DROP CONSTRAINT runs_kind_check,
    ADD CONSTRAINT runs_kind_check
        CHECK (kind IN ('scheduled', 'catch_up', 'run_now', 'skipped', 'retry', 'backfill'));

-- its result gained a column (fire_at): a changed return type is a DROP here
DROP FUNCTION IF EXISTS timers._due(integer);
