-- pgtimers code: the runner API. A runner (pgtimers/runner) calls internal routines of
-- schema timers by name; the set of them, with their arguments and what they mean, is
-- the runner API, numbered. Each runner has one number (RUNNER_API in
-- pgtimers/runner/api_version.py); this schema serves the runners whose number is in
-- timers._runner_api()'s window, oldest..newest, and a runner checks it when it starts
-- serving a database (docs/upgrading.md).
--
-- Changing one of these routines in a way a runner would see (its arguments, its result,
-- what it does with them) makes a new API: give the new routine another name or other
-- arguments (a _vN suffix is fine), raise newest, and keep the old one as it was, listed
-- under its old number, while the window still holds that number: runners of the
-- previous release keep working while the schema is upgraded under them and until they
-- are restarted with the new package. A routine listed for a number in the window that
-- the code no longer defines stops the install (99_orphans.sql). Raise oldest (a major
-- version) to let the old ones go: runners older than oldest then refuse the database
-- at start, saying what to do, and an old runner still running finds the routines gone
-- and fires nothing (never something else under an old name).
--
-- Repeatable: applied whole on every install and upgrade, after the versioned
-- migrations (docs/design.md). Each object here is defined in this file only.

-- The runner API numbers this schema serves. Every runner that checks calls it: its
-- name, arguments and result never change.
CREATE OR REPLACE FUNCTION timers._runner_api(OUT oldest integer, OUT newest integer)
    LANGUAGE sql
    IMMUTABLE
    SET search_path = pg_catalog, pg_temp
    AS $$ SELECT 1, 1 $$;

-- The routines a runner of each API number calls by name (their regprocedure text).
CREATE OR REPLACE FUNCTION timers._runner_api_routines()
    RETURNS TABLE (api integer, routine text)
    LANGUAGE sql
    IMMUTABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
    SELECT 1, r
      FROM pg_catalog.unnest(ARRAY[
        'timers._autonomous_began(bigint,integer,name)',
        'timers._autonomous_finish(bigint,jsonb,text)',
        'timers._default_zone()',
        'timers._deliveries_claim(text[],text,integer,interval)',
        'timers._deliveries_enqueue(text,text[],text,text)',
        'timers._delivery_done(bigint,text,text,integer)',
        'timers._delivery_failed(bigint,text,text,integer,text)',
        'timers._fire_many(text,bigint[],bigint[],boolean,bigint,integer,integer,text,text[],text[],jsonb,jsonb)',
        'timers._next_wake()',
        'timers._prune()',
        'timers._ringing()',
        'timers._run_backfill(bigint,text,jsonb)',
        'timers._run_due(bigint,timestamp with time zone,text,jsonb)',
        'timers._run_lost(text,bigint,timestamp with time zone,text,jsonb)',
        'timers._run_messages(jsonb)',
        'timers._run_request(bigint,text,jsonb)',
        'timers._runner_beat(text)',
        'timers._runner_park(text,timestamp with time zone)',
        'timers._runner_start(text,text,integer,text,integer)',
        'timers._runner_stop(text)',
        'timers._server_clock_jumped(timestamp with time zone,timestamp with time zone,text)',
        'timers._session_reset(text[],text[])',
        'timers.set_timezone(text)'
      ]) AS r
$$;

-- ---------------------------------------------------------------------------
-- Rights
-- ---------------------------------------------------------------------------
REVOKE ALL ON FUNCTION
    timers._runner_api(),
    timers._runner_api_routines()
    FROM PUBLIC, pgtimers_reader, pgtimers_admin, pgtimers_runner;
GRANT EXECUTE ON FUNCTION
    timers._runner_api()
    TO pgtimers_reader, pgtimers_admin, pgtimers_runner;
GRANT EXECUTE ON FUNCTION
    timers._runner_api_routines()
    TO pgtimers_reader, pgtimers_admin, pgtimers_runner;

COMMENT ON FUNCTION timers._runner_api() IS
    'The runner API numbers this schema serves, oldest..newest: a runner whose number is outside refuses the database (docs/upgrading.md).';
COMMENT ON FUNCTION timers._runner_api_routines() IS
    'The routines a runner of each API number calls by name; one still served may not be dropped (99_orphans.sql).';
