-- pgtimers 0013: the two procedures that COMMIT (CALL timers.run and CALL
-- timers.advance_test_clock) become thin shells.
--
-- A procedure that COMMITs cannot carry SET search_path, so every operator,
-- function and type name in its body is looked up in the caller's
-- search_path, where an earlier schema's better-matching overload (say an
-- operator *(double precision, integer)) would run in the middle of the call.
-- The bodies now hold nothing but schema-qualified calls, COMMIT, and types
-- named with their schema; all the work (the checks, the loop state, the
-- waits, the result) is in functions with a pinned search_path.

-- Raise the "not inside a transaction block" error of a procedure when its
-- COMMIT probe failed with the message of a transaction block.
CREATE OR REPLACE FUNCTION timers._refuse_in_block(p_probe text, p_message text, p_hint text) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    IF p_probe IS NOT DISTINCT FROM timers._in_transaction_block_message() THEN
        IF p_hint IS NULL THEN
            RAISE EXCEPTION USING ERRCODE = '25001', MESSAGE = p_message;
        END IF;
        RAISE EXCEPTION USING ERRCODE = '25001', MESSAGE = p_message, HINT = p_hint;
    END IF;
END
$$;

-- ---------------------------------------------------------------------------
-- CALL timers.run: ask, commit, wait for the answer
-- ---------------------------------------------------------------------------

-- Wait up to 60 s from p_started for the runner's answer to run request
-- p_request (each look sees what has committed: VOLATILE, READ COMMITTED).
CREATE OR REPLACE FUNCTION timers._run_wait(p_request bigint, p_name text, p_started timestamptz)
    RETURNS jsonb
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_deadline timestamptz := p_started + interval '60 seconds';
    v_nap double precision := 0.005;
    v_result jsonb;
BEGIN
    LOOP
        v_result := timers._run_answer(p_request);
        EXIT WHEN v_result IS NOT NULL;
        IF clock_timestamp() >= v_deadline THEN
            RETURN jsonb_build_object('name', p_name, 'finished', false, 'ok', NULL, 'error', '',
                'took_ms', timers._ms(clock_timestamp() - p_started), 'rows', 0);
        END IF;
        PERFORM pg_sleep(v_nap);
        v_nap := least(v_nap * 2, 0.1);
    END LOOP;
    RETURN v_result;
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
    result := timers._run_wait(v_request, run.name, v_started);
END
$$;

COMMENT ON PROCEDURE timers.run(text, jsonb) IS
    'Run a timer now through the runner (also when it is off) and wait up to 60 s: result is {name, finished, ok, error, took_ms, rows}. Already running: 55P03. Not inside a transaction block (it commits). Needs pgtimers_admin.';

-- ---------------------------------------------------------------------------
-- CALL timers.advance_test_clock: step, commit, wait, (redeliver), repeat
-- ---------------------------------------------------------------------------

-- The loop's state: {name, to, redeliver, first, fired, replayed, step}.
CREATE OR REPLACE FUNCTION timers._advance_start(p_name text, p_to timestamptz, p_redeliver boolean)
    RETURNS jsonb
    LANGUAGE sql IMMUTABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
        SELECT jsonb_build_object('name', p_name, 'to', p_to, 'redeliver', coalesce(p_redeliver, false),
                                  'first', true, 'fired', 0, 'replayed', 0, 'step', NULL)
    $$;

-- One step: move the clock to its next stop (timers._clock_step), in a new
-- transaction after the first, with a new caller ticket.
CREATE OR REPLACE FUNCTION timers._advance_step(p_state jsonb) RETURNS jsonb
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_first boolean := (p_state->>'first')::boolean;
BEGIN
    IF NOT v_first THEN
        PERFORM timers._ticket();  -- each step commits: a new ticket for each
    END IF;
    RETURN p_state || jsonb_build_object('first', false, 'step',
        timers._clock_step(current_user, p_state->>'name', (p_state->>'to')::timestamptz, v_first));
END
$$;

CREATE OR REPLACE FUNCTION timers._advance_done(p_state jsonb) RETURNS boolean
    LANGUAGE sql IMMUTABLE
    SET search_path = pg_catalog, pg_temp
    AS $$ SELECT coalesce((p_state->'step'->>'done')::boolean, true) $$;

-- Wait at the stop until the runner has fired what is owed there; then,
-- with redeliver, wake each fired timer again (each must answer replayed).
CREATE OR REPLACE FUNCTION timers._advance_wait(p_state jsonb) RETURNS jsonb
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_name text := p_state->>'name';
    v_at timestamptz := (p_state->'step'->>'at')::timestamptz;
    v_owed integer := (p_state->'step'->>'owed')::integer;
    v_replayed bigint := (p_state->>'replayed')::bigint;
BEGIN
    PERFORM timers._clock_wait(v_name, v_at, v_owed);
    IF (p_state->>'redeliver')::boolean THEN
        v_replayed := v_replayed + timers._clock_redeliver(v_name, v_at);
    END IF;
    RETURN p_state || jsonb_build_object('fired', (p_state->>'fired')::bigint + v_owed, 'replayed', v_replayed);
END
$$;

-- The procedure's result; a NOTICE when no runner served the advance.
CREATE OR REPLACE FUNCTION timers._advance_result(p_state jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_runner boolean := (p_state->'step'->>'runner')::boolean;
BEGIN
    IF NOT v_runner THEN
        RAISE NOTICE 'no runner serves database %: test clock ''%'' only moved to %; the due times it passed were missed, and the next runner applies the catch-up rules',
            current_database(), p_state->>'name', p_state->'step'->>'now';
    END IF;
    RETURN jsonb_build_object('test_clock', p_state->>'name', 'now', p_state->'step'->>'now',
        'fired', (p_state->>'fired')::bigint, 'runner', v_runner, 'replayed', (p_state->>'replayed')::bigint);
END
$$;

CREATE OR REPLACE PROCEDURE timers.advance_test_clock(
    name text, "to" timestamptz, redeliver boolean DEFAULT false, INOUT result jsonb DEFAULT NULL)
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_probe pg_catalog.text;
    v_state pg_catalog.jsonb;
BEGIN
    PERFORM 'PRAGMA:DISABLE:CHECK';
    BEGIN
        COMMIT;
    EXCEPTION WHEN invalid_transaction_termination THEN
        GET STACKED DIAGNOSTICS v_probe = MESSAGE_TEXT;
    END;
    PERFORM 'PRAGMA:ENABLE:CHECK';
    PERFORM timers._refuse_in_block(v_probe,
        'CALL timers.advance_test_clock() cannot be used inside a transaction block: it commits each step so that the runner can fire it',
        NULL);
    PERFORM timers._require_admin('advance a test clock');
    v_state := timers._advance_start(advance_test_clock.name, advance_test_clock."to", advance_test_clock.redeliver);
    LOOP
        v_state := timers._advance_step(v_state);
        COMMIT;
        EXIT WHEN timers._advance_done(v_state);
        v_state := timers._advance_wait(v_state);
        COMMIT;
    END LOOP;
    result := timers._advance_result(v_state);
END
$$;

COMMENT ON PROCEDURE timers.advance_test_clock(text, timestamptz, boolean, jsonb) IS
    'Move a test clock forward to "to", stopping at every due time of its timers so the runner fires each (returns when they have committed); with no runner up it only moves the clock (a NOTICE says so), which simulates downtime. Backward: test_clock_backward (22023). redeliver => true offers each fired due time once more, which must answer it ran already. Needs pgtimers_admin.';

-- ---------------------------------------------------------------------------
-- Rights: the procedures' helpers are the procedures' callers' (pgtimers_admin)
-- ---------------------------------------------------------------------------
REVOKE ALL ON FUNCTION
    timers._refuse_in_block(text, text, text), timers._run_wait(bigint, text, timestamptz),
    timers._advance_start(text, timestamptz, boolean), timers._advance_step(jsonb),
    timers._advance_done(jsonb), timers._advance_wait(jsonb), timers._advance_result(jsonb)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    timers._refuse_in_block(text, text, text), timers._run_wait(bigint, text, timestamptz),
    timers._advance_start(text, timestamptz, boolean), timers._advance_step(jsonb),
    timers._advance_done(jsonb), timers._advance_wait(jsonb), timers._advance_result(jsonb)
    TO pgtimers_admin;
REVOKE ALL ON PROCEDURE timers.run(text, jsonb), timers.advance_test_clock(text, timestamptz, boolean, jsonb)
    FROM PUBLIC;
GRANT EXECUTE ON PROCEDURE timers.run(text, jsonb), timers.advance_test_clock(text, timestamptz, boolean, jsonb)
    TO pgtimers_admin;
