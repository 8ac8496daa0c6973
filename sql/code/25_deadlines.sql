-- pgtimers code: deadlines. A timer saved with deadline => d promises a successful commit
-- of each due time within d after it was due; a due time without one raises one
-- deadline_missed event (docs/running.md, "Deadlines").
--
-- Each timer's row keeps deadline_due_at: due times at or before it are settled, met or
-- missed, so none is told twice. A due time is settled when its run is recorded (met,
-- or missed: it failed for good, or committed too late), when it is skipped (missed),
-- and, while it has no outcome yet (still running, waiting for a retry, or no runner
-- took it), by timers._deadline_check once its deadline has passed.
--
-- Repeatable: applied whole on every install and upgrade, after the versioned
-- migrations (docs/design.md). Each object here is defined in this file only.

-- Say that the due times p_first .. p_last of timer t (p_count of them, all unsettled)
-- missed the deadline (p_why: failed, skipped, running, unserved): counted in the
-- timer's row, settled, and one deadline_missed event.
CREATE OR REPLACE FUNCTION timers._deadline_missed(
    t timers.timers, p_first timestamptz, p_last timestamptz, p_count bigint, p_why text)
    RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    UPDATE timers.timers
       SET deadline_missed = deadline_missed + p_count,
           deadline_missed_at = coalesce(timers._now(t.test_clock), now()),
           deadline_due_at = greatest(deadline_due_at, p_last)
     WHERE id = t.id;
    PERFORM timers._event('deadline_missed', t.name, p_first, NULL, '', '', jsonb_build_object(
        'deadline', t.deadline::text, 'why', p_why, 'count', p_count, 'last', timers._iso(p_last)));
END
$$;

-- The due times of timer t from p_first to p_last that are not settled yet: how many,
-- the first and the last of them (NULL: none).
CREATE OR REPLACE FUNCTION timers._deadline_unsettled(
    t timers.timers, p_first timestamptz, p_last timestamptz, OUT n bigint, OUT first_due timestamptz,
    OUT last_due timestamptz)
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    v_settled timestamptz := (SELECT x.deadline_due_at FROM timers.timers x WHERE x.id = t.id);
    w record;
BEGIN
    n := 0;
    IF p_first IS NULL OR p_last < p_first OR (v_settled IS NOT NULL AND p_last <= v_settled) THEN
        RETURN;
    END IF;
    IF v_settled IS NULL OR p_first > v_settled THEN
        first_due := p_first;
    ELSE
        first_due := timers._plan(t, v_settled);
    END IF;
    IF first_due IS NULL OR first_due > p_last THEN
        first_due := NULL;
        RETURN;
    END IF;
    IF first_due = p_last THEN
        n := 1;
        last_due := first_due;
        RETURN;
    END IF;
    w := timers._walk_dues(t, first_due, p_last);
    n := w.n;
    last_due := w.last_due;
END
$$;

-- An attempt at due time p_due of timer t (row locked by the caller) was recorded: its
-- ok, whether it is the due time's final outcome (no retry follows), its attempt number,
-- when it started late by p_late_ms, and when it committed (p_at). Settles the due time:
-- met when it went well in time, else missed; a failure followed by a retry settles
-- nothing yet.
CREATE OR REPLACE FUNCTION timers._deadline_recorded(
    t timers.timers, p_due timestamptz, p_ok boolean, p_final boolean, p_attempt integer,
    p_late_ms bigint, p_at timestamptz) RETURNS void
    LANGUAGE plpgsql
    AS $$
DECLARE
    u record;
BEGIN
    IF p_due IS NULL OR NOT (p_ok OR p_final) THEN
        RETURN;
    END IF;
    u := timers._deadline_unsettled(t, p_due, p_due);
    IF u.n = 0 THEN
        RETURN;  -- told already (timers._deadline_check): still running, or waiting for a retry
    END IF;
    IF NOT p_ok THEN
        PERFORM timers._deadline_missed(t, p_due, p_due, 1, 'failed');
    ELSIF p_at > p_due + t.deadline THEN
        PERFORM timers._deadline_missed(t, p_due, p_due, 1, CASE
            WHEN p_attempt > 1 THEN 'failed'
            WHEN p_late_ms > timers._ms(t.deadline) THEN 'unserved'
            ELSE 'running' END);
    ELSE
        UPDATE timers.timers SET deadline_due_at = greatest(deadline_due_at, p_due) WHERE id = t.id;
    END IF;
END
$$;

-- Due times p_first .. p_last of timer t (p_count of them; row locked by the caller) were
-- skipped: those not settled yet missed the deadline.
CREATE OR REPLACE FUNCTION timers._deadline_skipped(
    t timers.timers, p_first timestamptz, p_last timestamptz, p_count bigint) RETURNS void
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_settled timestamptz := (SELECT x.deadline_due_at FROM timers.timers x WHERE x.id = t.id);
    u record;
BEGIN
    IF v_settled IS NULL OR v_settled < p_first THEN
        -- none settled: the caller counted them (no second walk of a long downtime)
        PERFORM timers._deadline_missed(t, p_first, p_last, p_count, 'skipped');
        RETURN;
    END IF;
    u := timers._deadline_unsettled(t, p_first, p_last);
    IF u.n > 0 THEN
        PERFORM timers._deadline_missed(t, u.first_due, u.last_due, u.n, 'skipped');
    END IF;
END
$$;

-- The due time of timer t that is under way, with no outcome yet, and why: an autonomous
-- attempt running (an atomic run holds the row, which timers._deadline_check skips), or
-- a retry waited for. NULL: none.
CREATE OR REPLACE FUNCTION timers._deadline_open(t timers.timers, OUT due timestamptz, OUT why text)
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    IF t.autonomous THEN
        SELECT a.due_at, 'running' INTO due, why
          FROM timers.autonomous_runs a WHERE a.timer_id = t.id AND a.source <> 'request';
        IF due IS NOT NULL THEN
            RETURN;
        END IF;
    END IF;
    IF t.retry_due_at IS NOT NULL THEN
        due := t.retry_due_at;
        why := 'failed';
    END IF;
END
$$;

-- Tell the deadlines that have passed with no outcome: for every timer with a deadline
-- (not being run by an atomic run, whose end settles it), a due time under way or
-- waiting for its retry, and the due times no runner has taken (or that wait behind a
-- run under way), whose deadline has passed by the timer's clock, each get one
-- deadline_missed event. Called by every runner's heartbeat and by the console and GET
-- /metrics of an administrator, so a deadline is told even while no runner serves the
-- database. Returns how many events it raised.
CREATE OR REPLACE FUNCTION timers._deadline_check() RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    t timers.timers;
    o record;
    u record;
    v_upto timestamptz;
    v_told integer := 0;
BEGIN
    IF current_setting('transaction_read_only')::boolean THEN
        RETURN 0;  -- a standby's console: the primary's runners and console tell them
    END IF;
    FOR t IN
        SELECT * FROM timers.timers x
         WHERE x.deadline IS NOT NULL AND x.enabled
         ORDER BY x.id
           FOR UPDATE SKIP LOCKED
    LOOP
        v_upto := coalesce(timers._now(t.test_clock), now()) - t.deadline;
        o := timers._deadline_open(t);
        IF o.due IS NOT NULL AND o.due <= v_upto THEN
            u := timers._deadline_unsettled(t, o.due, o.due);
            IF u.n > 0 THEN
                PERFORM timers._deadline_missed(t, u.first_due, u.last_due, u.n, o.why);
                v_told := v_told + 1;
            END IF;
        END IF;
        IF coalesce(t.catch_up_due_at, t.next_due_at) <= v_upto THEN
            u := timers._deadline_unsettled(t, coalesce(t.catch_up_due_at, t.next_due_at), v_upto);
            IF u.n > 0 THEN
                PERFORM timers._deadline_missed(t, u.first_due, u.last_due, u.n,
                    CASE WHEN o.why = 'running' THEN 'running' ELSE 'unserved' END);
                v_told := v_told + 1;
            END IF;
        END IF;
    END LOOP;
    RETURN v_told;
END
$$;

-- Check a deadline option of timers.save: NULL (none), or more than 0 and at most a year.
CREATE OR REPLACE FUNCTION timers._check_deadline(p_deadline interval) RETURNS void
    LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    -- by its length in seconds: interval '1 year' compares as 360 days, '365 days' is less
    IF p_deadline IS NOT NULL
       AND (extract(epoch FROM p_deadline) <= 0
            OR extract(epoch FROM p_deadline) > extract(epoch FROM interval '1 year')) THEN
        RAISE EXCEPTION 'bad deadline %: use more than 0 and at most 1 year, for example ''15 minutes'', or NULL (no deadline)',
            quote_literal(p_deadline::text) USING ERRCODE = '22023';
    END IF;
END
$$;

REVOKE ALL ON FUNCTION
    timers._deadline_missed(timers.timers,timestamp with time zone,timestamp with time zone,bigint,text),
    timers._deadline_unsettled(timers.timers,timestamp with time zone,timestamp with time zone),
    timers._deadline_recorded(timers.timers,timestamp with time zone,boolean,boolean,integer,bigint,timestamp with time zone),
    timers._deadline_skipped(timers.timers,timestamp with time zone,timestamp with time zone,bigint),
    timers._deadline_open(timers.timers),
    timers._deadline_check(),
    timers._check_deadline(interval)
    FROM PUBLIC, pgtimers_reader, pgtimers_admin, pgtimers_runner;
GRANT EXECUTE ON FUNCTION
    timers._deadline_missed(timers.timers,timestamp with time zone,timestamp with time zone,bigint,text),
    timers._deadline_unsettled(timers.timers,timestamp with time zone,timestamp with time zone),
    timers._deadline_recorded(timers.timers,timestamp with time zone,boolean,boolean,integer,bigint,timestamp with time zone),
    timers._deadline_skipped(timers.timers,timestamp with time zone,timestamp with time zone,bigint)
    TO pgtimers_runner, pgtimers_admin;
GRANT EXECUTE ON FUNCTION
    timers._deadline_open(timers.timers),
    timers._deadline_check()
    TO pgtimers_runner, pgtimers_admin;
GRANT EXECUTE ON FUNCTION
    timers._check_deadline(interval)
    TO pgtimers_admin;
