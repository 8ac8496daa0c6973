-- pgtimers migration 0027: telling a person. Deadlines, history kept for failures only,
-- a run's own messages, run-time histograms kept in the timer's row, and the event outbox
-- (timers.events) with the runner's webhook deliveries of it.
--
-- Versioned: applied once, in order, and frozen once released (docs/design.md).

ALTER TABLE timers.timers
    -- the option of timers.save: a due time with no successful commit this long after it
    -- was due raises one deadline_missed event (NULL: no deadline)
    ADD COLUMN deadline           interval,
    -- the option of timers.save: 'failures' keeps no timers.runs row for a run that went well
    ADD COLUMN history            text NOT NULL DEFAULT 'all' CHECK (history IN ('all', 'failures')),
    -- the oldest due time whose deadline is not yet settled, met or missed (NULL: from
    -- next_due_at on)
    ADD COLUMN deadline_due_at    timestamptz,
    ADD COLUMN deadline_missed    bigint NOT NULL DEFAULT 0,
    ADD COLUMN deadline_missed_at timestamptz,
    -- when a run of it last committed successfully
    ADD COLUMN last_success_at    timestamptz,
    -- histograms of its runs' durations and lateness: counts per bucket (bounds in
    -- timers._duration_buckets and timers._lateness_buckets), and sums in milliseconds
    ADD COLUMN took_counts        bigint[] NOT NULL DEFAULT '{0,0,0,0,0,0,0,0,0,0,0,0,0,0}',
    ADD COLUMN took_sum_ms        bigint NOT NULL DEFAULT 0,
    ADD COLUMN late_counts        bigint[] NOT NULL DEFAULT '{0,0,0,0,0,0,0,0,0,0,0,0,0,0}',
    ADD COLUMN late_sum_ms        bigint NOT NULL DEFAULT 0;

-- the NOTICE, INFO and WARNING messages a run raised and its error's DETAIL and HINT,
-- the first 8 KB of them
ALTER TABLE timers.runs ADD COLUMN messages text NOT NULL DEFAULT '';

-- The outbox: every event, written in the transaction of what it reports. NOTIFY
-- pgtimers_events still announces it; this row is what lasts (pruned with the runs).
CREATE TABLE timers.events (
    id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at        timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    event     text NOT NULL,
    timer     text NOT NULL,
    due_at    timestamptz,
    attempt   integer,
    error     text NOT NULL DEFAULT '',
    sqlstate  text NOT NULL DEFAULT '',
    -- what else the event says (count, reason, why, deadline, ...)
    detail    jsonb NOT NULL DEFAULT '{}',
    -- the timers.runs row it reports, when it reports a run
    run_id    bigint,
    messages  text NOT NULL DEFAULT ''
);

CREATE INDEX events_at ON timers.events (at);

-- Where the runners have got to in the outbox, per webhook target (a [[notify]] section):
-- events after last_event_id are not yet looked at for it.
CREATE TABLE timers.notify_cursors (
    target        text PRIMARY KEY,
    last_event_id bigint NOT NULL,
    seen_at       timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp()
);

-- One delivery of one event to one webhook target: claimed by one runner at a time
-- (leased_until), retried with backoff, delivered or given up.
CREATE TABLE timers.event_deliveries (
    event_id      bigint NOT NULL REFERENCES timers.events (id) ON DELETE CASCADE,
    target        text NOT NULL,
    delivery_id   uuid NOT NULL,
    attempts      integer NOT NULL DEFAULT 0,
    next_at       timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    leased_until  timestamptz,
    leased_by     text,
    delivered_at  timestamptz,
    given_up_at   timestamptz,
    last_status   integer,
    last_error    text NOT NULL DEFAULT '',
    PRIMARY KEY (event_id, target)
);

CREATE INDEX event_deliveries_open ON timers.event_deliveries (next_at)
    WHERE delivered_at IS NULL AND given_up_at IS NULL;

-- A timer's definition from jsonb gained deadline and history: a changed return type,
-- which CREATE OR REPLACE cannot make. The code (sql/code/09_timers_api.sql) creates it again.
DROP FUNCTION IF EXISTS timers._timer_args(jsonb);

-- The timers with a deadline, which timers._deadline_check looks at every second.
CREATE INDEX timers_deadline ON timers.timers (id) WHERE deadline IS NOT NULL;
