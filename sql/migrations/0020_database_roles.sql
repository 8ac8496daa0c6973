-- pgtimers migration 0020: database roles.
--
-- Versioned: applied once, in order, and frozen once released (docs/design.md).

-- A caller ticket is its own role's, in its own transaction (the policy's check): any
-- role with INSERT on the table may leave one. INSERT is what decides who may, granted
-- to the admin role of the database (pgtimers_admin, or its own: timers.use_database_roles).
ALTER POLICY callers_self ON timers.callers TO PUBLIC;
