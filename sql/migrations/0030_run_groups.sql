-- pgtimers migration 0030: groups whose timers never run more than max_running at once
-- (issue 34). A group has max_running slot rows; a run of a timer of the group locks one
-- (FOR UPDATE SKIP LOCKED) in its own transaction, so the slot frees exactly when the run
-- commits, rolls back or its session dies (sql/code/27_run_groups.sql).
--
-- Versioned: applied once, in order, and frozen once released (docs/design.md).

CREATE TABLE timers.run_groups (
    name text PRIMARY KEY,
    max_running integer NOT NULL DEFAULT 1 CHECK (max_running > 0),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- One row per slot 1..max_running (rows above a lowered max_running stay, unused).
CREATE TABLE timers.run_group_slots (
    run_group text NOT NULL REFERENCES timers.run_groups (name) ON UPDATE CASCADE ON DELETE CASCADE,
    slot integer NOT NULL CHECK (slot > 0),
    PRIMARY KEY (run_group, slot)
);

ALTER TABLE timers.timers
    ADD COLUMN run_group text REFERENCES timers.run_groups (name) ON UPDATE CASCADE;

-- the timers of a group (the status view counts those running)
CREATE INDEX timers_run_group ON timers.timers (run_group) WHERE run_group IS NOT NULL;

-- timers._timer_args gains an OUT column (run_group): a new return type, which CREATE OR
-- REPLACE cannot give; sql/code/09_timers_api.sql makes it again.
DROP FUNCTION IF EXISTS timers._timer_args(jsonb);
