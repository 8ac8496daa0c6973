-- pgtimers migration 0016: executors.
--
-- Versioned: applied once, in order, and frozen once released (docs/design.md).

-- A timer names the function its SQL runs in, and the role it runs as is that
-- function's owner: PostgreSQL's own ownership, which pg_dump restores by role name,
-- REASSIGN OWNED moves, DROP OWNED drops and a role rename keeps. Until now the
-- executor was found from the owner's name (timers_exec.as_<oid of that name>) and
-- checked against the oid of the role that saved the timer, so a restore into a
-- cluster with other oids ran nothing.
ALTER TABLE timers.timers ADD COLUMN executor text;
ALTER TABLE timers.keyed_timers ADD COLUMN executor text;
UPDATE timers.timers SET executor = 'as_' || owner_oid::text WHERE owner_oid IS NOT NULL;
UPDATE timers.keyed_timers SET executor = 'as_' || owner_oid::text WHERE owner_oid IS NOT NULL;

-- the oid of the role that saved the timer is no longer needed
DROP TRIGGER IF EXISTS owner_oid ON timers.timers;
DROP TRIGGER IF EXISTS owner_oid ON timers.keyed_timers;
ALTER TABLE timers.timers DROP COLUMN owner_oid;
ALTER TABLE timers.keyed_timers DROP COLUMN owner_oid;
