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

-- The runner's side of a run-now: run the timer's SQL now, in the caller's
-- transaction, whatever its schedule (also when it is off). Does not move
-- next_due_at or last_due_at; counts in runs and failures, not in max_runs. p_lost: the
-- run ended its session before (timers._run_lost): answered as that failure.
CREATE OR REPLACE FUNCTION timers._run_request(p_request bigint, p_runner text, p_lost jsonb DEFAULT NULL)
    RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    q timers.run_requests;
    t timers.timers;
    r jsonb;
    v_now timestamptz;
    v_result jsonb;
BEGIN
    SELECT * INTO q FROM timers.run_requests
     WHERE id = p_request AND finished_at IS NULL FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    SELECT * INTO t FROM timers.timers WHERE id = q.timer_id FOR UPDATE;
    IF FOUND AND EXISTS (SELECT 1 FROM timers.pending_changes c WHERE c.timer_id = t.id)
       AND timers._apply_pending(t.id) THEN
        SELECT * INTO t FROM timers.timers WHERE id = q.timer_id;
    END IF;
    IF t.id IS NULL THEN
        v_result := jsonb_build_object('name', q.timer, 'finished', true, 'ok', false,
            'error', 'the timer was deleted before it could run', 'took_ms', 0, 'rows', 0);
        UPDATE timers.run_requests SET finished_at = clock_timestamp(), result = v_result WHERE id = q.id;
        RETURN v_result || jsonb_build_object('timer', q.timer, 'kind', 'run_now', 'sqlstate', '');
    END IF;
    v_now := coalesce(timers._now(t.test_clock), now());
    -- (t.autonomous first: the look-up is not made for an atomic timer)
    IF t.autonomous AND p_lost IS NULL AND timers._autonomous_owner(t) IS NOT NULL THEN
        RETURN timers._autonomous_start(t, 'request', 'run_now', NULL, 1, v_now, NULL, NULL, '[]', q.id,
                                        p_runner);
    END IF;
    r := timers._execute(t, v_now, v_now, 1, v_now, p_lost);
    RETURN timers._request_recorded(q, t, v_now, r, p_runner);
END
$$;

-- The record of run-now request q of timer t (both rows locked by the caller), whose
-- outcome is r (timers._execute; an autonomous timer's, timers._autonomous_finish): the
-- timer's counters, the timers.runs row, the answer timers.run waits for. p_now: the
-- timer's clock when it was claimed. Returns the result the runner logs.
CREATE OR REPLACE FUNCTION timers._request_recorded(
    q timers.run_requests, t timers.timers, p_now timestamptz, r jsonb, p_runner text)
    RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_ok boolean := (r->>'ok')::boolean;
    v_result jsonb;
    v_run bigint;
    v_took bigint := (r->>'took_ms')::bigint;
    v_tb integer := timers._bucket((r->>'took_ms')::bigint, timers._duration_buckets());
BEGIN
    UPDATE timers.timers SET
        last_run_at = CASE WHEN t.test_clock IS NULL THEN (r->>'started_at')::timestamptz ELSE p_now END,
        last_ok = v_ok,
        last_error = r->>'error',
        last_took_ms = (r->>'took_ms')::bigint,
        last_rows = (r->>'rows')::bigint,
        runs = runs + 1,
        failures = failures + CASE WHEN v_ok THEN 0 ELSE 1 END,
        last_success_at = CASE WHEN NOT v_ok THEN last_success_at
                               WHEN t.test_clock IS NULL THEN clock_timestamp() ELSE p_now END,
        -- a run now is never late: its lateness is not counted
        took_counts[v_tb] = took_counts[v_tb] + 1,
        took_sum_ms = took_sum_ms + greatest(v_took, 0)
     WHERE id = t.id;
    IF NOT v_ok OR t.history = 'all' THEN
        INSERT INTO timers.runs (timer_id, timer, kind, due_at, started_at, took_ms, ok, error, rows,
                                 runner, messages)
        VALUES (t.id, t.name, 'run_now', NULL, (r->>'started_at')::timestamptz, (r->>'took_ms')::bigint,
                v_ok, r->>'error', (r->>'rows')::bigint, p_runner, coalesce(r->>'messages', ''))
        RETURNING id INTO v_run;
    END IF;
    IF NOT v_ok THEN
        PERFORM timers._event('failed', t.name, NULL, 1, r->>'error', r->>'sqlstate',
                              jsonb_build_object('kind', 'run_now'), v_run, coalesce(r->>'messages', ''));
    ELSIF t.last_ok = false THEN
        PERFORM timers._event('recovered', t.name, NULL, 1, '', '', jsonb_build_object('kind', 'run_now'), v_run);
    END IF;
    IF EXISTS (SELECT 1 FROM timers.pending_changes c WHERE c.timer_id = t.id) THEN
        PERFORM timers._apply_pending(t.id);
    END IF;
    v_result := jsonb_build_object('name', t.name, 'finished', true, 'ok', v_ok,
        'error', r->>'error', 'took_ms', (r->>'took_ms')::bigint, 'rows', (r->>'rows')::bigint);
    IF q.id IS NOT NULL THEN
        UPDATE timers.run_requests SET finished_at = clock_timestamp(), result = v_result WHERE id = q.id;
    END IF;
    RETURN v_result || jsonb_build_object('timer', t.name, 'kind', 'run_now', 'sqlstate', r->>'sqlstate');
END
$$;

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
    timers._run_request(bigint,text,jsonb),
    timers._request_recorded(timers.run_requests,timers.timers,timestamp with time zone,jsonb,text),
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
GRANT EXECUTE ON FUNCTION
    timers._run_request(bigint,text,jsonb),
    timers._request_recorded(timers.run_requests,timers.timers,timestamp with time zone,jsonb,text)
    TO pgtimers_runner;
GRANT EXECUTE ON PROCEDURE
    timers.run(text,jsonb)
    TO pgtimers_admin;
