-- pgtimers migration 0019: backfills.
--
-- Versioned: applied once, in order, and frozen once released (docs/design.md).

-- One row per timers.backfill call: the due times from_at <= d < to_at of a timer's
-- schedule, run oldest first; next_at is the next one to run (NULL once it has ended),
-- advanced in the transaction of the run it follows, so each runs once.
CREATE TABLE timers.backfill_jobs (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    timer_id     bigint NOT NULL,
    timer        text NOT NULL,
    from_at      timestamptz NOT NULL,
    to_at        timestamptz NOT NULL,
    total        integer NOT NULL CHECK (total BETWEEN 1 AND 10000),
    done         integer NOT NULL DEFAULT 0,
    failed       integer NOT NULL DEFAULT 0,
    state        text NOT NULL DEFAULT 'running' CHECK (state IN ('running', 'done', 'cancelled')),
    next_at      timestamptz,
    requested_by name NOT NULL,
    requested_at timestamptz NOT NULL DEFAULT now(),
    ended_at     timestamptz,
    note         text NOT NULL DEFAULT '',
    CONSTRAINT backfill_jobs_running CHECK ((state = 'running') = (next_at IS NOT NULL))
);

CREATE INDEX backfill_jobs_running ON timers.backfill_jobs (id) WHERE state = 'running';

CREATE INDEX backfill_jobs_timer ON timers.backfill_jobs (timer_id, id);

-- a run of a backfill names it
ALTER TABLE timers.runs ADD COLUMN backfill_id bigint;
