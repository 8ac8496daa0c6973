-- pgtimers migration 0004: callers.
--
-- Versioned: applied once, in order, and frozen once released (docs/design.md).

-- Who is calling. A SECURITY DEFINER body cannot see its caller's current_user,
-- and session_user is the runner inside a run, so the public wrappers leave a
-- ticket: a row (this transaction, current_user) that row-level security lets a
-- role insert only for itself. An internal body that acts for p_actor takes that
-- ticket first, so naming another role in a direct call is refused.
CREATE TABLE timers.callers (
    xid  xid8 NOT NULL DEFAULT pg_catalog.pg_current_xact_id(),
    role name NOT NULL DEFAULT current_user,
    -- each call its own row, taken newest first: a transaction that saves many
    -- timers never walks the dead rows of earlier calls (O(1), not O(N) each)
    n    bigint GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (xid, role, n)
);

ALTER TABLE timers.callers ENABLE ROW LEVEL SECURITY;

CREATE POLICY callers_self ON timers.callers FOR INSERT TO pgtimers_admin
    WITH CHECK (role = current_user AND xid = pg_catalog.pg_current_xact_id());
