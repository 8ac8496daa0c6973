-- pgtimers 0011: advancing a test clock over many keyed timers, faster.
--
-- An advance stops at every owed time and waits until the runner has fired
-- what is owed there. It polled with naps doubling from 2 ms to 50 ms, so a
-- stop whose fires took 30 ms was noticed up to 30 ms late, at every one of
-- the stops of a year. It now measures the runner's pace at the stop (time per
-- fire since the first fire was seen) and naps for half the time the rest
-- should take at that pace (1 ms to 50 ms; backing off from 1 ms by half again
-- until the runner has started). The wait is its own function, with a pinned
-- search_path: the procedure cannot have one (it COMMITs).
--
-- Nothing else changes: each keyed fire is still its own transaction, one at a
-- time per clock, in tick order (sql/0009_keyed.sql). The runner's side of the
-- speed-up is in pgtimers/run_worker.py and pgtimers/run_database.py (a worker
-- whose keyed fire succeeded fires the clock's next one at once, without the
-- claims of the other kinds and without waiting for the control session).
-- bench/keyed_bench.py measures both.

-- ---------------------------------------------------------------------------
-- Waiting for a stop
-- ---------------------------------------------------------------------------

-- Wait until no timer of the clock owes a due time at or before p_at (the
-- runner has fired them; p_owed of them were owed when the stop began).
-- Raises 57014 after 60 seconds. VOLATILE: each look sees what has committed.
CREATE OR REPLACE FUNCTION timers._clock_wait(p_name text, p_at timestamptz, p_owed integer) RETURNS void
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_deadline timestamptz := clock_timestamp() + interval '60 seconds';
    v_left integer;
    v_first_seen timestamptz;
    v_first_left integer;
    v_nap double precision := 0.001;
BEGIN
    LOOP
        v_left := timers._clock_owed(p_name, p_at);
        EXIT WHEN v_left = 0;
        IF clock_timestamp() > v_deadline THEN
            RAISE EXCEPTION 'test clock ''%'': the runner did not fire the due times at % within 60 seconds',
                p_name, timers._iso(p_at) USING ERRCODE = '57014';
        END IF;
        IF v_first_seen IS NULL AND v_left < p_owed THEN
            -- the runner has started on this stop: measure its pace from here
            v_first_seen := clock_timestamp();
            v_first_left := v_left;
            v_nap := 0.001;
        ELSIF v_first_seen IS NOT NULL AND v_left < v_first_left THEN
            -- half the time the rest should take at that pace (so a slower fire is seen soon)
            v_nap := extract(epoch FROM clock_timestamp() - v_first_seen)::double precision
                     / (v_first_left - v_left) * v_left / 2;
        ELSE
            -- not started yet (the runner needs a few ms to wake up), or a slow fire: back off
            v_nap := v_nap * 1.5;
        END IF;
        v_nap := least(greatest(v_nap, 0.001), 0.05);
        PERFORM pg_sleep(v_nap);
    END LOOP;
END
$$;

-- ---------------------------------------------------------------------------
-- The advance (CREATE OR REPLACE of 0005's procedure: same signature, rights)
-- ---------------------------------------------------------------------------

CREATE OR REPLACE PROCEDURE timers.advance_test_clock(
    name text, "to" timestamptz, redeliver boolean DEFAULT false, INOUT result jsonb DEFAULT NULL)
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_probe text;
    v_step jsonb;
    v_first boolean := true;
    v_fired bigint := 0;
    v_replayed bigint := 0;
    v_at timestamptz;
BEGIN
    PERFORM 'PRAGMA:DISABLE:CHECK';
    BEGIN
        COMMIT;
    EXCEPTION WHEN invalid_transaction_termination THEN
        GET STACKED DIAGNOSTICS v_probe = MESSAGE_TEXT;
    END;
    PERFORM 'PRAGMA:ENABLE:CHECK';
    IF v_probe = timers._in_transaction_block_message() THEN
        RAISE EXCEPTION 'CALL timers.advance_test_clock() cannot be used inside a transaction block: it commits each step so that the runner can fire it'
            USING ERRCODE = '25001';
    END IF;
    PERFORM timers._require_admin('advance a test clock');
    LOOP
        IF NOT v_first THEN
            PERFORM timers._ticket();  -- each step commits: a new ticket for each
        END IF;
        v_step := timers._clock_step(current_user, advance_test_clock.name, advance_test_clock."to", v_first);
        v_first := false;
        COMMIT;
        EXIT WHEN (v_step->>'done')::boolean;
        v_at := (v_step->>'at')::timestamptz;
        PERFORM timers._clock_wait(advance_test_clock.name, v_at, (v_step->>'owed')::integer);
        v_fired := v_fired + (v_step->>'owed')::bigint;
        IF advance_test_clock.redeliver THEN
            v_replayed := v_replayed + timers._clock_redeliver(advance_test_clock.name, v_at);
            COMMIT;
        END IF;
    END LOOP;
    IF NOT (v_step->>'runner')::boolean THEN
        RAISE NOTICE 'no runner serves database %: test clock ''%'' only moved to %; the due times it passed were missed, and the next runner applies the catch-up rules',
            current_database(), advance_test_clock.name, v_step->>'now';
    END IF;
    result := jsonb_build_object('test_clock', advance_test_clock.name, 'now', v_step->>'now',
        'fired', v_fired, 'runner', (v_step->>'runner')::boolean, 'replayed', v_replayed);
END
$$;

COMMENT ON FUNCTION timers._clock_wait(text, timestamptz, integer) IS
    'The wait of timers.advance_test_clock at one stop: until the runner has fired every due time of the clock at or before p_at, napping for half the time the rest should take at the pace seen (1 to 50 ms); 57014 after 60 s.';
COMMENT ON PROCEDURE timers.advance_test_clock(text, timestamptz, boolean, jsonb) IS
    'Move a test clock forward to "to", stopping at every due time of its timers so the runner fires each (returns when they have committed); with no runner up it only moves the clock (a NOTICE says so), which simulates downtime. Backward: test_clock_backward (22023). redeliver => true offers each fired due time once more, which must answer it ran already. Needs pgtimers_admin.';

-- ---------------------------------------------------------------------------
-- Rights (as their siblings in 0005: _clock_owed, advance_test_clock)
-- ---------------------------------------------------------------------------
REVOKE ALL ON FUNCTION timers._clock_wait(text, timestamptz, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION timers._clock_wait(text, timestamptz, integer) TO pgtimers_admin;
REVOKE ALL ON PROCEDURE timers.advance_test_clock(text, timestamptz, boolean, jsonb) FROM PUBLIC;
GRANT EXECUTE ON PROCEDURE timers.advance_test_clock(text, timestamptz, boolean, jsonb) TO pgtimers_admin;
