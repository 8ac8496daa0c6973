-- pgtimers migration 0029: the fire path in one file (sql/code/10_fire.sql). The outcome
-- of a run of a timer's SQL passes between its routines as a composite value, not as jsonb
-- that each caller parses again.
--
-- Versioned: applied once, in order, and frozen once released (docs/design.md).

-- What timers._execute says of one run of a timer's or a keyed timer's SQL.
CREATE TYPE timers.run_outcome AS (
    ok boolean,              -- it committed its work (false: failed, rolled back)
    error text,              -- the error, said plainly (timers._run_error); '' when ok
    sqlstate text,           -- the error's SQLSTATE; '' when ok
    rows bigint,             -- rows written or returned (timers._run_rows)
    messages text,           -- the error's DETAIL and HINT (timers._error_said)
    started_at timestamptz,  -- when the SQL started (a lost run: when it was claimed)
    took_ms bigint,          -- how long it ran
    late_ms bigint           -- how late it started, from when it was meant to
);
