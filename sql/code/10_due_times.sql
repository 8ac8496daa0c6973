-- pgtimers code: a timer's due times around its runs: the runner's wake-up, the due times
-- walked and skipped, catch-up after a run and after downtime, retries' times, pauses
-- (the fire itself is 10_fire.sql).
--
-- Repeatable: applied whole on every install and upgrade, after the versioned
-- migrations (docs/design.md). Each object here is defined in this file only.

-- When the runner must look next (db_now, wake_at) and the first due time still
-- ahead (next_at): the earliest fire or owed time on the server's clock, or now when
-- a test-clock timer, a keyed timer on one, a backfill, a follower's due time or a run-now
-- request is waiting. Each part
-- reads one index entry. PL/pgSQL, not SQL: its plan is made once per session and
-- kept (a SQL function's is made again on every call, which cost more than running it).
CREATE OR REPLACE FUNCTION timers._next_wake(
    OUT db_now timestamptz, OUT wake_at timestamptz, OUT next_at timestamptz)
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    -- index scans whatever the statistics say (a table that grew since its last
    -- ANALYZE must not make every claim a scan and sort of all that is due; no JIT)
    SET enable_seqscan = off SET enable_bitmapscan = off SET jit = off
    AS $$
BEGIN
        SELECT clock_timestamp(),
            least(
                (SELECT t.fire_at FROM timers.timers t
                  WHERE t.fire_at IS NOT NULL AND t.test_clock IS NULL
                    AND NOT (t.autonomous AND EXISTS (
                        SELECT 1 FROM timers.autonomous_runs o WHERE o.timer_id = t.id))
                  ORDER BY t.fire_at LIMIT 1),
                -- an autonomous run that will never report back: record it now
                (SELECT now() WHERE EXISTS (
                    SELECT 1 FROM timers.autonomous_runs o WHERE NOT timers._autonomous_alive(o))),
                (SELECT now() WHERE EXISTS (
                    SELECT 1 FROM timers.timers t JOIN timers.test_clocks c ON c.name = t.test_clock
                     WHERE t.test_clock IS NOT NULL AND t.fire_at IS NOT NULL
                       AND t.fire_at <= c.now)),
                (SELECT now() WHERE EXISTS (
                    SELECT 1 FROM timers.backfill_jobs b WHERE b.state = 'running')),
                -- a follower's due time its upstream timers released (not behind its retry)
                (SELECT now() WHERE EXISTS (
                    SELECT 1 FROM timers.follow_dues d JOIN timers.timers t ON t.id = d.follower_id
                     WHERE d.state = 'ready' AND t.retry_at IS NULL)),
                (SELECT now() WHERE EXISTS (
                    SELECT 1 FROM timers.run_requests r
                     WHERE r.finished_at IS NULL AND r.requested_at > now() - interval '5 minutes'
                       AND NOT EXISTS (SELECT 1 FROM timers.autonomous_runs o WHERE o.timer_id = r.timer_id))),
                (SELECT k.owed_at FROM timers.keyed_timers k
                  WHERE k.status = 'armed' AND k.test_clock IS NULL
                  ORDER BY k.owed_at, k.place, k.key LIMIT 1),
                (SELECT now() WHERE EXISTS (
                    SELECT 1 FROM timers.keyed_timers k JOIN timers.test_clocks c ON c.name = k.test_clock
                     WHERE k.test_clock IS NOT NULL AND k.status = 'armed' AND k.owed_at <= c.now))),
            least(
                (SELECT t.fire_at FROM timers.timers t
                  WHERE t.fire_at > now() AND t.test_clock IS NULL
                  ORDER BY t.fire_at LIMIT 1),
                (SELECT k.owed_at FROM timers.keyed_timers k
                  WHERE k.status = 'armed' AND k.test_clock IS NULL AND k.owed_at > now()
                  ORDER BY k.owed_at, k.place, k.key LIMIT 1))
          INTO db_now, wake_at, next_at;
END
$$;

-- Record a skip event of a timer (its row locked by the caller): the due times
-- from p_first to p_last, p_count of them (p_dues lists them when few). Counts
-- them, keeps the last and its reason, and writes timers.runs rows.
CREATE OR REPLACE FUNCTION timers._record_skips(
    t timers.timers, p_dues timestamptz[], p_count bigint, p_first timestamptz,
    p_last timestamptz, p_reason text, p_runner text) RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF p_count IS NULL OR p_count < 1 THEN
        RETURN NULL;
    END IF;
    UPDATE timers.timers
       SET skipped = skipped + p_count, last_skip_at = p_last, last_skip_reason = p_reason
     WHERE id = t.id;
    IF p_count <= timers._skip_rows_cap() AND cardinality(p_dues) = p_count THEN
        INSERT INTO timers.runs (timer_id, timer, kind, due_at, reason, runner)
        SELECT t.id, t.name, 'skipped', d, p_reason, p_runner FROM unnest(p_dues) AS d;
    ELSE
        INSERT INTO timers.runs (timer_id, timer, kind, due_at, reason, runner)
        VALUES (t.id, t.name, 'skipped', p_first,
                format('%s due times from %s to %s skipped: %s',
                       p_count, timers._iso(p_first), timers._iso(p_last), p_reason), p_runner);
    END IF;
    PERFORM timers._event('skipped', t.name, p_first, NULL, '', '', jsonb_build_object(
        'count', p_count, 'last', timers._iso(p_last), 'reason', p_reason));
    IF EXISTS (SELECT 1 FROM timers.follows w WHERE w.upstream_id = t.id) THEN
        PERFORM timers._tell_followers_skipped(t, p_dues, p_first, p_last, p_reason);
    END IF;
    IF t.deadline IS NOT NULL THEN
        PERFORM timers._deadline_skipped(t, p_first, p_last, p_count);
    END IF;
    RETURN jsonb_build_object('count', p_count, 'first', timers._iso(p_first),
                              'last', timers._iso(p_last), 'reason', p_reason);
END
$$;

-- Walk a timer's due times from p_from (a due time itself, included) while
-- they are <= p_upto. Returns how many there are, the first and last, the
-- first few of them, and the first due time after p_upto (NULL: none).
CREATE OR REPLACE FUNCTION timers._walk_dues(
    t timers.timers, p_from timestamptz, p_upto timestamptz,
    OUT n bigint, OUT first_due timestamptz, OUT last_due timestamptz,
    OUT before_last timestamptz, OUT dues timestamptz[], OUT next_due timestamptz)
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    v_at timestamptz := p_from;
    v_cap integer := timers._skip_rows_cap();
BEGIN
    n := 0;
    dues := '{}';
    WHILE v_at IS NOT NULL AND v_at <= p_upto LOOP
        n := n + 1;
        IF n = 1 THEN
            first_due := v_at;
        END IF;
        before_last := last_due;
        last_due := v_at;
        IF n <= v_cap THEN
            dues := dues || v_at;
        END IF;
        v_at := timers._plan(t, v_at);
    END LOOP;
    next_due := v_at;
END
$$;

-- Due times missed while nothing could run them (no runner, or the clock set
-- forward), for a timer whose next due time is <= p_gap_end (row locked by the
-- caller). When the latest of them came at or before p_since (a runner was
-- still up then: its run was cut off, or it was busy) the timer is left to the
-- regular rule of _run_due, so a due time whose run died with its runner is redone. catch_up 'skip': all are skipped; 'latest': all but the last are
-- skipped and the last runs (one coalesced run); 'all': each one runs, in
-- order, so nothing changes here; a one-shot always fires late. With a
-- catch_up_window, only a due time less than the window before p_gap_end may run:
-- older ones are skipped, with a reason that names the window, and 'skip' runs the
-- latest one within it, as 'latest' does (docs/running.md, "Catch-up and skips").
CREATE OR REPLACE FUNCTION timers._apply_gap(
    t timers.timers, p_gap_end timestamptz, p_reason text, p_runner text,
    p_since timestamptz DEFAULT NULL) RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_mode text := coalesce(t.catch_up, 'skip');
    w record;
    o record;
    v_next timestamptz;
    v_events jsonb := '[]';
BEGIN
    IF t.next_due_at IS NULL OR t.next_due_at > p_gap_end OR t.spec->>'kind' = 'once'
       OR (v_mode = 'all' AND t.catch_up_window IS NULL) THEN
        RETURN NULL;
    END IF;
    IF t.catch_up_window IS NULL THEN
        -- o: none too old; w: all of them
        o := timers._walk_dues(t, t.next_due_at, '-infinity');
        w := timers._walk_dues(t, t.next_due_at, p_gap_end);
    ELSE
        -- o: those too old to run (at or before the window's start); w: those within it
        o := timers._walk_dues(t, t.next_due_at, p_gap_end - t.catch_up_window);
        w := timers._walk_dues(t, CASE WHEN o.n > 0 THEN o.next_due ELSE t.next_due_at END, p_gap_end);
    END IF;
    IF p_since IS NOT NULL AND coalesce(w.last_due, o.last_due) <= p_since THEN
        RETURN NULL;
    END IF;
    IF o.n > 0 THEN
        v_events := jsonb_build_array(timers._record_skips(t, o.dues, o.n, o.first_due, o.last_due,
            format('%s; older than its catch_up_window (%s)', p_reason, t.catch_up_window),
            p_runner));
    END IF;
    IF w.n = 0 THEN
        -- none may run: the timer goes back on schedule
        v_next := o.next_due;
    ELSIF v_mode = 'all' THEN
        -- each one within the window runs, in order
        v_next := w.first_due;
    ELSIF v_mode = 'latest' OR t.catch_up_window IS NOT NULL THEN
        -- the latest runs: 'latest', and 'skip' with a window (the latest within it)
        IF w.n > 1 THEN
            v_events := v_events || jsonb_build_array(timers._record_skips(
                t, w.dues[1:least(w.n - 1, timers._skip_rows_cap())], w.n - 1, w.first_due,
                w.before_last,
                format('%s; coalesced into the run due at %s', p_reason, timers._iso(w.last_due)),
                p_runner));
        END IF;
        v_next := w.last_due;
    ELSE
        -- skip, without a window
        v_events := jsonb_build_array(timers._record_skips(t, w.dues, w.n, w.first_due, w.last_due,
                                                           p_reason, p_runner));
        v_next := w.next_due;
    END IF;
    IF jsonb_array_length(v_events) = 0 THEN
        RETURN NULL;
    END IF;
    UPDATE timers.timers
       SET next_due_at = v_next, catch_up_due_at = NULL, expired = (v_next IS NULL)
     WHERE id = t.id;
    -- each event names the timer and where it goes on
    RETURN (SELECT jsonb_agg(e || jsonb_build_object('timer', t.name, 'next_due_at', timers._iso(v_next)))
              FROM jsonb_array_elements(v_events) e);
END
$$;

-- The schedule's due time before p_due (timer t's spec, zone and start_at), after
-- p_floor (the timer's origin: earlier due times are not its own; NULL: none); NULL when
-- there is none: a one-shot, the first due time. `every` steps back by its interval (within
-- the local day, for a grid that restarts at midnight); other forms walk forward with
-- timers._next_due from a point at least two of their next gaps back, doubled until it
-- finds one (a weekend, a holiday). A point before a calendar's known range finds none.
CREATE OR REPLACE FUNCTION timers._prev_due(t timers.timers, p_due timestamptz, p_floor timestamptz)
    RETURNS timestamptz
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    v_floor timestamptz := p_floor;
    v_zone text := coalesce(t.zone, 'UTC');
    v_gap interval;
    v_from timestamptz;
    v_at timestamptz;
    v_next timestamptz;
BEGIN
    IF p_due IS NULL OR t.spec->>'kind' IN ('once', 'after') THEN
        RETURN NULL;
    END IF;
    IF t.start_at IS NOT NULL THEN
        -- start_at may be a due time itself
        v_floor := greatest(v_floor, t.start_at - interval '1 microsecond');
    END IF;
    IF t.spec->>'kind' = 'every' THEN
        v_at := p_due - make_interval(secs => (t.spec->>'seconds')::double precision);
        IF t.start_at IS NOT NULL
           OR (v_at AT TIME ZONE v_zone)::date = (p_due AT TIME ZONE v_zone)::date THEN
            RETURN CASE WHEN v_floor IS NULL OR v_at > v_floor THEN v_at END;
        END IF;
        -- the first of a local day: the last step of the day before, by the walk below
    END IF;
    v_gap := greatest(coalesce(timers._next_due(t.spec, p_due, v_zone, t.start_at) - p_due,
                               interval '1 day'), interval '1 second');
    BEGIN
        FOR i IN 1..40 LOOP
            v_gap := v_gap * 2;
            v_from := p_due - v_gap;
            IF v_floor IS NOT NULL AND v_from <= v_floor THEN
                v_from := v_floor;
            END IF;
            v_at := timers._next_due(t.spec, v_from, v_zone, t.start_at);
            IF v_at IS NOT NULL AND v_at < p_due THEN
                LOOP
                    v_next := timers._next_due(t.spec, v_at, v_zone, t.start_at);
                    EXIT WHEN v_next IS NULL OR v_next >= p_due;
                    v_at := v_next;
                END LOOP;
                RETURN v_at;
            END IF;
            EXIT WHEN v_from = v_floor;
        END LOOP;
    EXCEPTION WHEN invalid_parameter_value OR datetime_field_overflow THEN
        -- before a calendar's known range (or time itself): none known
        RETURN NULL;
    END;
    RETURN NULL;
END
$$;

-- Why due times of timer p_timer from p_first on were skipped as late: the next due time
-- had come before a run could start; and, when the runner says why for a while
-- (pgtimers.late, set for the transaction by timers._fire_many: {from, to, what} when the
-- server refused its work, and {timers: {<id>: {from, to, what}}} for each timer it held
-- back after its run waited too long for a lock, timers._yielded) and p_first fell
-- within that while, what it was: the timer's own note first.
CREATE OR REPLACE FUNCTION timers._late_reason(p_first timestamptz, p_timer bigint) RETURNS text
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    v_said text := current_setting('pgtimers.late', true);
    v_late jsonb;
    v_note jsonb;
    v_reason constant text := 'late: the next due time had come before a run could start';
BEGIN
    IF v_said IS NULL OR v_said NOT LIKE '{%' THEN
        RETURN v_reason;
    END IF;
    v_late := v_said::jsonb;
    FOREACH v_note IN ARRAY ARRAY[v_late->'timers'->(p_timer::text), v_late] LOOP
        IF v_note->>'to' IS NOT NULL AND p_first <= (v_note->>'to')::timestamptz THEN
            RETURN format('%s, while %s from %s to %s', v_reason, v_note->>'what',
                          timers._iso((v_note->>'from')::timestamptz),
                          timers._iso((v_note->>'to')::timestamptz));
        END IF;
    END LOOP;
    RETURN v_reason;
END
$$;

-- The seed's rule after a run of due time p_due that started at p_started and
-- ended at p_ended (t.scheduled_runs already counts it; p_n1 is timers._plan(t, p_due)). The next due time n1
-- normally comes after the run ended. When it came during the run, it gets one
-- catch-up run right away if the run took less than one interval (n1 - p_due)
-- and ended before the regular time after n1; otherwise every due time that
-- came during the run is skipped and the timer keeps its regular times.
-- catch_up = 'all' never skips: each due time runs, in order.
CREATE OR REPLACE FUNCTION timers._after_run(
    t timers.timers, p_due timestamptz, p_started timestamptz, p_ended timestamptz,
    p_n1 timestamptz, OUT next_due timestamptz, OUT catch_up boolean, OUT skip_n bigint,
    OUT skip_first timestamptz, OUT skip_last timestamptz, OUT skip_dues timestamptz[])
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    v_n1 timestamptz := p_n1;  -- timers._plan(t, p_due): the caller has it
    v_n2 timestamptz;
    w record;
BEGIN
    catch_up := false;
    skip_n := 0;
    next_due := v_n1;
    IF v_n1 IS NULL OR v_n1 > p_ended OR coalesce(t.catch_up, 'skip') = 'all' THEN
        RETURN;
    END IF;
    v_n2 := timers._plan(t, v_n1);
    IF p_ended - p_started < v_n1 - p_due AND (v_n2 IS NULL OR p_ended < v_n2) THEN
        catch_up := true;
        RETURN;
    END IF;
    w := timers._walk_dues(t, v_n1, p_ended);
    next_due := w.next_due;
    skip_n := w.n;
    skip_first := w.first_due;
    skip_last := w.last_due;
    skip_dues := w.dues;
END
$$;

-- The next attempt of a due time whose attempt p_attempt failed at p_ended: its time
-- (retry_at), or why none is made (given_up); both NULL for a timer without retries.
-- The delay doubles from retry_delay with each attempt, at most an hour; a retry at or
-- after the timer's next due time p_next_due would overlap it and is not made.
CREATE OR REPLACE FUNCTION timers._next_attempt(
    t timers.timers, p_attempt integer, p_ended timestamptz, p_next_due timestamptz,
    OUT retry_at timestamptz, OUT given_up text)
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    IF t.retries < 1 THEN
        RETURN;
    END IF;
    IF p_attempt > t.retries THEN
        given_up := format('retries exhausted: all %s attempts failed', p_attempt);
        RETURN;
    END IF;
    retry_at := p_ended + least(t.retry_delay * power(2, least(p_attempt - 1, 20)), interval '1 hour');
    IF p_next_due IS NOT NULL AND retry_at >= p_next_due THEN
        retry_at := NULL;
        given_up := 'retry would overlap the next due time';
    END IF;
END
$$;

-- Pause timer t after p_streak failed due times in a row (timers._pause) and say so:
-- the paused event.
CREATE OR REPLACE FUNCTION timers._paused(
    t timers.timers, p_due timestamptz, p_attempt integer, p_error text, p_sqlstate text,
    p_streak integer, p_runner text) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM timers._pause(t.id, jsonb_build_object(
        'failed_in_a_row', p_streak, 'pause_after', t.pause_after, 'due_at', timers._iso(p_due),
        'error', p_error, 'runner', p_runner));
    PERFORM timers._event('paused', t.name, p_due, p_attempt, p_error, p_sqlstate,
        jsonb_build_object('failed_in_a_row', p_streak));
END
$$;

-- Turn timer p_id off after failures: for the runner, which may not turn timers on or
-- off itself, and only for a timer whose failures in a row have reached its
-- pause_after. Its next due time goes; audited as 'pause' (p_detail says why).
CREATE OR REPLACE FUNCTION timers._pause(p_id bigint, p_detail jsonb) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_name text;
BEGIN
    UPDATE timers.timers
       SET enabled = false, paused_at = coalesce(timers._now(test_clock), now()), next_due_at = NULL,
           catch_up_due_at = NULL
     WHERE id = p_id AND enabled AND pause_after IS NOT NULL AND fail_streak >= pause_after
    RETURNING name INTO v_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'timer % has not failed pause_after due times in a row', p_id
            USING ERRCODE = '42501';
    END IF;
    PERFORM timers._audit(current_user, 'pause', v_name, p_detail);
END
$$;

-- Apply the gap rules to every armed timer whose next due time is at or
-- before its clock's now; p_since: when a runner was last seen. Returns the
-- skip events.
CREATE OR REPLACE FUNCTION timers._apply_gaps(p_reason text, p_runner text, p_since timestamptz)
    RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    t timers.timers;
    v_event jsonb;
    v_events jsonb := '[]';
BEGIN
    FOR t IN
        SELECT * FROM timers.timers x
         -- the candidates come from the due indexes, never a scan of every timer
         WHERE x.id IN (SELECT d.id FROM timers.timers d
                         WHERE d.test_clock IS NULL AND d.fire_at <= now()
                        UNION ALL
                        SELECT d.id FROM timers.timers d
                          JOIN timers.test_clocks k ON k.name = d.test_clock
                         WHERE d.test_clock IS NOT NULL AND d.fire_at IS NOT NULL
                           AND d.fire_at <= k.now)
           AND x.enabled AND NOT x.expired
           AND NOT (x.autonomous AND EXISTS (SELECT 1 FROM timers.autonomous_runs o WHERE o.timer_id = x.id))
         ORDER BY x.id
           FOR UPDATE OF x SKIP LOCKED
    LOOP
        -- a test clock only moves while a runner is up (or it is downtime): no p_since there
        v_event := timers._apply_gap(t, timers._now(t.test_clock), p_reason, p_runner,
                                     CASE WHEN t.test_clock IS NULL THEN p_since END);
        IF v_event IS NOT NULL THEN
            v_events := v_events || v_event;
        END IF;
    END LOOP;
    RETURN v_events;
END
$$;

-- The server's clock was set forward from p_from to p_to: due times in that
-- span were jumped over; they follow each timer's catch_up like downtime.
CREATE OR REPLACE FUNCTION timers._server_clock_jumped(p_from timestamptz, p_to timestamptz, p_runner text)
    RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    t timers.timers;
    v_event jsonb;
    v_events jsonb := '[]';
BEGIN
    FOR t IN
        SELECT * FROM timers.timers x
         WHERE x.test_clock IS NULL AND x.fire_at > p_from AND x.fire_at <= p_to
           AND x.enabled AND NOT x.expired
           AND NOT (x.autonomous AND EXISTS (SELECT 1 FROM timers.autonomous_runs o WHERE o.timer_id = x.id))
         ORDER BY x.id
           FOR UPDATE SKIP LOCKED
    LOOP
        v_event := timers._apply_gap(t, p_to, 'the clock was set forward', p_runner);
        IF v_event IS NOT NULL THEN
            v_events := v_events || v_event;
        END IF;
    END LOOP;
    RETURN v_events;
END
$$;

-- ---------------------------------------------------------------------------
-- Rights
-- ---------------------------------------------------------------------------
REVOKE ALL ON FUNCTION
    timers._next_wake(),
    timers._record_skips(timers.timers,timestamp with time zone[],bigint,timestamp with time zone,timestamp with time zone,text,text),
    timers._walk_dues(timers.timers,timestamp with time zone,timestamp with time zone),
    timers._apply_gap(timers.timers,timestamp with time zone,text,text,timestamp with time zone),
    timers._prev_due(timers.timers,timestamp with time zone,timestamp with time zone),
    timers._late_reason(timestamp with time zone,bigint),
    timers._after_run(timers.timers,timestamp with time zone,timestamp with time zone,timestamp with time zone,timestamp with time zone),
    timers._next_attempt(timers.timers,integer,timestamp with time zone,timestamp with time zone),
    timers._paused(timers.timers,timestamp with time zone,integer,text,text,integer,text),
    timers._pause(bigint,jsonb),
    timers._apply_gaps(text,text,timestamp with time zone),
    timers._server_clock_jumped(timestamp with time zone,timestamp with time zone,text)
    FROM PUBLIC, pgtimers_reader, pgtimers_admin, pgtimers_runner;
GRANT EXECUTE ON FUNCTION
    timers._next_wake(),
    timers._record_skips(timers.timers,timestamp with time zone[],bigint,timestamp with time zone,timestamp with time zone,text,text),
    timers._walk_dues(timers.timers,timestamp with time zone,timestamp with time zone),
    timers._apply_gap(timers.timers,timestamp with time zone,text,text,timestamp with time zone),
    timers._prev_due(timers.timers,timestamp with time zone,timestamp with time zone),
    timers._late_reason(timestamp with time zone,bigint),
    timers._after_run(timers.timers,timestamp with time zone,timestamp with time zone,timestamp with time zone,timestamp with time zone),
    timers._next_attempt(timers.timers,integer,timestamp with time zone,timestamp with time zone),
    timers._paused(timers.timers,timestamp with time zone,integer,text,text,integer,text),
    timers._pause(bigint,jsonb),
    timers._apply_gaps(text,text,timestamp with time zone),
    timers._server_clock_jumped(timestamp with time zone,timestamp with time zone,text)
    TO pgtimers_runner;
