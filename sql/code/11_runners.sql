-- pgtimers code: runners: liveness, start, heartbeat, stop.
--
-- Repeatable: applied whole on every install and upgrade, after the versioned
-- migrations (docs/design.md). Each object here is defined in this file only.

-- How many runners serve this database right now: registered control backends that
-- are still there (same pid, database and application_name) and log in as a member
-- of pgtimers_runner (what pg_stat_get_activity shows every role), and runners that
-- parked their control session (short of connections) and are due back.
CREATE OR REPLACE FUNCTION timers._live_runners() RETURNS integer
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
        SELECT count(*)::integer
          FROM timers.runners r
         WHERE r.stopped_at IS NULL
           AND (r.parked_until >= now()
                OR EXISTS (SELECT 1
                             FROM pg_stat_get_activity(r.backend_pid) a
                            WHERE a.datid = (SELECT d.oid FROM pg_database d
                                              WHERE d.datname = current_database())
                              AND a.application_name = r.application_name
                              AND pg_has_role(a.usesysid, timers._role('runner'), 'MEMBER')))
    $$;

-- A runner starts serving this database. When no other runner is live, the due
-- times missed before now were missed while no runner served it: they follow each
-- timer's catch_up. A runner back from parking (same id, not stopped) served the
-- database all along: what came due meanwhile is owed, fired late. The caller's
-- session (with its application_name) is registered.
CREATE OR REPLACE FUNCTION timers._runner_start(
    p_runner text, p_host text, p_os_pid integer, p_version text, p_workers integer) RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_others integer;
    v_since timestamptz;
    v_events jsonb := '[]';
    v_resumed boolean;
BEGIN
    PERFORM timers._take_lock('runner_start', interval '10 seconds');
    v_resumed := EXISTS (SELECT 1 FROM timers.runners r
                          WHERE r.id = p_runner AND r.stopped_at IS NULL
                            AND r.parked_until IS NOT NULL);
    v_others := timers._live_runners();
    IF v_others = 0 AND NOT v_resumed THEN
        -- a live runner updates seen_at every second (the margin covers that); a parked
        -- one served until parked_until
        v_since := (SELECT max(greatest(r.seen_at, r.parked_until)) FROM timers.runners r)
                   + interval '2 seconds';
        v_events := timers._apply_gaps('no runner was serving the database', p_runner, v_since);
    END IF;
    -- rows of runners gone for a week are history nobody needs
    DELETE FROM timers.runners r WHERE r.id = p_runner OR r.seen_at < now() - interval '7 days';
    INSERT INTO timers.runners (id, host, os_pid, backend_pid, version, workers, application_name)
    VALUES (p_runner, p_host, p_os_pid, pg_backend_pid(), p_version, p_workers,
            current_setting('application_name'));
    RETURN jsonb_build_object('other_runners', v_others, 'downtime', v_others = 0 AND NOT v_resumed,
                              'resumed', v_resumed,
                              'last_seen', v_since - interval '2 seconds', 'skipped', v_events);
END
$$;

-- The runner is alive (called every second; durability is not needed for it).
CREATE OR REPLACE FUNCTION timers._runner_beat(p_runner text) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    UPDATE timers.runners SET seen_at = now() WHERE id = p_runner;
    -- (only when some timer has a deadline: the index of them answers at once)
    IF EXISTS (SELECT 1 FROM timers.timers t WHERE t.deadline IS NOT NULL) THEN
        PERFORM timers._deadline_check();
    END IF;
END
$$;

-- A runner stops serving (its row stays: seen_at says until when it served).
CREATE OR REPLACE FUNCTION timers._runner_stop(p_runner text) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    UPDATE timers.runners SET seen_at = now(), stopped_at = now() WHERE id = p_runner;
END
$$;

-- A runner parks: it closes its control session (its connection budget is short) and
-- is back by p_until, serving the database until then.
CREATE OR REPLACE FUNCTION timers._runner_park(p_runner text, p_until timestamptz) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    IF p_until IS NULL OR p_until < now() OR p_until > now() + interval '1 hour' THEN
        RAISE EXCEPTION 'a runner parks until a time within the next hour, not %', p_until
            USING ERRCODE = '22008';
    END IF;
    UPDATE timers.runners SET seen_at = now(), parked_until = p_until
     WHERE id = p_runner AND stopped_at IS NULL;
END
$$;

-- The doorbell. A session that waits for the runner (CALL timers.run, a test clock's
-- advance) rings it, so that a runner that parked this database's control session (short
-- of connections) comes back at once, not within PGTIMERS_PARK_LOOK seconds. Ringing is
-- holding a shared advisory lock, key (1885828201 = 'pgti', 1), until the transaction
-- ends: pg_locks shows it to the runner's control session of any database of the server.
-- Only a hint: it never waits (a session that holds the key exclusively only makes the
-- runner come back later), and a ring wakes a parked runner for one look.
CREATE OR REPLACE FUNCTION timers._ring() RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM pg_try_advisory_xact_lock_shared(1885828201, 1);
END
$$;

-- The databases of this server where a session rings for the runner now (the key of
-- timers._ring).
CREATE OR REPLACE FUNCTION timers._ringing() RETURNS SETOF name
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
        SELECT DISTINCT d.datname
          FROM pg_locks l
          JOIN pg_database d ON d.oid = l.database
         WHERE l.locktype = 'advisory' AND l.classid = 1885828201 AND l.objid = 1
           AND l.objsubid = 2 AND l.granted
    $$;

-- Take one of timers.locks, waiting at most p_wait; after that, name who holds it.
CREATE OR REPLACE FUNCTION timers._take_lock(p_name text, p_wait interval) RETURNS void
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    v_old text := current_setting('lock_timeout');
    v_holders text;
BEGIN
    PERFORM set_config('lock_timeout', (extract(epoch FROM p_wait) * 1000)::bigint::text, true);
    BEGIN
        PERFORM 1 FROM timers.locks k WHERE k.name = p_name FOR UPDATE;
    EXCEPTION WHEN lock_not_available THEN
        SELECT string_agg(format('pid %s (role %s, %s)', a.pid, pg_get_userbyid(a.usesysid),
                                 coalesce(nullif(a.application_name, ''), 'no application_name')), ', ')
          INTO v_holders
          FROM timers.locks k
          JOIN pg_locks l ON l.locktype = 'transactionid' AND l.transactionid = k.xmax AND l.granted
          CROSS JOIN LATERAL pg_stat_get_activity(l.pid) a
         WHERE k.name = p_name;
        RAISE EXCEPTION 'pgtimers lock "%" was not free within %: it is held by %', p_name, p_wait,
            coalesce(v_holders, 'a session that has ended')
            USING ERRCODE = '55P03';
    END;
    PERFORM set_config('lock_timeout', v_old, true);
END
$$;

-- ---------------------------------------------------------------------------
-- Rights
-- ---------------------------------------------------------------------------
REVOKE ALL ON FUNCTION
    timers._live_runners(),
    timers._runner_start(text,text,integer,text,integer),
    timers._runner_beat(text),
    timers._runner_stop(text),
    timers._runner_park(text,timestamp with time zone),
    timers._ring(),
    timers._ringing(),
    timers._take_lock(text,interval)
    FROM PUBLIC, pgtimers_reader, pgtimers_admin, pgtimers_runner;
GRANT EXECUTE ON FUNCTION
    timers._live_runners()
    TO pgtimers_reader, pgtimers_runner;
GRANT EXECUTE ON FUNCTION
    timers._runner_start(text,text,integer,text,integer),
    timers._runner_beat(text),
    timers._runner_stop(text),
    timers._runner_park(text,timestamp with time zone),
    timers._ringing(),
    timers._take_lock(text,interval)
    TO pgtimers_runner;
GRANT EXECUTE ON FUNCTION
    timers._ring()
    TO pgtimers_admin;
