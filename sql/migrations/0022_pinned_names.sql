-- pgtimers migration 0022: pinned names.
--
-- Versioned: applied once, in order, and frozen once released (docs/design.md).

-- What PostgreSQL resolves while it creates a default, a generated column, a check, an
-- index or a policy is stored with it: the functions and operators found on the search
-- path of the session that installed pgtimers. One found in a schema others can write
-- (public.*(numeric, integer) wins over pg_catalog's numeric * numeric, which needs a
-- cast) ran later as whoever wrote the table or read the view. Installs now pin the
-- path (pg_catalog, pg_temp); this revision builds each of those objects again, every
-- function, operator and type named in full, so that one bound before is bound anew.

-- The views built on timers.timers.fire_at (timers.status, and timers.trouble on it) and
-- the routines of schema timers whose arguments or result are one of their rows go
-- first, so that fire_at can be dropped: the code re-creates them all, with their rights,
-- after this revision. A view or routine of yours on them stops the upgrade, named.
DO $views$
DECLARE
    v_views oid[];
    v_routines text;
    v_detail text;
BEGIN
    WITH RECURSIVE built_on(oid) AS (
        SELECT r.ev_class
          FROM pg_depend d
          JOIN pg_rewrite r ON r.oid = d.objid
          JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
         WHERE d.classid = 'pg_rewrite'::regclass AND d.refclassid = 'pg_class'::regclass
           AND d.refobjid = 'timers.timers'::regclass AND a.attname = 'fire_at'
        UNION
        SELECT r.ev_class
          FROM pg_depend d
          JOIN pg_rewrite r ON r.oid = d.objid
          JOIN built_on b ON b.oid = d.refobjid
         WHERE d.classid = 'pg_rewrite'::regclass AND d.refclassid = 'pg_class'::regclass
    )
    SELECT array_agg(c.oid) INTO v_views
      FROM pg_class c JOIN built_on b ON b.oid = c.oid
     WHERE c.relnamespace = 'timers'::regnamespace AND c.relkind = 'v';
    IF v_views IS NULL THEN
        RETURN;  -- a fresh install: the code comes after the last revision
    END IF;
    SELECT string_agg(DISTINCT p.oid::regprocedure::text, ', ') INTO v_routines
      FROM pg_proc p
      JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
                      AND d.refclassid = 'pg_type'::regclass
      JOIN pg_type t ON t.oid = d.refobjid
      JOIN pg_class c ON c.reltype IN (t.oid, t.typelem)
     WHERE p.pronamespace = 'timers'::regnamespace AND c.oid = ANY(v_views);
    BEGIN
        IF v_routines IS NOT NULL THEN
            EXECUTE 'DROP ROUTINE ' || v_routines;
        END IF;
        EXECUTE 'DROP VIEW ' || (SELECT string_agg(v::regclass::text, ', ') FROM unnest(v_views) v);
    EXCEPTION WHEN dependent_objects_still_exist THEN
        GET STACKED DIAGNOSTICS v_detail = PG_EXCEPTION_DETAIL;
        RAISE EXCEPTION 'pgtimers 0022 re-creates the views % and the routines that take or return their rows, and objects of this database depend on them',
                        (SELECT string_agg(v::regclass::text, ', ') FROM unnest(v_views) v)
            USING ERRCODE = '2BP01', DETAIL = v_detail,
                  HINT = 'Drop those objects, upgrade, and create them again; nothing changed.';
    END;
END
$views$;

-- fire_at as 0018 made it, every name in full; the claim indexes on it go with the
-- column and come back below. Defaults and checks of the table in the same statement:
-- one rewrite checks them all.
ALTER TABLE timers.timers
    DROP COLUMN fire_at,
    ADD COLUMN fire_at pg_catalog.timestamptz GENERATED ALWAYS AS (
        CASE WHEN retry_at IS NOT NULL THEN retry_at
             WHEN jitter IS NULL OR next_due_at IS NULL THEN next_due_at
             ELSE pg_catalog.timezone('UTC',
                      pg_catalog.timezone('UTC', next_due_at) OPERATOR(pg_catalog.+) (jitter OPERATOR(pg_catalog.*) (
                          (pg_catalog.hashint8extended(id,
                               (EXTRACT(epoch FROM next_due_at OPERATOR(pg_catalog.-) pg_catalog.timestamptz '1970-01-01 00:00:00+00')
                                OPERATOR(pg_catalog.*) 1000000)::pg_catalog.int8)
                           OPERATOR(pg_catalog.&) 4294967295)::pg_catalog.float8
                          OPERATOR(pg_catalog./) 4294967296.0)))
        END) STORED,
    ALTER COLUMN created_at SET DEFAULT pg_catalog.now(),
    ALTER COLUMN updated_at SET DEFAULT pg_catalog.now(),
    DROP CONSTRAINT timers_catch_up_check,
    ADD CONSTRAINT timers_catch_up_check
        CHECK (catch_up OPERATOR(pg_catalog.=) ANY (ARRAY['skip', 'latest', 'all'])),
    DROP CONSTRAINT timers_max_runs_check,
    ADD CONSTRAINT timers_max_runs_check CHECK (max_runs OPERATOR(pg_catalog.>) 0),
    DROP CONSTRAINT timers_name_rule,
    ADD CONSTRAINT timers_name_rule CHECK (name OPERATOR(pg_catalog.~) '^[A-Za-z0-9_-]{1,64}$'),
    DROP CONSTRAINT timers_pause_after,
    ADD CONSTRAINT timers_pause_after CHECK (pause_after OPERATOR(pg_catalog.>=) 1),
    DROP CONSTRAINT timers_priority,
    ADD CONSTRAINT timers_priority
        CHECK (priority OPERATOR(pg_catalog.>=) -100 AND priority OPERATOR(pg_catalog.<=) 100),
    DROP CONSTRAINT timers_retries,
    ADD CONSTRAINT timers_retries
        CHECK (retries OPERATOR(pg_catalog.>=) 0 AND retries OPERATOR(pg_catalog.<=) 100),
    DROP CONSTRAINT timers_retry_whole,
    ADD CONSTRAINT timers_retry_whole
        CHECK ((retry_at IS NULL) OPERATOR(pg_catalog.=) (retry_due_at IS NULL)
               AND (retry_at IS NULL) OPERATOR(pg_catalog.=) (retry_attempt IS NULL));

CREATE INDEX timers_due ON timers.timers (fire_at, id)
    WHERE fire_at IS NOT NULL AND test_clock IS NULL;

CREATE INDEX timers_due_ranked ON timers.timers (fire_at)
    WHERE fire_at IS NOT NULL AND test_clock IS NULL AND priority OPERATOR(pg_catalog.<>) 0;

CREATE INDEX timers_due_test_clock ON timers.timers (test_clock, fire_at, id)
    WHERE fire_at IS NOT NULL AND test_clock IS NOT NULL;

DROP INDEX timers.timers_name_ci;
CREATE UNIQUE INDEX timers_name_ci ON timers.timers (pg_catalog.lower(name));

ALTER TABLE timers.runs
    ALTER COLUMN started_at SET DEFAULT pg_catalog.clock_timestamp(),
    DROP CONSTRAINT runs_kind_check,
    ADD CONSTRAINT runs_kind_check CHECK (kind OPERATOR(pg_catalog.=) ANY (
        ARRAY['scheduled', 'catch_up', 'run_now', 'skipped', 'retry', 'backfill']));

ALTER TABLE timers.keyed_timers
    ALTER COLUMN created_at SET DEFAULT pg_catalog.now(),
    ALTER COLUMN updated_at SET DEFAULT pg_catalog.now(),
    DROP CONSTRAINT keyed_armed_owes,
    ADD CONSTRAINT keyed_armed_owes
        CHECK (status OPERATOR(pg_catalog.<>) 'armed' OR owed_at IS NOT NULL),
    DROP CONSTRAINT keyed_calendar_rolls,
    ADD CONSTRAINT keyed_calendar_rolls
        CHECK ((calendar IS NULL) OPERATOR(pg_catalog.=) (roll IS NULL)),
    DROP CONSTRAINT keyed_held_owes_nothing,
    ADD CONSTRAINT keyed_held_owes_nothing
        CHECK (status OPERATOR(pg_catalog.<>) 'held' OR (owed_at IS NULL AND remaining IS NOT NULL)),
    DROP CONSTRAINT keyed_kind,
    ADD CONSTRAINT keyed_kind CHECK (kind OPERATOR(pg_catalog.=) ANY (
        ARRAY['cycle', 'schedule', 'ask', 'task', 'deadline', 'rung', 'due', 'window', 'money'])),
    DROP CONSTRAINT keyed_policy_since,
    ADD CONSTRAINT keyed_policy_since CHECK (policy IS NULL OR since IS NOT NULL),
    DROP CONSTRAINT keyed_timers_n_check,
    ADD CONSTRAINT keyed_timers_n_check CHECK (n OPERATOR(pg_catalog.>=) 0),
    DROP CONSTRAINT keyed_timers_place_check,
    ADD CONSTRAINT keyed_timers_place_check
        CHECK (place OPERATOR(pg_catalog.>=) 1 AND place OPERATOR(pg_catalog.<=) 8),
    DROP CONSTRAINT keyed_timers_roll_check,
    ADD CONSTRAINT keyed_timers_roll_check
        CHECK (roll OPERATOR(pg_catalog.=) ANY (ARRAY['following', 'preceding'])),
    DROP CONSTRAINT keyed_timers_status_check,
    ADD CONSTRAINT keyed_timers_status_check CHECK (status OPERATOR(pg_catalog.=) ANY (
        ARRAY['armed', 'fired', 'superseded', 'held', 'void']));

DROP INDEX timers.keyed_due;
CREATE INDEX keyed_due ON timers.keyed_timers (owed_at, place, key)
    WHERE status OPERATOR(pg_catalog.=) 'armed' AND test_clock IS NULL;

DROP INDEX timers.keyed_due_test_clock;
CREATE INDEX keyed_due_test_clock ON timers.keyed_timers (test_clock, owed_at, place, key)
    WHERE status OPERATOR(pg_catalog.=) 'armed' AND test_clock IS NOT NULL;

DROP INDEX timers.keyed_sql;
CREATE INDEX keyed_sql ON timers.keyed_timers (pg_catalog.md5(sql));

DROP INDEX timers.keyed_fired_test_clock;
CREATE INDEX keyed_fired_test_clock ON timers.keyed_timers (test_clock, fired_at)
    WHERE status OPERATOR(pg_catalog.=) 'fired' AND test_clock IS NOT NULL;

DROP INDEX timers.keyed_calendar;
CREATE INDEX keyed_calendar ON timers.keyed_timers (pg_catalog.lower(calendar))
    WHERE status OPERATOR(pg_catalog.=) 'armed' AND calendar IS NOT NULL;

DROP INDEX timers.keyed_policy;
CREATE INDEX keyed_policy ON timers.keyed_timers (policy)
    WHERE status OPERATOR(pg_catalog.=) 'armed' AND policy IS NOT NULL;

ALTER TABLE timers.keyed_events
    ALTER COLUMN at SET DEFAULT pg_catalog.clock_timestamp(),
    DROP CONSTRAINT keyed_events_event_check,
    ADD CONSTRAINT keyed_events_event_check CHECK (event OPERATOR(pg_catalog.=) ANY (
        ARRAY['armed', 'moved', 'held', 'resumed', 'repinned', 'superseded', 'fired', 'void']));

ALTER TABLE timers.keyed_policies
    ALTER COLUMN created_at SET DEFAULT pg_catalog.now(),
    ALTER COLUMN updated_at SET DEFAULT pg_catalog.now(),
    DROP CONSTRAINT keyed_policies_span_check,
    ADD CONSTRAINT keyed_policies_span_check CHECK (span OPERATOR(pg_catalog.>) interval '0');

DROP INDEX timers.keyed_policies_name_ci;
CREATE UNIQUE INDEX keyed_policies_name_ci ON timers.keyed_policies (pg_catalog.lower(name));

ALTER TABLE timers.calendars
    ALTER COLUMN created_at SET DEFAULT pg_catalog.now(),
    ALTER COLUMN updated_at SET DEFAULT pg_catalog.now();

DROP INDEX timers.calendars_name_ci;
CREATE UNIQUE INDEX calendars_name_ci ON timers.calendars (pg_catalog.lower(name));

ALTER TABLE timers.calendar_weeks
    DROP CONSTRAINT calendar_weeks_days_check,
    ADD CONSTRAINT calendar_weeks_days_check
        CHECK (days OPERATOR(pg_catalog.>=) 0 AND days OPERATOR(pg_catalog.<=) 127);

ALTER TABLE timers.backfill_jobs
    ALTER COLUMN requested_at SET DEFAULT pg_catalog.now(),
    DROP CONSTRAINT backfill_jobs_running,
    ADD CONSTRAINT backfill_jobs_running
        CHECK ((state OPERATOR(pg_catalog.=) 'running') OPERATOR(pg_catalog.=) (next_at IS NOT NULL)),
    DROP CONSTRAINT backfill_jobs_state_check,
    ADD CONSTRAINT backfill_jobs_state_check
        CHECK (state OPERATOR(pg_catalog.=) ANY (ARRAY['running', 'done', 'cancelled'])),
    DROP CONSTRAINT backfill_jobs_total_check,
    ADD CONSTRAINT backfill_jobs_total_check
        CHECK (total OPERATOR(pg_catalog.>=) 1 AND total OPERATOR(pg_catalog.<=) 10000);

DROP INDEX timers.backfill_jobs_running;
CREATE INDEX backfill_jobs_running ON timers.backfill_jobs (id)
    WHERE state OPERATOR(pg_catalog.=) 'running';

ALTER TABLE timers.pending_changes
    ALTER COLUMN requested_at SET DEFAULT pg_catalog.clock_timestamp(),
    DROP CONSTRAINT pending_changes_action_check,
    ADD CONSTRAINT pending_changes_action_check
        CHECK (action OPERATOR(pg_catalog.=) ANY (ARRAY['enable', 'disable', 'delete']));

ALTER TABLE timers.audit ALTER COLUMN at SET DEFAULT pg_catalog.clock_timestamp();

ALTER TABLE timers.run_requests ALTER COLUMN requested_at SET DEFAULT pg_catalog.clock_timestamp();

ALTER TABLE timers.runners
    ALTER COLUMN started_at SET DEFAULT pg_catalog.now(),
    ALTER COLUMN seen_at SET DEFAULT pg_catalog.now();

ALTER TABLE timers.test_clocks ALTER COLUMN created_at SET DEFAULT pg_catalog.now();

ALTER TABLE timers.installed_code ALTER COLUMN applied_at SET DEFAULT pg_catalog.now();

ALTER TABLE timers.callers ALTER COLUMN xid SET DEFAULT pg_catalog.pg_current_xact_id();

ALTER POLICY callers_self ON timers.callers
    WITH CHECK (role OPERATOR(pg_catalog.=) CURRENT_USER
                AND xid OPERATOR(pg_catalog.=) pg_catalog.pg_current_xact_id());
