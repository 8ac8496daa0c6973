-- pgtimers code: test clocks: create, advance, delete.
--
-- Repeatable: applied whole on every install and upgrade, after the versioned
-- migrations (docs/design.md). Each object here is defined in this file only.

-- Raise P0002 for a test clock name that is not there.
CREATE OR REPLACE FUNCTION timers._no_such_test_clock(p_name text) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    RAISE EXCEPTION 'there is no test clock % in database %', timers._quoted(p_name), current_database()
        USING ERRCODE = 'P0002';
END
$$;

-- The body of timers.create_test_clock.
CREATE OR REPLACE FUNCTION timers._create_test_clock(p_actor name, p_name text, p_at timestamptz)
    RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM timers._take_ticket(p_actor, 'create a test clock');
    IF p_name IS NULL OR p_name !~ '^[A-Za-z0-9_-]{1,64}$' THEN
        RAISE EXCEPTION 'bad test clock name %: use 1 to 64 letters, digits, _ and -', timers._quoted(p_name)
            USING ERRCODE = '22023';
    END IF;
    IF p_at IS NULL THEN
        RAISE EXCEPTION 'frozen_at must be a time, not NULL' USING ERRCODE = '22004';
    END IF;
    PERFORM timers._check_time('frozen_at', p_at);
    IF EXISTS (SELECT 1 FROM timers.test_clocks WHERE lower(name) = lower(p_name) COLLATE "default") THEN
        RAISE EXCEPTION 'test clock ''%'' exists already', p_name USING ERRCODE = '42710';
    END IF;
    INSERT INTO timers.test_clocks (name, now, created_by) VALUES (p_name, p_at, p_actor);
    PERFORM timers._audit(p_actor, 'create_test_clock', p_name, jsonb_build_object('frozen_at', p_at));
    RETURN jsonb_build_object('name', p_name, 'now', timers._iso(p_at));
END
$$;

CREATE OR REPLACE FUNCTION timers.create_test_clock(name text, frozen_at timestamptz DEFAULT now())
    RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM timers._require_admin('create a test clock');
    RETURN timers._create_test_clock(current_user, create_test_clock.name, create_test_clock.frozen_at);
END
$$;

COMMENT ON FUNCTION timers.create_test_clock(text, timestamptz) IS
    'Make a test clock frozen at frozen_at; timers saved with test_clock => name live on its time. Returns {name, now}. Needs pgtimers_admin.';

-- One step of an advance: move the clock to its next owed due time (or to
-- p_to when none is owed, or when no runner is up: then the due times it
-- passes are missed, as in downtime). Returns {done, at, owed, runner, now}.
CREATE OR REPLACE FUNCTION timers._clock_step(p_actor name, p_name text, p_to timestamptz, p_first boolean)
    RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    -- index scans whatever the statistics say (a table that grew since its last
    -- ANALYZE must not make every claim a scan and sort of all that is due; no JIT)
    SET enable_seqscan = off SET enable_bitmapscan = off SET jit = off
    AS $$
DECLARE
    c timers.test_clocks;
    v_runner boolean := timers._live_runners() > 0;
    v_next timestamptz;
    v_at timestamptz;
    v_owed integer;
BEGIN
    PERFORM timers._take_ticket(p_actor, 'advance a test clock');
    IF NOT pg_has_role(p_actor, timers._role('admin'), 'MEMBER') THEN
        RAISE EXCEPTION 'permission denied to advance a test clock: it needs the role %', timers._role('admin')
            USING ERRCODE = '42501';
    END IF;
    SELECT * INTO c FROM timers.test_clocks WHERE name = p_name FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM timers._no_such_test_clock(p_name);
    END IF;
    PERFORM timers._check_time('"to"', p_to);
    IF p_to IS NULL OR p_to < c.now THEN
        RAISE EXCEPTION 'test_clock_backward: test clock ''%'' is at %, and % is before it; a test clock only moves forward',
            p_name, timers._iso(c.now), coalesce(timers._iso(p_to), 'NULL')
            USING ERRCODE = '22023',
                  HINT = format('Make a new clock there: SELECT timers.create_test_clock(%L, %L);',
                                p_name || '_2', timers._iso(p_to));
    END IF;
    IF p_first THEN
        PERFORM timers._audit(p_actor, 'advance_test_clock', p_name, jsonb_build_object(
            'from', timers._iso(c.now), 'to', timers._iso(p_to), 'runner', v_runner));
    END IF;
    IF v_runner THEN
        v_next := least(
            (SELECT min(t.fire_at) FROM timers.timers t
              WHERE t.test_clock = c.name AND t.fire_at IS NOT NULL AND t.fire_at <= p_to),
            (SELECT min(k.owed_at) FROM timers.keyed_timers k
              WHERE k.test_clock = c.name AND k.status = 'armed' AND k.owed_at <= p_to));
    END IF;
    IF v_next IS NULL THEN
        UPDATE timers.test_clocks SET now = p_to WHERE name = c.name;
        RETURN jsonb_build_object('done', true, 'runner', v_runner, 'now', timers._iso(p_to), 'owed', 0);
    END IF;
    v_at := greatest(v_next, c.now);
    UPDATE timers.test_clocks SET now = v_at WHERE name = c.name;
    v_owed := timers._clock_owed(c.name, v_at);
    PERFORM timers._notify('advance_test_clock', c.name);
    RETURN jsonb_build_object('done', false, 'runner', true, 'at', v_at, 'now', timers._iso(v_at), 'owed', v_owed);
END
$$;

-- How many timers (repeating and keyed) of a clock still owe a fire (a due time moved
-- by its jitter, a retry) at or before p_at.
CREATE OR REPLACE FUNCTION timers._clock_owed(p_name text, p_at timestamptz) RETURNS integer
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    -- index scans whatever the statistics say (a table that grew since its last
    -- ANALYZE must not make every claim a scan and sort of all that is due; no JIT)
    SET enable_seqscan = off SET enable_bitmapscan = off SET jit = off
    AS $$
BEGIN
    RETURN ((SELECT count(*) FROM timers.timers t
              WHERE t.test_clock = p_name AND t.fire_at IS NOT NULL AND t.fire_at <= p_at)
          + (SELECT count(*) FROM timers.keyed_timers k
              WHERE k.test_clock = p_name AND k.status = 'armed' AND k.owed_at <= p_at))::integer;
END
$$;

-- Redeliver: offer every due time fired at p_at once more, and every keyed
-- timer fired then; each must answer that it has run already.
CREATE OR REPLACE FUNCTION timers._clock_redeliver(p_name text, p_at timestamptz) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_id bigint;
    v_due timestamptz;
    k record;
    r jsonb;
    v_replayed integer := 0;
BEGIN
    -- on a test clock a run's last_run_at is the clock's time it fired at
    FOR v_id, v_due IN
        SELECT t.id, t.last_due_at FROM timers.timers t WHERE t.test_clock = p_name AND t.last_run_at = p_at
    LOOP
        IF timers._run_due(v_id, v_due, 'redeliver') IS NULL THEN
            v_replayed := v_replayed + 1;
        ELSE
            RAISE EXCEPTION 'due time % of timer % ran twice', timers._iso(v_due), v_id USING ERRCODE = 'XX000';
        END IF;
    END LOOP;
    FOR k IN
        SELECT x.id, x.key, x.owed_at FROM timers.keyed_timers x
         WHERE x.test_clock = p_name AND x.status = 'fired' AND x.fired_at = p_at
         ORDER BY x.owed_at, x.place, x.key
    LOOP
        r := timers._keyed_fire(k.id, k.owed_at, 'redeliver');
        IF r IS NOT NULL AND (r->>'replayed')::boolean THEN
            v_replayed := v_replayed + 1;
        ELSE
            RAISE EXCEPTION 'keyed timer % fired twice', k.key USING ERRCODE = 'XX000';
        END IF;
    END LOOP;
    RETURN v_replayed;
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

-- Deleting a clock voids its timers: each repeating one's next due time is skipped
-- ("test clock 'X' was deleted") and it expires with no next due time; keyed ones
-- still armed or held become void (by test_clock_deleted).
CREATE OR REPLACE FUNCTION timers._delete_test_clock(p_actor name, p_name text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    c timers.test_clocks;
    t timers.timers;
    k timers.keyed_timers;
    v_reason text;
    v_voided integer := 0;
BEGIN
    PERFORM timers._take_ticket(p_actor, 'delete a test clock');
    SELECT * INTO c FROM timers.test_clocks WHERE lower(name) = lower(p_name) FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM timers._no_such_test_clock(p_name);
    END IF;
    v_reason := format('test clock ''%s'' was deleted: the timer is void', c.name);
    FOR t IN SELECT * FROM timers.timers WHERE test_clock = c.name ORDER BY id FOR UPDATE LOOP
        IF t.next_due_at IS NOT NULL THEN
            PERFORM timers._record_skips(t, ARRAY[t.next_due_at], 1, t.next_due_at, t.next_due_at, v_reason, '');
        END IF;
        UPDATE timers.timers
           SET next_due_at = NULL, catch_up_due_at = NULL, expired = true,
               retry_due_at = NULL, retry_attempt = NULL, retry_at = NULL
         WHERE id = t.id;
        v_voided := v_voided + 1;
    END LOOP;
    FOR k IN
        SELECT * FROM timers.keyed_timers x
         WHERE x.test_clock = c.name AND x.status IN ('armed', 'held')
         ORDER BY x.owed_at, x.place, x.key
           FOR UPDATE
    LOOP
        UPDATE timers.keyed_timers SET status = 'void', cause = 'test_clock_deleted', updated_at = now()
         WHERE id = k.id;
        PERFORM timers._keyed_event(k, 'void', 'test_clock_deleted', p_actor,
                                    jsonb_build_object('reason', v_reason, 'was', k.status));
        v_voided := v_voided + 1;
    END LOOP;
    DELETE FROM timers.test_clocks WHERE name = c.name;
    PERFORM timers._audit(p_actor, 'delete_test_clock', c.name, jsonb_build_object('voided', v_voided));
    PERFORM timers._notify('delete_test_clock', c.name);
    RETURN jsonb_build_object('deleted', true, 'voided', v_voided);
END
$$;

CREATE OR REPLACE FUNCTION timers.delete_test_clock(name text) RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM timers._require_admin('delete a test clock');
    RETURN timers._delete_test_clock(current_user, delete_test_clock.name);
END
$$;

COMMENT ON FUNCTION timers.delete_test_clock(text) IS
    'Delete a test clock and void its timers (expired, no next due time, the due time they owed skipped with the reason). Needs pgtimers_admin.';

-- Wait until no timer of the clock owes a due time at or before p_at (the
-- runner has fired them; p_owed of them were owed when the stop began).
-- Raises 57014 after 60 seconds. VOLATILE: each look sees what has committed.
CREATE OR REPLACE FUNCTION timers._clock_wait(p_name text, p_at timestamptz, p_owed integer) RETURNS void
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    v_deadline timestamptz := clock_timestamp() + interval '60 seconds';
    v_left integer;
    v_first_seen timestamptz;
    v_first_left integer;
    v_nap double precision := 0.001;
BEGIN
    PERFORM timers._ring();  -- a parked runner: come back now
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

-- Whether the advance has reached its end.
CREATE OR REPLACE FUNCTION timers._advance_done(p_state jsonb) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    RETURN coalesce((p_state->'step'->>'done')::boolean, true);
END
$$;

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

-- A test clock has a keyed fire lock from its first to its last day.
CREATE OR REPLACE FUNCTION timers._clock_fire_lock() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO timers.locks (name, note)
        VALUES ('keyed_fire:' || NEW.name, 'one keyed fire at a time on this test clock: tick order');
        RETURN NEW;
    END IF;
    DELETE FROM timers.locks WHERE name = 'keyed_fire:' || OLD.name;
    RETURN OLD;
END
$$;

CREATE OR REPLACE TRIGGER fire_lock AFTER INSERT OR DELETE ON timers.test_clocks
    FOR EACH ROW EXECUTE FUNCTION timers._clock_fire_lock();

-- ---------------------------------------------------------------------------
-- Rights
-- ---------------------------------------------------------------------------
REVOKE ALL ON FUNCTION
    timers._no_such_test_clock(text),
    timers._create_test_clock(name,text,timestamp with time zone),
    timers.create_test_clock(text,timestamp with time zone),
    timers._clock_step(name,text,timestamp with time zone,boolean),
    timers._clock_owed(text,timestamp with time zone),
    timers._clock_redeliver(text,timestamp with time zone),
    timers._delete_test_clock(name,text),
    timers.delete_test_clock(text),
    timers._clock_wait(text,timestamp with time zone,integer),
    timers._advance_start(text,timestamp with time zone,boolean),
    timers._advance_step(jsonb),
    timers._advance_done(jsonb),
    timers._advance_wait(jsonb),
    timers._advance_result(jsonb),
    timers._clock_fire_lock()
    FROM PUBLIC, pgtimers_reader, pgtimers_admin, pgtimers_runner;
REVOKE ALL ON PROCEDURE
    timers.advance_test_clock(text,timestamp with time zone,boolean,jsonb)
    FROM PUBLIC, pgtimers_reader, pgtimers_admin, pgtimers_runner;
GRANT EXECUTE ON FUNCTION
    timers._no_such_test_clock(text)
    TO PUBLIC;
GRANT EXECUTE ON FUNCTION
    timers._create_test_clock(name,text,timestamp with time zone),
    timers.create_test_clock(text,timestamp with time zone),
    timers._clock_step(name,text,timestamp with time zone,boolean),
    timers._clock_owed(text,timestamp with time zone),
    timers._clock_redeliver(text,timestamp with time zone),
    timers._delete_test_clock(name,text),
    timers.delete_test_clock(text),
    timers._clock_wait(text,timestamp with time zone,integer),
    timers._advance_start(text,timestamp with time zone,boolean),
    timers._advance_step(jsonb),
    timers._advance_done(jsonb),
    timers._advance_wait(jsonb),
    timers._advance_result(jsonb)
    TO pgtimers_admin;
GRANT EXECUTE ON PROCEDURE
    timers.advance_test_clock(text,timestamp with time zone,boolean,jsonb)
    TO pgtimers_admin;
