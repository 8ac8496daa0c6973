-- pgtimers migration 0012: owner oids.
--
-- Versioned: applied once, in order, and frozen once released (docs/design.md).

-- Owners are stored by role name. After ALTER ROLE a RENAME TO b, another role
-- could take the name a, and with it a's timers (its own executor passes every
-- check). Each timer now also keeps the owner's oid, set by a trigger whenever
-- its owner is written (save, arm, repin), and timers._exec_as refuses to run
-- saved SQL for a role whose oid is not the one that saved it.
ALTER TABLE timers.timers ADD COLUMN owner_oid oid;

ALTER TABLE timers.keyed_timers ADD COLUMN owner_oid oid;

UPDATE timers.timers t SET owner_oid = r.oid FROM pg_roles r WHERE r.rolname = t.owner;

UPDATE timers.keyed_timers k SET owner_oid = r.oid FROM pg_roles r WHERE r.rolname = k.owner;
