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
DO $orphans$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT p.oid::regprocedure AS routine, p.prokind
          FROM pg_catalog.pg_proc p
         WHERE p.pronamespace = 'timers'::regnamespace
           AND p.xmin OPERATOR(pg_catalog.<>) pg_catalog.pg_current_xact_id()::xid
         ORDER BY 1
    LOOP
        RAISE NOTICE 'pgtimers: dropping %, which this version no longer defines', r.routine;
        EXECUTE pg_catalog.format('DROP %s %s',
            CASE r.prokind WHEN 'p' THEN 'PROCEDURE' ELSE 'FUNCTION' END, r.routine);
    END LOOP;
END
$orphans$;
