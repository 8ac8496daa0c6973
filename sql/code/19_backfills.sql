-- pgtimers code: backfills: run a timer's past due times, oldest first, once each.
--
-- Repeatable: applied whole on every install and upgrade, after the versioned
-- migrations (docs/design.md). Each object here is defined in this file only.

-- The due times d with p_from <= d < p_to of timer t's schedule (its schedule string in
-- its zone, counted from its start_at; whether it is on, expired, past end_at or
-- max_runs does not matter): how many, up to p_cap + 1, and the first.
CREATE OR REPLACE FUNCTION timers._backfill_dues(
    t timers.timers, p_from timestamptz, p_to timestamptz, p_cap integer,
    OUT n integer, OUT first_due timestamptz)
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    v_at timestamptz := timers._next_due(t.spec, p_from - interval '1 microsecond', t.zone, t.start_at);
BEGIN
    n := 0;
    first_due := v_at;
    WHILE v_at IS NOT NULL AND v_at < p_to AND n <= p_cap LOOP
        n := n + 1;
        v_at := timers._next_due(t.spec, v_at, t.zone, t.start_at);
    END LOOP;
    IF n = 0 THEN
        first_due := NULL;
    END IF;
END
$$;

-- The body of timers.backfill.
CREATE OR REPLACE FUNCTION timers._backfill(p_actor name, p_name text, p_from timestamptz, p_to timestamptz)
    RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    -- the name (or key) index whatever the statistics say: a table analyzed while empty
    -- would make each look-up a scan, and a bulk save quadratic
    SET enable_seqscan = off SET jit = off
    AS $$
DECLARE
    c_cap constant integer := 10000;
    t timers.timers;
    d record;
    v_now timestamptz;
    v_id bigint;
BEGIN
    PERFORM timers._take_ticket(p_actor, 'backfill a timer');
    IF NOT pg_has_role(p_actor, timers._role('admin'), 'MEMBER') THEN
        RAISE EXCEPTION 'permission denied to backfill a timer: it needs the role %, and role "%" is not a member', timers._role('admin'), p_actor
            USING ERRCODE = '42501';
    END IF;
    IF p_from IS NULL OR p_to IS NULL THEN
        RAISE EXCEPTION 'from_at and to_at must be times, not NULL' USING ERRCODE = '22004';
    END IF;
    PERFORM timers._check_time('from_at', p_from);
    PERFORM timers._check_time('to_at', p_to);
    IF p_to <= p_from THEN
        RAISE EXCEPTION 'to_at % is not after from_at %: a backfill runs the due times from_at <= d < to_at',
            timers._iso(p_to), timers._iso(p_from) USING ERRCODE = '22023';
    END IF;
    SELECT * INTO t FROM timers.timers x WHERE lower(x.name) = lower(p_name) COLLATE "default";
    IF NOT FOUND THEN
        PERFORM timers._no_such_timer(p_name);
    END IF;
    IF t.autonomous THEN
        RAISE EXCEPTION 'timer ''%'' is autonomous: a backfill runs each due time in one transaction of the runner, and an autonomous timer''s SQL runs outside one', t.name
            USING ERRCODE = '0A000',
                  HINT = 'Run the due times you need with CALL timers.run, or backfill an atomic timer with the same SQL.';
    END IF;
    v_now := timers._now(t.test_clock);
    IF p_to > v_now THEN
        RAISE EXCEPTION 'to_at % is after now (% on the timer''s clock): a backfill runs past due times only; the schedule runs the ones to come',
            timers._iso(p_to), timers._iso(v_now) USING ERRCODE = '22023';
    END IF;
    d := timers._backfill_dues(t, p_from, p_to, c_cap);
    IF d.n = 0 THEN
        RAISE EXCEPTION 'timer ''%'' has no due time from % to %', t.name, timers._iso(p_from), timers._iso(p_to)
            USING ERRCODE = '22023',
                  HINT = format('See them with: SELECT * FROM timers.next_runs(%L, 10, after => %L);',
                                t.schedule, timers._iso(p_from));
    END IF;
    IF d.n > c_cap THEN
        RAISE EXCEPTION 'timer ''%'' has more than % due times from % to %: a backfill runs at most %; split the range',
            t.name, c_cap, timers._iso(p_from), timers._iso(p_to), c_cap USING ERRCODE = '54000';
    END IF;
    INSERT INTO timers.backfill_jobs (timer_id, timer, from_at, to_at, total, next_at, requested_by)
    VALUES (t.id, t.name, p_from, p_to, d.n, d.first_due, p_actor)
    RETURNING id INTO v_id;
    PERFORM timers._audit(p_actor, 'backfill', t.name, jsonb_build_object(
        'backfill', v_id, 'from_at', timers._iso(p_from), 'to_at', timers._iso(p_to), 'total', d.n));
    PERFORM timers._notify('backfill', t.name);
    RETURN v_id;
END
$$;

CREATE OR REPLACE FUNCTION timers.backfill(name text, from_at timestamptz, to_at timestamptz) RETURNS bigint
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM timers._require_admin('backfill a timer');
    RETURN timers._backfill(current_user, backfill.name, backfill.from_at, backfill.to_at);
END
$$;

COMMENT ON FUNCTION timers.backfill(text, timestamptz, timestamptz) IS
    'Run every due time d of a timer''s schedule with from_at <= d < to_at (past ones, at most 10000), oldest first, one at a time, each once, with pgtimers.due_at = d; also for a timer that is off or expired. Returns the backfill''s id (view timers.backfills). Needs pgtimers_admin.';

CREATE OR REPLACE VIEW timers.backfills AS
SELECT b.id,
       b.timer,
       b.from_at,
       b.to_at,
       b.total,
       b.done,
       b.failed,
       b.state,
       b.requested_by,
       b.requested_at,
       b.next_at,
       b.ended_at,
       b.note
  FROM timers.backfill_jobs b;

COMMENT ON VIEW timers.backfills IS
    'Backfills (timers.backfill): total due times, done, failed, state running/done/cancelled, next_at the next one to run.';

-- The body of timers.cancel_backfill: no further due time of the backfill runs (one
-- being run finishes first: this waits for it). Audited.
CREATE OR REPLACE FUNCTION timers._cancel_backfill(p_actor name, p_id bigint) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    b timers.backfill_jobs;
BEGIN
    PERFORM timers._take_ticket(p_actor, 'cancel a backfill');
    IF NOT pg_has_role(p_actor, timers._role('admin'), 'MEMBER') THEN
        RAISE EXCEPTION 'permission denied to cancel a backfill: it needs the role pgtimers_admin'
            USING ERRCODE = '42501';
    END IF;
    UPDATE timers.backfill_jobs
       SET state = 'cancelled', next_at = NULL, ended_at = clock_timestamp(),
           note = format('cancelled by %s', p_actor)
     WHERE id = p_id AND state = 'running'
    RETURNING * INTO b;
    IF FOUND THEN
        PERFORM timers._audit(p_actor, 'cancel_backfill', b.timer, jsonb_build_object(
            'backfill', b.id, 'done', b.done, 'total', b.total));
        PERFORM timers._backfill_ended(b);
    ELSIF NOT EXISTS (SELECT 1 FROM timers.backfill_jobs x WHERE x.id = p_id) THEN
        RAISE EXCEPTION 'there is no backfill % in database %', coalesce(p_id::text, 'NULL'), current_database()
            USING ERRCODE = 'P0002';
    END IF;
    RETURN p_id;
END
$$;

CREATE OR REPLACE FUNCTION timers.cancel_backfill(id bigint) RETURNS timers.backfills
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_id bigint;
    v_row timers.backfills;
BEGIN
    PERFORM timers._require_admin('cancel a backfill');
    v_id := timers._cancel_backfill(current_user, cancel_backfill.id);
    SELECT * INTO v_row FROM timers.backfills b WHERE b.id = v_id;
    RETURN v_row;
END
$$;

COMMENT ON FUNCTION timers.cancel_backfill(bigint) IS
    'Cancel a backfill: no further due time of it runs (one being run finishes first). Returns its timers.backfills row; an ended one is left as it is. Needs pgtimers_admin.';

-- Say that backfill b has ended (done or cancelled): the backfill_done event.
CREATE OR REPLACE FUNCTION timers._backfill_ended(b timers.backfill_jobs) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM timers._event('backfill_done', b.timer, NULL, NULL, b.note, '', jsonb_build_object(
        'backfill', b.id, 'state', b.state, 'total', b.total, 'done', b.done, 'failed', b.failed));
END
$$;

-- End the running backfills of timer p_timer_id (deleted): cancelled, with the reason.
CREATE OR REPLACE FUNCTION timers._end_backfills(p_timer_id bigint, p_why text) RETURNS void
    LANGUAGE plpgsql
    AS $$
DECLARE
    b timers.backfill_jobs;
BEGIN
    FOR b IN
        UPDATE timers.backfill_jobs
           SET state = 'cancelled', next_at = NULL, ended_at = clock_timestamp(), note = p_why
         WHERE timer_id = p_timer_id AND state = 'running'
        RETURNING *
    LOOP
        PERFORM timers._backfill_ended(b);
    END LOOP;
END
$$;

-- ---------------------------------------------------------------------------
-- Rights
-- ---------------------------------------------------------------------------
REVOKE ALL ON FUNCTION
    timers._backfill_dues(timers.timers,timestamp with time zone,timestamp with time zone,integer),
    timers._backfill(name,text,timestamp with time zone,timestamp with time zone),
    timers.backfill(text,timestamp with time zone,timestamp with time zone),
    timers._cancel_backfill(name,bigint),
    timers.cancel_backfill(bigint),
    timers._backfill_ended(timers.backfill_jobs),
    timers._end_backfills(bigint,text)
    FROM PUBLIC, pgtimers_reader, pgtimers_admin, pgtimers_runner;
GRANT EXECUTE ON FUNCTION
    timers.backfill(text,timestamp with time zone,timestamp with time zone),
    timers.cancel_backfill(bigint)
    TO PUBLIC;
GRANT EXECUTE ON FUNCTION
    timers._backfill(name,text,timestamp with time zone,timestamp with time zone),
    timers._cancel_backfill(name,bigint)
    TO pgtimers_admin;
GRANT EXECUTE ON FUNCTION
    timers._backfill_ended(timers.backfill_jobs)
    TO pgtimers_runner;
REVOKE ALL ON timers.backfills FROM PUBLIC, pgtimers_reader, pgtimers_admin, pgtimers_runner;
GRANT SELECT ON timers.backfills TO pgtimers_reader;
