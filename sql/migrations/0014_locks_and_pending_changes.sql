-- pgtimers migration 0014: locks and pending changes.
--
-- Versioned: applied once, in order, and frozen once released (docs/design.md).

-- Locks of pgtimers' own coordination, taken as row locks (FOR UPDATE): only roles
-- with UPDATE on this table (pgtimers_runner, and pgtimers' own functions) can take them.
CREATE TABLE timers.locks (
    name text PRIMARY KEY,
    note text NOT NULL DEFAULT ''
);

INSERT INTO timers.locks (name, note) VALUES
    ('runner_start', 'one runner start at a time: the downtime rules see the runners before it'),
    ('prune', 'one pruner at a time'),
    ('keyed_fire:', 'one keyed fire at a time on the server''s clock: tick order');

INSERT INTO timers.locks (name, note)
SELECT 'keyed_fire:' || c.name, 'one keyed fire at a time on this test clock: tick order'
  FROM timers.test_clocks c;

-- A runner is live while the backend it registered is: same pid, database, login
-- role (a member of pgtimers_runner) and application_name (which names the runner).
ALTER TABLE timers.runners ADD COLUMN application_name text NOT NULL DEFAULT '';

ALTER TABLE timers.runners ADD COLUMN stopped_at timestamptz;

UPDATE timers.runners SET stopped_at = seen_at;

-- enable(name, false), enable(name) and delete(name) of a timer whose row is locked
-- (a run holds it): done by whoever holds the row next, at the latest when the run ends.
CREATE TABLE timers.pending_changes (
    timer_id     bigint PRIMARY KEY,
    action       text NOT NULL CHECK (action IN ('enable', 'disable', 'delete')),
    requested_by name NOT NULL,
    requested_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- its result gained a column (next_at): a changed return type is a DROP here
DROP FUNCTION IF EXISTS timers._next_wake();
