-- pgtimers code, last: drop the routines of schema timers the code above no longer
-- defines.
--
-- Every routine this code defines was created or replaced, or had its rights set, in
-- this transaction: its pg_proc row has this transaction's xmin. Any other routine in
-- schema timers is left from an older version: one that was removed, or the old
-- signature of one whose arguments changed. So a removed routine needs no DROP of
-- its own (a changed return type of the same arguments still does, in a versioned
-- migration: CREATE OR REPLACE cannot change it). Without CASCADE: a user's object
-- that still depends on such a routine stops the upgrade, with PostgreSQL's message.
--
-- Except a routine that runners of an API number this schema still serves call by
-- name (24_runner_api.sql): runners of the previous release may be firing timers
-- through it while this install runs, and keep doing so until they are restarted.
-- Dropping it stops the install instead (55000), naming it: keep it defined, or raise
-- the oldest runner API served.
--
-- And a run in flight: a fire that began before this install commits runs the code it
-- began with, and its next call of a routine dropped here would fail (a run's record
-- routines changed arguments in 0029). So before it drops anything the install waits
-- for the fires in flight to commit, and holds new claims back until it commits
-- itself (EXCLUSIVE on the tables a claim locks rows of: a plain read goes on). It
-- waits at most 60 s: a run still going then (a slow timer's SQL) stops the install
-- (55P03), which changes nothing and can be run again.
DO $orphans$
DECLARE
    r record;
    v_window record := timers._runner_api();
    v_kept text;
    v_waited boolean := false;
BEGIN
    FOR r IN
        SELECT p.oid::regprocedure AS routine, p.prokind
          FROM pg_catalog.pg_proc p
         WHERE p.pronamespace = 'timers'::regnamespace
           AND p.xmin OPERATOR(pg_catalog.<>) pg_catalog.pg_current_xact_id()::xid
         ORDER BY 1
    LOOP
        SELECT pg_catalog.string_agg(a.api::text, ', ' ORDER BY a.api) INTO v_kept
          FROM timers._runner_api_routines() a
         WHERE a.api OPERATOR(pg_catalog.>=) v_window.oldest
           AND a.api OPERATOR(pg_catalog.<=) v_window.newest
           AND pg_catalog.to_regprocedure(a.routine) OPERATOR(pg_catalog.=) r.routine::oid;
        IF v_kept IS NOT NULL THEN
            RAISE EXCEPTION 'pgtimers: this version no longer defines %, which runners of API % call, and it serves runner API %..%', r.routine, v_kept, v_window.oldest, v_window.newest
                USING ERRCODE = '55000',
                      HINT = 'Keep the routine defined (sql/code/24_runner_api.sql) until the oldest runner API served is past it.';
        END IF;
        IF NOT v_waited THEN
            -- the fires in flight first, once, before the first drop
            PERFORM pg_catalog.set_config('lock_timeout', '60s', true);
            BEGIN
                LOCK TABLE timers.timers, timers.keyed_timers, timers.run_requests, timers.backfill_jobs
                    IN EXCLUSIVE MODE;
            EXCEPTION WHEN lock_not_available THEN
                RAISE EXCEPTION 'pgtimers: runs in flight did not finish within 60 s, and this version replaces routines they may still call'
                    USING ERRCODE = '55P03',
                          HINT = 'Run the install again when the long run ends (timers.status shows it running), or stop the runners first.';
            END;
            v_waited := true;
        END IF;
        RAISE NOTICE 'pgtimers: dropping %, which this version no longer defines', r.routine;
        EXECUTE pg_catalog.format('DROP %s %s',
            CASE r.prokind WHEN 'p' THEN 'PROCEDURE' ELSE 'FUNCTION' END, r.routine);
    END LOOP;
END
$orphans$;
