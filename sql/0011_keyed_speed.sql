-- pgtimers 0011: advancing a test clock over many keyed timers, faster.
--
-- An advance stops at every owed time and waits until the runner has fired
-- what is owed there. It polled with naps doubling from 2 ms to 50 ms, so a
-- stop whose fires took 30 ms was noticed up to 30 ms late, at every one of
-- the stops of a year. It now measures the runner's pace at the stop (time per
-- fire since the first fire was seen) and naps for half the time the rest
-- should take at that pace (1 ms to 50 ms; backing off from 1 ms by half again
-- until the runner has started). The wait is its own function, with a pinned
-- search_path: the procedure cannot have one (it COMMITs); the procedure that
-- calls it, a thin shell, is in sql/0013_procedures.sql.
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

COMMENT ON FUNCTION timers._clock_wait(text, timestamptz, integer) IS
    'The wait of timers.advance_test_clock at one stop: until the runner has fired every due time of the clock at or before p_at, napping for half the time the rest should take at the pace seen (1 to 50 ms); 57014 after 60 s.';

-- ---------------------------------------------------------------------------
-- Rights (as their siblings in 0005: _clock_owed, advance_test_clock)
-- ---------------------------------------------------------------------------
REVOKE ALL ON FUNCTION timers._clock_wait(text, timestamptz, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION timers._clock_wait(text, timestamptz, integer) TO pgtimers_admin;
