-- pgtimers code: CALL timers.run: ask, wait for the runner's answer.
--
-- Repeatable: applied whole on every install and upgrade, after the versioned
-- migrations (docs/design.md). Each object here is defined in this file only.

-- Queue a run-now request. p_actor is the caller's role in effect; a session
-- that cannot act as it is refused. Refuses a running timer (55P03) and a
-- database that no runner serves (55000).
CREATE OR REPLACE FUNCTION timers._run_ask(p_actor name, p_name text) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    -- the name (or key) index whatever the statistics say: a table analyzed while empty
    -- would make each look-up a scan, and a bulk save quadratic
    SET enable_seqscan = off SET jit = off
    AS $$
DECLARE
    t timers.timers;
    v_id bigint;
BEGIN
    PERFORM timers._take_ticket(p_actor, 'run a timer');
    IF NOT pg_has_role(p_actor, timers._role('admin'), 'MEMBER') THEN
        RAISE EXCEPTION 'permission denied to run a timer: it needs the role %, and role "%" is not a member', timers._role('admin'), p_actor
            USING ERRCODE = '42501';
    END IF;
    BEGIN
        SELECT * INTO t FROM timers.timers WHERE lower(name) = lower(p_name) COLLATE "default" FOR UPDATE NOWAIT;
    EXCEPTION WHEN lock_not_available THEN
        RAISE EXCEPTION 'timer ''%'' is running', p_name
            USING ERRCODE = '55P03', HINT = 'Wait for the run to finish, then call timers.run again.';
    END;
    IF t.id IS NULL THEN
        PERFORM timers._no_such_timer(p_name);
    END IF;
    IF EXISTS (SELECT 1 FROM timers.run_requests q WHERE q.timer_id = t.id AND q.finished_at IS NULL)
       OR timers._autonomous_open(t) THEN
        RAISE EXCEPTION 'timer ''%'' is running', t.name
            USING ERRCODE = '55P03', DETAIL = 'A run-now of it is waiting for the runner, or its autonomous run is under way.';
    END IF;
    IF timers._live_runners() = 0 THEN
        RAISE EXCEPTION 'no pgtimers runner serves database %, so timer ''%'' cannot run now', current_database(), t.name
            USING ERRCODE = '55000', HINT = 'Start one: pgtimers run --dsn <this database>';
    END IF;
    INSERT INTO timers.run_requests (timer_id, timer, requested_by)
    VALUES (t.id, t.name, p_actor) RETURNING id INTO v_id;
    PERFORM timers._audit(p_actor, 'run', t.name, jsonb_build_object('request', v_id));
    PERFORM timers._notify('run', t.name);
    RETURN v_id;
END
$$;

-- The result of a run-now request, NULL while it has not finished.
CREATE OR REPLACE FUNCTION timers._run_answer(p_request bigint) RETURNS jsonb
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$ SELECT q.result FROM timers.run_requests q WHERE q.id = p_request AND q.finished_at IS NOT NULL $$;

CREATE OR REPLACE PROCEDURE timers.run(name text, INOUT result jsonb DEFAULT NULL)
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_probe pg_catalog.text;
    v_request pg_catalog.int8;
    v_started pg_catalog.timestamptz := pg_catalog.clock_timestamp();
BEGIN
    PERFORM 'PRAGMA:DISABLE:CHECK';
    BEGIN
        COMMIT;
    EXCEPTION WHEN invalid_transaction_termination THEN
        GET STACKED DIAGNOSTICS v_probe = MESSAGE_TEXT;
    END;
    PERFORM 'PRAGMA:ENABLE:CHECK';
    PERFORM timers._refuse_in_block(v_probe,
        'CALL timers.run() cannot be used inside a transaction block: it commits so that the runner can see the request',
        'Call it on its own, in autocommit mode.');
    PERFORM timers._require_admin('run a timer');
    v_request := timers._run_ask(current_user, run.name);
    COMMIT;
    LOOP
        result := timers._run_wait(v_request, run.name, v_started);
        EXIT WHEN result IS NOT NULL;
        -- no snapshot kept between looks: CREATE INDEX CONCURRENTLY, which the runner may
        -- be running for this very request (an autonomous timer), waits for every older one
        COMMIT;
    END LOOP;
END
$$;

COMMENT ON PROCEDURE timers.run(text, jsonb) IS
    'Run a timer now through the runner (also when it is off) and wait up to 60 s: result is {name, finished, ok, error, took_ms, rows}. Already running: 55P03. Not inside a transaction block (it commits). Needs pgtimers_admin.';

-- Wait a moment (up to 0.1 s) for the runner's answer to run request p_request:
-- the answer, or NULL while there is none yet and 60 s from p_started have not gone by
-- (then the answer that it has not finished). Each look sees what has committed
-- (VOLATILE, READ COMMITTED); timers.run commits between calls, so no snapshot of its
-- stays while the run goes on.
CREATE OR REPLACE FUNCTION timers._run_wait(p_request bigint, p_name text, p_started timestamptz)
    RETURNS jsonb
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_deadline timestamptz := p_started + interval '60 seconds';
    v_moment timestamptz := clock_timestamp() + interval '0.1 seconds';
    v_nap double precision := 0.005;
    v_result jsonb;
BEGIN
    -- a parked runner: come back now (the ring lasts as long as this transaction: each
    -- look rings again)
    PERFORM timers._ring();
    LOOP
        v_result := timers._run_answer(p_request);
        EXIT WHEN v_result IS NOT NULL;
        IF clock_timestamp() >= v_deadline THEN
            RETURN jsonb_build_object('name', p_name, 'finished', false, 'ok', NULL, 'error', '',
                'took_ms', timers._ms(clock_timestamp() - p_started), 'rows', 0);
        END IF;
        IF clock_timestamp() >= v_moment THEN
            RETURN NULL;
        END IF;
        PERFORM pg_sleep(v_nap);
        v_nap := least(v_nap * 2, 0.05);
    END LOOP;
    RETURN v_result;
END
$$;

-- ---------------------------------------------------------------------------
-- Rights
-- ---------------------------------------------------------------------------
REVOKE ALL ON FUNCTION
    timers._run_ask(name,text),
    timers._run_answer(bigint),
    timers._run_wait(bigint,text,timestamp with time zone)
    FROM PUBLIC, pgtimers_reader, pgtimers_admin, pgtimers_runner;
REVOKE ALL ON PROCEDURE
    timers.run(text,jsonb)
    FROM PUBLIC, pgtimers_reader, pgtimers_admin, pgtimers_runner;
GRANT EXECUTE ON FUNCTION
    timers._run_ask(name,text),
    timers._run_answer(bigint),
    timers._run_wait(bigint,text,timestamp with time zone)
    TO pgtimers_admin;
GRANT EXECUTE ON PROCEDURE
    timers.run(text,jsonb)
    TO pgtimers_admin;
