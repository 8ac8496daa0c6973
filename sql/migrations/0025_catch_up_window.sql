-- pgtimers migration 0025: a catch-up window, and the timer's origin for prev_due_at.
--
-- Versioned: applied once, in order, and frozen once released (docs/design.md).

ALTER TABLE timers.timers
    -- the option of timers.save: how old a due time missed while no runner served may be
    -- and still run late (NULL: no window, catch_up alone decides)
    ADD COLUMN catch_up_window interval
        CONSTRAINT timers_catch_up_window CHECK (catch_up_window OPERATOR(pg_catalog.>) '0'::pg_catalog.interval),
    -- the timer's clock when it was created: a due time at or before it is not the timer's,
    -- so pgtimers.prev_due_at never names one (NULL, timers from before: no such bound)
    ADD COLUMN origin_at timestamptz;

-- A timer's definition from jsonb gained catch_up_window: a changed return type, which
-- CREATE OR REPLACE cannot make. The code (sql/code/09_timers_api.sql) creates it again.
DROP FUNCTION IF EXISTS timers._timer_args(jsonb);
