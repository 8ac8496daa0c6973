-- pgtimers code: the runner's due set and one run in one transaction: skips, catch-up,
-- downtime.
--
-- Repeatable: applied whole on every install and upgrade, after the versioned
-- migrations (docs/design.md). Each object here is defined in this file only.

-- Due timers in the order they fire, without locking: the server's clock for plain
-- timers (index timers_due), each test clock's time for timers on one; at the same fire
-- time the one that ran longest ago (never first), as timers._claim_due. due_at is the
-- due time a run would run (a retry's, else the next), fire_at when it fires.
CREATE OR REPLACE FUNCTION timers._due(p_limit integer)
    RETURNS TABLE (id bigint, due_at timestamptz, test_clock text, fire_at timestamptz)
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
    -- index scans whatever the statistics say (a table that grew since its last
    -- ANALYZE must not make every claim a scan and sort of all that is due; no JIT)
    SET enable_seqscan = off SET enable_bitmapscan = off SET jit = off
    AS $$
        SELECT d.id, d.due_at, d.test_clock, d.fire_at FROM (
            (SELECT t.id, coalesce(t.retry_due_at, t.next_due_at) AS due_at, NULL::text AS test_clock,
                    t.fire_at, t.last_run_at
               FROM timers.timers t
              WHERE t.fire_at <= now() AND t.test_clock IS NULL
              ORDER BY t.fire_at, t.last_run_at NULLS FIRST, t.id
              LIMIT p_limit)
            UNION ALL
            (SELECT t.id, coalesce(t.retry_due_at, t.next_due_at), t.test_clock, t.fire_at,
                    t.last_run_at
               FROM timers.timers t JOIN timers.test_clocks c ON c.name = t.test_clock
              WHERE t.test_clock IS NOT NULL AND t.fire_at IS NOT NULL AND t.fire_at <= c.now
              ORDER BY t.fire_at, t.last_run_at NULLS FIRST, t.id
              LIMIT p_limit)
        ) d
        ORDER BY d.fire_at, d.last_run_at NULLS FIRST, d.id
        LIMIT p_limit
    $$;

-- When the runner must look next (db_now, wake_at) and the first due time still
-- ahead (next_at): the earliest fire or owed time on the server's clock, or now when
-- a test-clock timer, a keyed timer on one, a backfill or a run-now request is waiting. Each part
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
    SET search_path = pg_catalog, pg_temp
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
    SET search_path = pg_catalog, pg_temp
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
    SET search_path = pg_catalog, pg_temp
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
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_floor timestamptz := p_floor;
    v_zone text := coalesce(t.zone, 'UTC');
    v_gap interval;
    v_from timestamptz;
    v_at timestamptz;
    v_next timestamptz;
BEGIN
    IF p_due IS NULL OR t.spec->>'kind' = 'once' THEN
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

-- A run of a timer's SQL (scheduled, retry, backfill or run-now), in a sub-block (a
-- savepoint): an error or the time limit (statement_timeout, set by the runner) rolls
-- back the SQL's effects only. Sets the run context first: pgtimers.timer, due_at,
-- prev_due_at (p_prev, the schedule's due time before; '' for none) and attempt. Lateness counts from p_planned, when the run was meant to start (the due
-- time moved by jitter, or a retry's time). Returns the outcome; its messages are an
-- error's DETAIL and HINT (timers._error_said). When the runner reads them
-- (pgtimers.run_notices on, for the transaction: timers._say_claimed) it first says which
-- run starts, a notice 'pgtimers: run' (timers._run_messages): the NOTICE, INFO and
-- WARNING messages after it are this run's. p_lost: the run ended
-- its session before (timers._run_lost): its outcome, a failure, without running again.
CREATE OR REPLACE FUNCTION timers._execute(
    t timers.timers, p_due timestamptz, p_now timestamptz, p_attempt integer, p_planned timestamptz,
    p_lost jsonb DEFAULT NULL, p_prev timestamptz DEFAULT NULL)
    RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_start timestamptz;
    v_rows bigint := 0;
    v_ok boolean := true;
    v_error text := '';
    v_state text := '';
    v_context text;
    v_detail text;
    v_hint text;
    v_said text := '';
BEGIN
    IF p_lost IS NOT NULL THEN
        RETURN timers._lost_outcome(p_lost) || jsonb_build_object('late_ms',
            CASE WHEN t.test_clock IS NULL THEN timers._ms((p_lost->>'at')::timestamptz - p_planned)
                 ELSE timers._ms(p_now - p_planned) END);
    END IF;
    PERFORM set_config('pgtimers.timer', t.name, true);
    PERFORM set_config('pgtimers.due_at', timers._iso(p_due), true);
    PERFORM set_config('pgtimers.prev_due_at', coalesce(timers._iso(p_prev), ''), true);
    PERFORM set_config('pgtimers.attempt', p_attempt::text, true);
    PERFORM set_config('application_name', left('pgtimers: ' || t.name, 63), true);
    v_start := clock_timestamp();
    IF current_setting('pgtimers.run_notices', true) = 'on' THEN
        -- the run's timers.runs row will have this timer and started_at
        RAISE NOTICE 'pgtimers: run' USING ERRCODE = 'PGT01', DETAIL = t.id || ' ' || v_start;
    END IF;
    BEGIN
        -- a trading timer whose calendar is gone fails: calendar 'X' does not exist
        PERFORM timers._calendar_ready(t.spec, p_due, t.zone);
        v_rows := timers._exec_as(t.owner, t.sql);
    EXCEPTION WHEN query_canceled OR OTHERS THEN
        v_ok := false;
        v_state := SQLSTATE;
        v_error := timers._run_error(SQLSTATE, SQLERRM, t.timeout);
        GET STACKED DIAGNOSTICS v_detail = PG_EXCEPTION_DETAIL, v_hint = PG_EXCEPTION_HINT,
                                v_context = PG_EXCEPTION_CONTEXT;
        v_said := timers._error_said(v_detail, v_hint);
        IF v_state = '55P03' THEN
            -- what waited (the waiter's lock is gone with the error): the statement, or
            -- the tuple and relation of a row lock, from the error's context
            v_error := v_error || timers._lock_waiter(v_context);
        END IF;
        -- a rollback does not let go of session advisory locks the SQL took
        PERFORM pg_catalog.pg_advisory_unlock_all();
    END;
    RETURN jsonb_build_object(
        'ok', v_ok, 'error', v_error, 'sqlstate', v_state, 'rows', coalesce(v_rows, 0),
        'messages', v_said, 'started_at', v_start, 'took_ms', timers._ms(clock_timestamp() - v_start),
        'late_ms', CASE WHEN t.test_clock IS NULL THEN timers._ms(v_start - p_planned)
                        ELSE timers._ms(p_now - p_planned) END);
END
$$;

-- The outcome of a run that ended its session (p_lost: {error, sqlstate, at}, from the
-- runner, timers._run_lost): failed, nothing written, started when it was claimed.
CREATE OR REPLACE FUNCTION timers._lost_outcome(p_lost jsonb) RETURNS jsonb
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
        SELECT jsonb_build_object(
            'ok', false, 'error', timers._cut(p_lost->>'error'), 'sqlstate', p_lost->>'sqlstate',
            'rows', 0, 'messages', '', 'started_at', (p_lost->>'at')::timestamptz,
            'took_ms', greatest(timers._ms(clock_timestamp() - (p_lost->>'at')::timestamptz), 0))
    $$;

-- The clock a run goes by: its timer's clock now; for a run that ended its session
-- (p_lost), the time it was claimed then, so that it is judged as it was (which due time
-- ran, which were skipped), not by how much later the runner could say so.
CREATE OR REPLACE FUNCTION timers._run_clock(t timers.timers, p_lost jsonb) RETURNS timestamptz
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
        SELECT CASE WHEN p_lost IS NULL OR t.test_clock IS NOT NULL THEN timers._now(t.test_clock)
                    ELSE least(timers._now(t.test_clock), (p_lost->>'at')::timestamptz) END
    $$;

-- Why due times of timer p_timer from p_first on were skipped as late: the next due time
-- had come before a run could start; and, when the runner says why for a while
-- (pgtimers.late, set for the transaction by timers._fire_many: {from, to, what} when the
-- server refused its work, and {timers: {<id>: {from, to, what}}} for each timer it held
-- back after its run waited too long for a lock, timers._yielded) and p_first fell
-- within that while, what it was: the timer's own note first.
CREATE OR REPLACE FUNCTION timers._late_reason(p_first timestamptz, p_timer bigint) RETURNS text
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
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

-- A run's lock wait limit (timers._run_due, _run_retry): lock_timeout for the rest of the
-- transaction, 5 s (well under a run's time limit), unless a smaller one is in effect (the
-- session's, the role's). A timer's SQL may set its own as its first statement: SET LOCAL
-- lock_timeout = '30s' (or 0: none). Returns the setting before, which the caller puts back
-- after the run. A run that waits longer yields (timers._yielded; docs/running.md).
CREATE OR REPLACE FUNCTION timers._limit_lock_waits() RETURNS text
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_old text := current_setting('lock_timeout');
BEGIN
    IF v_old = '0' OR v_old::interval > interval '5 seconds' THEN
        PERFORM set_config('lock_timeout', '5s', true);
    END IF;
    RETURN v_old;
END
$$;

-- What a run's SQL waited for when its lock wait ran out, from the error's context
-- (p_context): its own lines, before pgtimers' executor (a row lock's tuple and relation,
-- the statement), as ' (while ...; SQL statement "...")'; '' when the context names
-- nothing (a wait for a table's lock while the statement was being planned).
CREATE OR REPLACE FUNCTION timers._lock_waiter(p_context text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    AS $$
        SELECT coalesce(' (' || timers._cut(nullif(replace(rtrim(substring(
                   coalesce(p_context, '') FROM '^(.*?)(?:PL/pgSQL function timers_exec\.|$)'),
                   E'\n'), E'\n', '; '), '')) || ')', '')
    $$;

-- A scheduled run or retry whose SQL waited for a lock longer than its lock wait limit
-- (SQLSTATE 55P03: lock_timeout, or NOWAIT; timers._limit_lock_waits) yields: it is not an
-- attempt. Its SQL's subtransaction was rolled back and nothing is recorded: the due time
-- stays owed, counts toward no retry or pause_after, and runs later or is skipped by the
-- late rule, with a reason that says it waited for a lock (timers._late_reason). The
-- runner holds the timer back a while (pgtimers/runner/held.py) and goes on to others.
-- p_skips: the skip events of the run so far.
CREATE OR REPLACE FUNCTION timers._yielded(
    t timers.timers, p_kind text, p_due timestamptz, r jsonb, p_skips jsonb) RETURNS jsonb
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
        SELECT jsonb_build_object(
            'timer', t.name, 'timer_id', t.id, 'kind', p_kind, 'due_at', timers._iso(p_due),
            'yielded', 'waited for a lock', 'waited_ms', (r->>'took_ms')::bigint,
            'lock_timeout', current_setting('lock_timeout'), 'error', r->>'error',
            'skipped', p_skips)
    $$;

-- A run's result, marked for the runner when it held the timer back after a run yielded
-- (pgtimers.late names it: timers._late_reason): it ran, so the runner lets it be.
CREATE OR REPLACE FUNCTION timers._ran_after_yield(p_result jsonb, p_timer bigint) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_said text := current_setting('pgtimers.late', true);
BEGIN
    IF v_said LIKE '{%' AND v_said::jsonb->'timers' ? p_timer::text THEN
        RETURN p_result || jsonb_build_object('timer_id', p_timer, 'ran_after_yield', true);
    END IF;
    RETURN p_result;
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
    SET search_path = pg_catalog, pg_temp
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
    SET search_path = pg_catalog, pg_temp
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

-- What an attempt of a due time leaves in the timer's row (a success: final, no streak):
-- whether it is the due time's final outcome, the next attempt's time (retry_at) or why
-- none is made (given_up), the failures in a row, whether they pause the timer, and
-- last_error. p_next_due: the timer's next due time (a retry must come before it).
CREATE OR REPLACE FUNCTION timers._attempt_outcome(
    t timers.timers, p_attempt integer, p_ok boolean, p_error text, p_ended timestamptz,
    p_next_due timestamptz, OUT final boolean, OUT streak integer, OUT pause boolean,
    OUT last_error text, OUT retry_at timestamptz, OUT given_up text)
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    o record;
BEGIN
    IF p_ok THEN
        final := true;
        streak := 0;
        pause := false;
        last_error := '';
        RETURN;
    END IF;
    SELECT n.retry_at, n.given_up INTO retry_at, given_up
      FROM timers._next_attempt(t, p_attempt, p_ended, p_next_due) n;
    o := timers._failed_outcome(t, p_attempt, p_error, retry_at, given_up);
    final := o.final;
    streak := o.streak;
    pause := o.pause;
    last_error := o.last_error;
END
$$;

-- An attempt's record, after its row is written: its timers.runs row (retry_at: the
-- attempt after it, if any; none for a success of a timer that keeps failures only),
-- what its failure led to (timers._announce_failure) or its recovery from one, its
-- deadline, and a change asked for while it ran, which takes effect with it.
CREATE OR REPLACE FUNCTION timers._attempt_recorded(
    t timers.timers, p_kind text, p_due timestamptz, p_attempt integer, r jsonb, p_late bigint,
    p_retry_at timestamptz, p_given_up text, p_paused boolean, p_streak integer, p_runner text)
    RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_ok boolean := (r->>'ok')::boolean;
    v_run bigint;
BEGIN
    IF NOT v_ok OR t.history = 'all' THEN
        INSERT INTO timers.runs (timer_id, timer, kind, due_at, started_at, took_ms, late_ms, ok,
                                 error, rows, runner, attempt, retry_at, messages)
        VALUES (t.id, t.name, p_kind, p_due, (r->>'started_at')::timestamptz, (r->>'took_ms')::bigint,
                p_late, v_ok, r->>'error', (r->>'rows')::bigint, p_runner, p_attempt,
                p_retry_at, coalesce(r->>'messages', ''))
        RETURNING id INTO v_run;
    END IF;
    IF NOT v_ok THEN
        PERFORM timers._announce_failure(t, p_kind, p_due, p_attempt, r, p_retry_at, p_given_up,
                                         p_paused, p_streak, p_runner, v_run);
    ELSIF t.last_ok = false THEN
        PERFORM timers._event('recovered', t.name, p_due, p_attempt, '', '',
            jsonb_build_object('kind', p_kind), v_run);
    END IF;
    IF t.deadline IS NOT NULL THEN
        PERFORM timers._deadline_recorded(t, p_due, v_ok, p_retry_at IS NULL, p_attempt, p_late,
            CASE WHEN t.test_clock IS NULL THEN clock_timestamp() ELSE timers._now(t.test_clock) END);
    END IF;
    IF EXISTS (SELECT 1 FROM timers.pending_changes c WHERE c.timer_id = t.id) THEN
        PERFORM timers._apply_pending(t.id);
    END IF;
END
$$;

-- An attempt's result for the runner: what it logs (a run that went well, at debug level).
CREATE OR REPLACE FUNCTION timers._attempt_result(
    t timers.timers, p_kind text, p_due timestamptz, p_attempt integer, r jsonb, p_late bigint,
    p_skips jsonb, p_retry_at timestamptz, p_given_up text, p_paused boolean) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_result jsonb := jsonb_build_object(
        'timer', t.name, 'kind', p_kind, 'due_at', timers._iso(p_due), 'ok', (r->>'ok')::boolean,
        'rows', (r->>'rows')::bigint, 'took_ms', (r->>'took_ms')::bigint, 'late_ms', p_late,
        'skipped', p_skips);
BEGIN
    IF (r->>'ok')::boolean THEN
        RETURN v_result;
    END IF;
    RETURN v_result || jsonb_build_object(
        'error', r->>'error', 'sqlstate', r->>'sqlstate', 'attempt', p_attempt,
        'retry_at', timers._iso(p_retry_at), 'gave_up', p_given_up, 'paused', p_paused);
END
$$;

-- What an attempt that failed leaves in the timer's row: whether it is the due time's
-- final outcome (no retry follows), the streak of due times failed in a row, whether
-- that streak pauses the timer (pause_after), and last_error, which says which
-- attempt it was and what comes next.
CREATE OR REPLACE FUNCTION timers._failed_outcome(
    t timers.timers, p_attempt integer, p_error text, p_retry_at timestamptz, p_given_up text,
    OUT final boolean, OUT streak integer, OUT pause boolean, OUT last_error text)
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    final := p_retry_at IS NULL;
    streak := t.fail_streak + CASE WHEN final THEN 1 ELSE 0 END;
    pause := final AND t.enabled AND t.pause_after IS NOT NULL AND streak >= t.pause_after;
    last_error := CASE
        WHEN pause THEN format('paused after %s failed due %s in a row (pause_after %s); SELECT timers.enable(%L) turns it on again. The last error: %s',
                               streak, CASE WHEN streak = 1 THEN 'time' ELSE 'times' END, t.pause_after,
                               t.name, p_error)
        WHEN p_retry_at IS NOT NULL THEN format('%s (attempt %s of %s; the next at %s)',
                                                p_error, p_attempt, t.retries + 1, timers._iso(p_retry_at))
        WHEN p_given_up IS NOT NULL THEN format('%s (attempt %s; %s)', p_error, p_attempt, p_given_up)
        ELSE p_error END;
END
$$;

-- Say what a failed attempt of due time p_due (its timers.runs row p_run) led to: the failed event, a retry given
-- up (an overlap is also a skipped due time, with its reason), a pause (audited).
CREATE OR REPLACE FUNCTION timers._announce_failure(
    t timers.timers, p_kind text, p_due timestamptz, p_attempt integer, r jsonb,
    p_retry_at timestamptz, p_given_up text, p_paused boolean, p_streak integer, p_runner text,
    p_run bigint)
    RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM timers._event('failed', t.name, p_due, p_attempt, r->>'error', r->>'sqlstate',
        jsonb_build_object('kind', p_kind, 'retry_at', timers._iso(p_retry_at)), p_run,
        coalesce(r->>'messages', ''));
    IF p_given_up IS NOT NULL THEN
        PERFORM timers._event('retry_given_up', t.name, p_due, p_attempt, r->>'error', r->>'sqlstate',
            jsonb_build_object('reason', p_given_up));
        IF p_given_up = 'retry would overlap the next due time' THEN
            -- its deadline is missed for the failure, before the skip that records it
            IF t.deadline IS NOT NULL THEN
                PERFORM timers._deadline_recorded(t, p_due, false, true, p_attempt, 0, clock_timestamp());
            END IF;
            PERFORM timers._record_skips(t, ARRAY[p_due], 1, p_due, p_due, p_given_up, p_runner);
        END IF;
    END IF;
    IF p_paused THEN
        PERFORM timers._paused(t, p_due, p_attempt, r->>'error', r->>'sqlstate', p_streak, p_runner);
    END IF;
END
$$;

-- Pause timer t after p_streak failed due times in a row (timers._pause) and say so:
-- the paused event.
CREATE OR REPLACE FUNCTION timers._paused(
    t timers.timers, p_due timestamptz, p_attempt integer, p_error text, p_sqlstate text,
    p_streak integer, p_runner text) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
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

-- The whole run of one due time, in the caller's transaction: its first attempt, or (a
-- retry of it is due) the next one. The runner has claimed the row (timers._fire) and
-- set statement_timeout; this locks it again (a no-op for the claimer), so it is also
-- safe to call on its own. Returns NULL when the due time is not this caller's to run
-- (run by someone else, being run, no longer due), else what happened, as jsonb.
CREATE OR REPLACE FUNCTION timers._run_due(
    p_id bigint, p_due timestamptz, p_runner text, p_lost jsonb DEFAULT NULL)
    RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    t timers.timers;
    v_now timestamptz;
    v_due timestamptz := p_due;
    v_planned timestamptz;
    v_kind text;
    v_cap integer := timers._skip_rows_cap();
    v_skips jsonb := '[]';
    v_event jsonb;
    w record;
    r jsonb;
    v_n1 timestamptz;
    v_locks text;
    v_prev timestamptz;
    v_skipped_to boolean := false;
BEGIN
    SELECT * INTO t FROM timers.timers WHERE id = p_id FOR UPDATE SKIP LOCKED;
    IF NOT FOUND OR (t.autonomous AND timers._autonomous_open(t)) THEN
        RETURN NULL;
    END IF;
    -- turned off or deleted while it ran: done now, and nothing runs
    IF EXISTS (SELECT 1 FROM timers.pending_changes c WHERE c.timer_id = t.id)
       AND timers._apply_pending(t.id) THEN
        RETURN NULL;
    END IF;
    IF t.retry_due_at = p_due THEN
        RETURN timers._run_retry(t, p_runner, p_lost);
    END IF;
    IF t.next_due_at IS DISTINCT FROM p_due OR t.retry_at IS NOT NULL THEN
        RETURN NULL;
    END IF;
    IF NOT t.enabled OR t.expired THEN
        UPDATE timers.timers SET next_due_at = NULL WHERE id = t.id;
        RETURN NULL;
    END IF;
    -- The exactly-once guard: a due time at or before the high-water mark has
    -- committed already (the clock was set back, or the timer was re-planned).
    IF t.last_due_at IS NOT NULL AND p_due <= t.last_due_at THEN
        UPDATE timers.timers SET next_due_at = timers._plan(t, t.last_due_at) WHERE id = t.id;
        RETURN jsonb_build_object('timer', t.name, 'due_at', timers._iso(p_due), 'replanned', true);
    END IF;
    v_now := timers._run_clock(t, p_lost);
    IF v_now IS NULL OR t.fire_at > v_now THEN
        RETURN NULL;
    END IF;
    v_kind := CASE WHEN t.catch_up_due_at = p_due THEN 'catch_up' ELSE 'scheduled' END;
    v_planned := t.fire_at;
    v_n1 := NULL;

    -- Never run a due time whose successor has come (unless catch_up = 'all'):
    -- the earlier ones are skipped, the latest runs, at its own time (jitter).
    IF coalesce(t.catch_up, 'skip') <> 'all' AND t.spec->>'kind' <> 'once' THEN
        w := timers._walk_dues(t, p_due, v_now);
        v_n1 := w.next_due;  -- the due time after the one that runs
        IF w.n > 1 THEN
            v_event := timers._record_skips(t, w.dues[1:least(w.n - 1, v_cap)], w.n - 1,
                w.first_due, w.before_last,
                timers._late_reason(w.first_due, t.id), p_runner);
            v_skips := v_skips || jsonb_build_array(v_event);
            v_due := w.last_due;
            v_prev := w.before_last;
            v_skipped_to := true;
            v_kind := 'scheduled';
            UPDATE timers.timers SET next_due_at = v_due, catch_up_due_at = NULL
             WHERE id = t.id RETURNING fire_at INTO v_planned;
            IF v_planned > v_now THEN
                RETURN jsonb_build_object('timer', t.name, 'due_at', timers._iso(v_due),
                                          'fires_at', timers._iso(v_planned), 'skipped', v_skips);
            END IF;
        END IF;
    END IF;

    -- the walk above knows the due time before when it skipped
    IF NOT v_skipped_to THEN
        v_prev := timers._prev_due(t, v_due, t.origin_at);
    END IF;
    -- (t.autonomous first: the look-up is not made for an atomic timer)
    IF t.autonomous AND p_lost IS NULL AND timers._autonomous_owner(t) IS NOT NULL THEN
        RETURN timers._autonomous_start(t, 'timer', v_kind, v_due, 1, v_planned, v_prev, v_n1,
                                        v_skips, NULL, p_runner);
    END IF;
    v_locks := timers._limit_lock_waits();
    r := timers._execute(t, v_due, v_now, 1, v_planned, p_lost, v_prev);
    IF p_lost IS NULL AND r->>'sqlstate' = '55P03' THEN
        RETURN timers._yielded(t, v_kind, v_due, r, v_skips);
    END IF;
    PERFORM set_config('lock_timeout', v_locks, true);
    RETURN timers._due_recorded(t, v_kind, v_due, v_n1, v_now, r, v_skips, p_runner);
END
$$;

-- The record of the first attempt of due time p_due of timer t (its row locked by the
-- caller), whose outcome is r (timers._execute; an autonomous timer's, timers.
-- _autonomous_finish), p_kind scheduled or catch_up: the timer's counters, its next
-- due time (p_n1: the walk's, if it knows it), the due times that came while it ran
-- (skipped, or one catch-up run), the retry or pause a failure leads to, the timers.runs
-- row. p_now: the timer's clock when it was claimed (a test clock's run takes no time).
-- Returns the result the runner logs.
CREATE OR REPLACE FUNCTION timers._due_recorded(
    t timers.timers, p_kind text, p_due timestamptz, p_n1 timestamptz, p_now timestamptz,
    r jsonb, p_skips jsonb, p_runner text)
    RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_skips jsonb := p_skips;
    v_n1 timestamptz := p_n1;
    v_ok boolean := (r->>'ok')::boolean;
    v_late bigint := (r->>'late_ms')::bigint;
    v_started timestamptz := p_now;
    v_ended timestamptz := p_now;
    v_event jsonb;
    v_took bigint := (r->>'took_ms')::bigint;
    v_tb integer := timers._bucket((r->>'took_ms')::bigint, timers._duration_buckets());
    v_lb integer := timers._bucket((r->>'late_ms')::bigint, timers._lateness_buckets());
    a record;
    o record;
BEGIN
    IF t.test_clock IS NULL THEN
        v_started := (r->>'started_at')::timestamptz;
        v_ended := clock_timestamp();
    END IF;

    t.scheduled_runs := t.scheduled_runs + 1;
    -- the walk's next due time holds unless max_runs (which this run counts toward) ends it
    IF v_n1 IS NULL OR t.max_runs IS NOT NULL THEN
        v_n1 := timers._plan(t, p_due);
    END IF;
    a := timers._after_run(t, p_due, v_started, v_ended, v_n1);
    IF a.skip_n > 0 THEN
        v_event := timers._record_skips(t, a.skip_dues, a.skip_n, a.skip_first, a.skip_last,
            format('the run due at %s was still running', timers._iso(p_due)), p_runner);
        v_skips := v_skips || jsonb_build_array(v_event);
    END IF;
    -- a catch-up run due right away leaves no room for a retry
    o := timers._attempt_outcome(t, 1, v_ok, r->>'error', v_ended,
                                 CASE WHEN a.catch_up THEN v_ended ELSE a.next_due END);

    UPDATE timers.timers SET
        last_due_at = p_due,
        last_run_at = v_started,
        last_late_ms = v_late,
        max_late_ms = greatest(max_late_ms, v_late),
        last_ok = v_ok,
        last_error = o.last_error,
        last_took_ms = (r->>'took_ms')::bigint,
        last_rows = (r->>'rows')::bigint,
        runs = runs + CASE WHEN o.final THEN 1 ELSE 0 END,
        scheduled_runs = scheduled_runs + 1,
        failures = failures + CASE WHEN o.final AND NOT v_ok THEN 1 ELSE 0 END,
        caught_up = caught_up + CASE WHEN p_kind = 'catch_up' THEN 1 ELSE 0 END,
        fail_streak = o.streak,
        retry_due_at = CASE WHEN NOT o.final THEN p_due END,
        retry_attempt = CASE WHEN NOT o.final THEN 2 END,
        retry_at = o.retry_at,
        next_due_at = a.next_due,
        catch_up_due_at = CASE WHEN a.catch_up THEN a.next_due END,
        expired = (a.next_due IS NULL),
        last_success_at = CASE WHEN v_ok THEN v_ended ELSE last_success_at END,
        took_counts[v_tb] = took_counts[v_tb] + 1,
        took_sum_ms = took_sum_ms + greatest(v_took, 0),
        late_counts[v_lb] = late_counts[v_lb] + 1,
        late_sum_ms = late_sum_ms + greatest(v_late, 0)
     WHERE id = t.id;
    PERFORM timers._attempt_recorded(t, p_kind, p_due, 1, r, v_late, o.retry_at, o.given_up,
                                     o.pause, o.streak, p_runner);
    RETURN timers._ran_after_yield(timers._attempt_result(t, p_kind, p_due, 1, r, v_late, v_skips,
                                                          o.retry_at, o.given_up, o.pause), t.id);
END
$$;

-- The next attempt of a due time whose earlier attempt failed (t: its row, locked by
-- the caller). Given up, and recorded as skipped, when the timer's next due time has
-- come first or it was turned off; else run, with pgtimers.attempt its number.
CREATE OR REPLACE FUNCTION timers._run_retry(t timers.timers, p_runner text, p_lost jsonb DEFAULT NULL)
    RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_now timestamptz := timers._run_clock(t, p_lost);
    v_prev timestamptz;
    r jsonb;
    v_locks text;
BEGIN
    IF v_now IS NULL OR t.retry_at > v_now THEN
        RETURN NULL;
    END IF;
    IF NOT t.enabled OR (t.next_due_at IS NOT NULL AND t.next_due_at <= v_now) THEN
        RETURN timers._give_up_retry(t, CASE WHEN t.enabled THEN 'retry would overlap the next due time'
                                             ELSE 'turned off before its retry' END, p_runner);
    END IF;

    v_prev := timers._prev_due(t, t.retry_due_at, t.origin_at);
    -- (t.autonomous first: the look-up is not made for an atomic timer)
    IF t.autonomous AND p_lost IS NULL AND timers._autonomous_owner(t) IS NOT NULL THEN
        RETURN timers._autonomous_start(t, 'retry', 'retry', t.retry_due_at, t.retry_attempt,
                                        t.retry_at, v_prev, NULL, '[]', NULL, p_runner);
    END IF;
    v_locks := timers._limit_lock_waits();
    r := timers._execute(t, t.retry_due_at, v_now, t.retry_attempt, t.retry_at, p_lost, v_prev);
    IF p_lost IS NULL AND r->>'sqlstate' = '55P03' THEN
        RETURN timers._yielded(t, 'retry', t.retry_due_at, r, '[]');
    END IF;
    PERFORM set_config('lock_timeout', v_locks, true);
    RETURN timers._retry_recorded(t, v_now, r, p_runner);
END
$$;

-- The record of a retry of timer t (its row locked by the caller) whose outcome is r
-- (timers._execute; an autonomous timer's, timers._autonomous_finish): the timer's
-- counters, the next retry or the end of them, the timers.runs row. p_now: the timer's
-- clock when it was claimed. Returns the result the runner logs.
CREATE OR REPLACE FUNCTION timers._retry_recorded(t timers.timers, p_now timestamptz, r jsonb, p_runner text)
    RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_ok boolean := (r->>'ok')::boolean;
    v_started timestamptz := p_now;
    v_ended timestamptz := p_now;
    o record;
    v_took bigint := (r->>'took_ms')::bigint;
    v_late bigint := (r->>'late_ms')::bigint;
    v_tb integer := timers._bucket((r->>'took_ms')::bigint, timers._duration_buckets());
    v_lb integer := timers._bucket((r->>'late_ms')::bigint, timers._lateness_buckets());
BEGIN
    IF t.test_clock IS NULL THEN
        v_started := (r->>'started_at')::timestamptz;
        v_ended := clock_timestamp();
    END IF;
    o := timers._attempt_outcome(t, t.retry_attempt, v_ok, r->>'error', v_ended, t.next_due_at);
    UPDATE timers.timers SET
        last_run_at = v_started,
        last_ok = v_ok,
        last_error = o.last_error,
        last_took_ms = (r->>'took_ms')::bigint,
        last_rows = (r->>'rows')::bigint,
        runs = runs + CASE WHEN o.final THEN 1 ELSE 0 END,
        failures = failures + CASE WHEN o.final AND NOT v_ok THEN 1 ELSE 0 END,
        fail_streak = o.streak,
        retry_due_at = CASE WHEN NOT o.final THEN retry_due_at END,
        retry_attempt = CASE WHEN NOT o.final THEN retry_attempt + 1 END,
        retry_at = o.retry_at,
        last_success_at = CASE WHEN v_ok THEN v_ended ELSE last_success_at END,
        took_counts[v_tb] = took_counts[v_tb] + 1,
        took_sum_ms = took_sum_ms + greatest(v_took, 0),
        late_counts[v_lb] = late_counts[v_lb] + 1,
        late_sum_ms = late_sum_ms + greatest(v_late, 0)
     WHERE id = t.id;
    PERFORM timers._attempt_recorded(t, 'retry', t.retry_due_at, t.retry_attempt, r,
                                     (r->>'late_ms')::bigint, o.retry_at, o.given_up, o.pause,
                                     o.streak, p_runner);
    RETURN timers._ran_after_yield(timers._attempt_result(
        t, 'retry', t.retry_due_at, t.retry_attempt, r, (r->>'late_ms')::bigint, '[]', o.retry_at,
        o.given_up, o.pause), t.id);
END
$$;

-- A pending retry that is not made (p_why: the next due time came first, or the timer
-- was turned off): the due time's last attempt stays its final outcome, a failure, and
-- the retry is recorded as a skipped due time with the reason.
CREATE OR REPLACE FUNCTION timers._give_up_retry(t timers.timers, p_why text, p_runner text)
    RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    -- the last attempt's own error (last_error says more: which attempt, what next)
    v_error text := coalesce((SELECT r.error FROM timers.runs r
                               WHERE r.timer_id = t.id AND r.due_at = t.retry_due_at AND r.ok = false
                               ORDER BY r.started_at DESC LIMIT 1), t.last_error);
    o record := timers._failed_outcome(t, t.retry_attempt - 1, v_error, NULL, p_why);
    v_skip jsonb;
BEGIN
    UPDATE timers.timers SET
        retry_due_at = NULL, retry_attempt = NULL, retry_at = NULL,
        runs = runs + 1, failures = failures + 1, fail_streak = o.streak,
        last_error = o.last_error
     WHERE id = t.id;
    PERFORM timers._event('retry_given_up', t.name, t.retry_due_at, t.retry_attempt - 1,
        v_error, '', jsonb_build_object('reason', p_why));
    -- its deadline is missed for the failure, before the skip that records it
    IF t.deadline IS NOT NULL THEN
        PERFORM timers._deadline_recorded(t, t.retry_due_at, false, true, t.retry_attempt - 1, 0,
                                          clock_timestamp());
    END IF;
    v_skip := timers._record_skips(t, ARRAY[t.retry_due_at], 1, t.retry_due_at, t.retry_due_at,
                                   p_why, p_runner);
    IF o.pause THEN
        PERFORM timers._paused(t, t.retry_due_at, t.retry_attempt - 1, v_error, '', o.streak, p_runner);
    END IF;
    RETURN jsonb_build_object('timer', t.name, 'kind', 'retry', 'due_at', timers._iso(t.retry_due_at),
        'attempt', t.retry_attempt, 'gave_up', p_why, 'paused', o.pause,
        'skipped', jsonb_build_array(v_skip));
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

-- The message of a failed run: an error's text (cut), a time limit or a cancel said plainly.
CREATE OR REPLACE FUNCTION timers._run_error(p_sqlstate text, p_message text, p_timeout interval)
    RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    AS $$
        SELECT CASE
            WHEN p_sqlstate = '57014' AND p_message LIKE '%statement timeout%'
                THEN format('timed out: the run took longer than its timeout of %s',
                            coalesce(p_timeout, interval '10 minutes'))
            WHEN p_sqlstate = '57014'
                THEN 'cancelled: ' || timers._cut(p_message)
                     || ' (timers.cancel, or pg_cancel_backend of the run''s session)'
            WHEN p_sqlstate = '2D000'
                THEN timers._cut(p_message) || ' (the SQL commits or rolls back, which a run in one'
                     || ' transaction cannot: save the timer with autonomous => true to run it at top level)'
            ELSE timers._cut(p_message) END
    $$;

-- Claim (lock, SKIP LOCKED) the timer that fires first among those due: on the server's
-- clock higher priority first, then the earlier fire time, then the one that ran longest
-- ago (never first), then the lower id; then test clocks. The last run breaks ties so
-- that overload is shared: with catch_up 'skip' a timer passed over is next due at the
-- same fire time as those that ran, and would lose to the same lower ids each time.
-- due_at is the due time its run runs (a retry's, else the next). Each step reads one
-- index: timers with a priority (rare) have timers_due_ranked, the rest timers_due (in
-- this order, no sort).
CREATE OR REPLACE FUNCTION timers._claim_due(
    p_skip bigint[], OUT id bigint, OUT due_at timestamptz, OUT timeout interval)
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    -- index scans whatever the statistics say (a table that grew since its last
    -- ANALYZE must not make every claim a scan and sort of all that is due; no JIT)
    SET enable_seqscan = off SET enable_bitmapscan = off SET jit = off
    AS $$
BEGIN
    SELECT t.id, coalesce(t.retry_due_at, t.next_due_at), t.timeout INTO id, due_at, timeout
      FROM timers.timers t
     WHERE t.fire_at <= now() AND t.test_clock IS NULL AND t.priority <> 0 AND t.priority > 0
       AND t.id <> ALL (p_skip)
       AND NOT (t.autonomous AND EXISTS (SELECT 1 FROM timers.autonomous_runs o WHERE o.timer_id = t.id))
     ORDER BY t.priority DESC, t.fire_at, t.last_run_at NULLS FIRST, t.id
     LIMIT 1
       FOR UPDATE SKIP LOCKED;
    IF FOUND THEN
        RETURN;
    END IF;
    SELECT t.id, coalesce(t.retry_due_at, t.next_due_at), t.timeout INTO id, due_at, timeout
      FROM timers.timers t
     WHERE t.fire_at <= now() AND t.test_clock IS NULL AND t.priority = 0 AND t.id <> ALL (p_skip)
       AND NOT (t.autonomous AND EXISTS (SELECT 1 FROM timers.autonomous_runs o WHERE o.timer_id = t.id))
     ORDER BY t.fire_at, t.last_run_at NULLS FIRST, t.id
     LIMIT 1
       FOR UPDATE SKIP LOCKED;
    IF FOUND THEN
        RETURN;
    END IF;
    SELECT t.id, coalesce(t.retry_due_at, t.next_due_at), t.timeout INTO id, due_at, timeout
      FROM timers.timers t
     WHERE t.fire_at <= now() AND t.test_clock IS NULL AND t.priority <> 0 AND t.priority < 0
       AND t.id <> ALL (p_skip)
       AND NOT (t.autonomous AND EXISTS (SELECT 1 FROM timers.autonomous_runs o WHERE o.timer_id = t.id))
     ORDER BY t.priority DESC, t.fire_at, t.last_run_at NULLS FIRST, t.id
     LIMIT 1
       FOR UPDATE SKIP LOCKED;
    IF FOUND THEN
        RETURN;
    END IF;
    SELECT t.id, coalesce(t.retry_due_at, t.next_due_at), t.timeout INTO id, due_at, timeout
      FROM timers.timers t JOIN timers.test_clocks c ON c.name = t.test_clock
     WHERE t.test_clock IS NOT NULL AND t.fire_at IS NOT NULL AND t.fire_at <= c.now
       AND t.id <> ALL (p_skip)
       AND NOT (t.autonomous AND EXISTS (SELECT 1 FROM timers.autonomous_runs o WHERE o.timer_id = t.id))
     ORDER BY t.priority DESC, t.fire_at, t.last_run_at NULLS FIRST, t.id
     LIMIT 1
       FOR UPDATE OF t SKIP LOCKED;
END
$$;

-- One fire, the runner's whole round trip: claim the oldest run-now request, else
-- the due timer that fires first (timers._claim_due), else (or only, with
-- p_keyed_only) the next keyed timer in tick order, else a backfill's next due time
-- (timers._claim_backfill), and run it, in the caller's
-- transaction. p_timeout_ms is the time limit the caller's statement runs under; a
-- timer whose own timeout differs is not run here but answered as a claim,
-- {"claim": "timer"|"request"|"backfill", "id", "due_at", "timeout_ms"}, which the
-- runner runs with its own limit (timers._run_due, _run_request or _run_backfill). A
-- run whose machinery raised answers {"failed": kind, "id" (a backfill: its timer's),
-- "sqlstate", "error"}. p_skip and p_skip_keyed: ids to leave alone for a while
-- (their run raised). NULL: nothing to do. Before it runs anything (or answers a claim)
-- it tells the runner what it claimed (timers._say_claimed, marked p_mark), so that a
-- run that ends the runner's session is known (timers._run_lost).
CREATE OR REPLACE FUNCTION timers._fire(
    p_runner text, p_skip bigint[], p_skip_keyed bigint[], p_keyed_only boolean, p_timeout_ms bigint,
    p_mark text DEFAULT NULL)
    RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_kind text;
    v_id bigint;
    v_at timestamptz;  -- the due time (a timer) or the owed time (a keyed timer)
    v_timer bigint;  -- a backfill's timer
    c record;
    v_timeout interval;
    v_timeout_ms bigint;
    v_result jsonb;
BEGIN
    -- Claim and run in one block (a subtransaction): a row locked by the transaction
    -- around a subtransaction that then updates it gets a MultiXact for its xmax, which
    -- keeps its dead index entries from being marked dead, so that every later claim
    -- walks them again (0.4 ms a claim after a few thousand fires).
    BEGIN
        IF NOT p_keyed_only THEN
            SELECT q.id, t.timeout INTO v_id, v_timeout
              FROM timers.run_requests q LEFT JOIN timers.timers t ON t.id = q.timer_id
             WHERE q.finished_at IS NULL AND q.requested_at > now() - interval '5 minutes'
               -- an autonomous run of the timer under way: the request waits for it
               AND NOT EXISTS (SELECT 1 FROM timers.autonomous_runs o WHERE o.timer_id = q.timer_id)
             ORDER BY q.id
             LIMIT 1
               FOR UPDATE OF q SKIP LOCKED;
            v_kind := CASE WHEN FOUND THEN 'request' END;
            IF v_kind IS NULL THEN
                c := timers._claim_due(p_skip);
                v_id := c.id;
                v_at := c.due_at;
                v_timeout := c.timeout;
                v_kind := CASE WHEN v_id IS NOT NULL THEN 'timer' END;
            END IF;
        END IF;
        IF v_kind IS NULL THEN
            SELECT k.id, k.owed_at INTO v_id, v_at FROM timers._keyed_claim(p_skip_keyed) k;
            v_kind := CASE WHEN FOUND THEN 'keyed' END;
        END IF;
        IF v_kind IS NULL AND NOT p_keyed_only THEN
            -- last: a backfill's next due time (never before what is due now)
            c := timers._claim_backfill(p_skip);
            v_id := c.id;
            v_timer := c.timer_id;
            v_timeout := c.timeout;
            v_kind := CASE WHEN v_id IS NOT NULL THEN 'backfill' END;
        END IF;
        IF v_kind IS NULL THEN
            RETURN NULL;
        END IF;
        PERFORM timers._say_claimed(p_mark, v_kind, v_id, v_at);
        IF v_kind <> 'keyed' THEN
            v_timeout_ms := timers._ms(coalesce(v_timeout, interval '10 minutes'));
            IF v_timeout_ms <> p_timeout_ms THEN
                RETURN jsonb_build_object('claim', v_kind, 'id', v_id, 'timeout_ms', v_timeout_ms,
                                          'due_at', v_at, 'timer_id', v_timer);
            END IF;
        END IF;
        IF v_kind = 'request' THEN
            v_result := timers._run_request(v_id, p_runner);
        ELSIF v_kind = 'timer' THEN
            v_result := timers._run_due(v_id, v_at, p_runner);
        ELSIF v_kind = 'backfill' THEN
            v_result := timers._run_backfill(v_id, p_runner);
        ELSE
            v_result := timers._keyed_fire(v_id, v_at, p_runner);
        END IF;
    EXCEPTION WHEN OTHERS THEN
        -- the run's own machinery failed (not its SQL, whose errors are recorded): say
        -- which, so that the runner leaves it alone for a while instead of a hot loop
        RETURN jsonb_build_object('failed', coalesce(v_kind, 'claim'), 'id', coalesce(v_timer, v_id),
                                  'sqlstate', SQLSTATE, 'error', timers._cut(SQLERRM));
    END;
    RETURN coalesce(v_result, '{}');
END
$$;

-- Tell the runner, before a run, what its session is about to run: a notice 'pgtimers:
-- claimed' whose detail is {mark, kind, id, due_at, at}. A notice reaches the runner at
-- once, ahead of anything the run does, so when the run ends the session (a FATAL error,
-- the session terminated, the server gone) the runner still knows which run it was and
-- records it (timers._run_lost). p_mark is the runner's secret for its connection (a
-- timer's SQL cannot read it, so it cannot pass for a claim); NULL (a runner of an older
-- version) says nothing. client_min_messages is the runner's (notice) here: the run's
-- settings come after. A runner that says its mark also reads what the run says: for
-- the rest of the transaction, timers._execute tells it which run starts
-- (pgtimers.run_notices), so that the notices after belong to that run.
CREATE OR REPLACE FUNCTION timers._say_claimed(p_mark text, p_kind text, p_id bigint, p_at timestamptz)
    RETURNS void
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    IF p_mark IS NOT NULL THEN
        RAISE NOTICE 'pgtimers: claimed' USING DETAIL = jsonb_build_object(
            'mark', p_mark, 'kind', p_kind, 'id', p_id, 'due_at', p_at,
            'at', clock_timestamp())::text;
        PERFORM set_config('pgtimers.run_notices', 'on', true);
    END IF;
END
$$;

-- Record a run whose session ended while it ran (the runner saw the claim, timers.
-- _say_claimed, then lost the connection): as a failed attempt of what was claimed,
-- p_lost {error, sqlstate, at: when it was claimed}, by the same routine that runs it
-- (its retries, pause_after and skips follow), in the caller's transaction. NULL when
-- there is nothing to record: the run committed (its due time moved on), or it is still
-- running (its row is locked), or it is gone.
CREATE OR REPLACE FUNCTION timers._run_lost(
    p_kind text, p_id bigint, p_due timestamptz, p_runner text, p_lost jsonb) RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    IF p_lost IS NULL OR NOT p_lost ?& ARRAY['error', 'sqlstate', 'at'] THEN
        RAISE EXCEPTION 'a lost run needs its error, sqlstate and the time it was claimed (at)'
            USING ERRCODE = '22023';
    END IF;
    RETURN CASE p_kind
        WHEN 'timer' THEN timers._run_due(p_id, p_due, p_runner, p_lost)
        WHEN 'request' THEN timers._run_request(p_id, p_runner, p_lost)
        WHEN 'backfill' THEN timers._run_backfill(p_id, p_runner, p_lost)
        WHEN 'keyed' THEN timers._keyed_fire(p_id, p_due, p_runner, p_lost) END;
END
$$;

-- Fire one after another in one round trip, each in its own transaction (COMMIT after
-- each fire, as the runner's own COMMIT would): until nothing is left to fire, p_max
-- fires, or p_budget_ms have gone by, or a fire needs the runner (a timer with a time
-- limit of its own: "claim"; a run whose machinery raised: "failed"). result: {fired,
-- results (the fires that failed, skipped, paused or need the runner, in order), more
-- (whether the last look found something)}. The other arguments are timers._fire's, and
-- the runner's own session settings, which each fire's transaction puts back before
-- its COMMIT (timers._session_reset): the next fire starts from the runner's session,
-- whatever this one's SQL left. p_late: the runner's word on a while the server refused
-- its work, for the reasons of due times found late (timers._late_reason). A procedure
-- that COMMITs can pin no search_path: its body names everything with its schema. The
-- time limit is the CALL's statement_timeout, which runs from the CALL's start:
-- p_budget_ms keeps a run's own limit within that of its start.
CREATE OR REPLACE PROCEDURE timers._fire_many(
    p_runner pg_catalog.text, p_skip pg_catalog.int8[], p_skip_keyed pg_catalog.int8[],
    p_keyed_only pg_catalog.bool, p_timeout_ms pg_catalog.int8, p_max pg_catalog.int4,
    p_budget_ms pg_catalog.int4, p_mark pg_catalog.text DEFAULT NULL,
    p_session_names pg_catalog.text[] DEFAULT NULL, p_session_values pg_catalog.text[] DEFAULT NULL,
    p_late pg_catalog.jsonb DEFAULT NULL, INOUT result pg_catalog.jsonb DEFAULT NULL)
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_one pg_catalog.jsonb;
    v_fired pg_catalog.int4 := 0;
    v_kept pg_catalog.jsonb := '[]';
    v_until pg_catalog.timestamptz := pg_catalog.clock_timestamp()
        OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => p_budget_ms OPERATOR(pg_catalog./) 1000.0);
BEGIN
    -- autonomous runs that will never report back are recorded first (their own commit)
    IF EXISTS (SELECT FROM timers.autonomous_runs) THEN
        v_kept := timers._autonomous_sweep(p_runner);
        IF pg_catalog.jsonb_array_length(v_kept) OPERATOR(pg_catalog.>) 0 THEN
            COMMIT;
            v_fired := pg_catalog.jsonb_array_length(v_kept);
        END IF;
    END IF;
    LOOP
        IF p_late IS NOT NULL THEN
            PERFORM pg_catalog.set_config('pgtimers.late', p_late::pg_catalog.text, true);
        END IF;
        v_one := timers._fire(p_runner, p_skip, p_skip_keyed, p_keyed_only, p_timeout_ms, p_mark);
        EXIT WHEN v_one IS NULL;
        PERFORM timers._session_reset(p_session_names, p_session_values);
        COMMIT;
        v_fired := v_fired OPERATOR(pg_catalog.+) 1;
        IF timers._fire_kept(v_one) THEN
            v_kept := v_kept OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_array(v_one);
        END IF;
        EXIT WHEN timers._fire_stops(v_one) OR v_fired OPERATOR(pg_catalog.>=) p_max
               OR pg_catalog.clock_timestamp() OPERATOR(pg_catalog.>=) v_until;
    END LOOP;
    result := pg_catalog.jsonb_build_object('fired', v_fired, 'results', v_kept, 'more', v_one IS NOT NULL);
END
$$;

-- Whether a fire's result needs the runner before the next fire: a claim to run with
-- its own time limit, a failure of the run's machinery, a run that yielded (waited too
-- long for a lock: the next fire would claim it again; the runner holds it back), an
-- autonomous timer's attempt, committed as started, that the runner runs now
-- (timers._autonomous_start).
CREATE OR REPLACE FUNCTION timers._fire_stops(p_result jsonb) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    AS $$ SELECT p_result ?| ARRAY['claim', 'failed', 'yielded', 'autonomous'] $$;

-- Whether timers._fire_many hands a fire's result to the runner: it failed, skipped or
-- paused something, ran a timer the runner held back (timers._ran_after_yield), or the
-- runner must act on it (timers._fire_stops). A run that went well is only counted.
CREATE OR REPLACE FUNCTION timers._fire_kept(p_result jsonb) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    AS $$
        SELECT p_result->>'ok' = 'false' OR jsonb_array_length(coalesce(p_result->'skipped', '[]')) > 0
            OR p_result->>'paused' = 'true' OR p_result->>'gave_up' IS NOT NULL
            OR p_result ? 'ran_after_yield' OR timers._fire_stops(p_result) OR p_result = '{}'
    $$;

-- ---------------------------------------------------------------------------
-- Rights
-- ---------------------------------------------------------------------------
REVOKE ALL ON PROCEDURE
    timers._fire_many(text,bigint[],bigint[],boolean,bigint,integer,integer,text,text[],text[],jsonb,jsonb)
    FROM PUBLIC, pgtimers_reader, pgtimers_admin, pgtimers_runner;
GRANT EXECUTE ON PROCEDURE
    timers._fire_many(text,bigint[],bigint[],boolean,bigint,integer,integer,text,text[],text[],jsonb,jsonb)
    TO pgtimers_runner;
REVOKE ALL ON FUNCTION
    timers._fire_kept(jsonb),
    timers._fire_stops(jsonb),
    timers._fire(text,bigint[],bigint[],boolean,bigint,text),
    timers._say_claimed(text,text,bigint,timestamp with time zone),
    timers._run_lost(text,bigint,timestamp with time zone,text,jsonb),
    timers._claim_due(bigint[]),
    timers._due(integer),
    timers._next_wake(),
    timers._record_skips(timers.timers,timestamp with time zone[],bigint,timestamp with time zone,timestamp with time zone,text,text),
    timers._walk_dues(timers.timers,timestamp with time zone,timestamp with time zone),
    timers._apply_gap(timers.timers,timestamp with time zone,text,text,timestamp with time zone),
    timers._execute(timers.timers,timestamp with time zone,timestamp with time zone,integer,timestamp with time zone,jsonb,timestamp with time zone),
    timers._prev_due(timers.timers,timestamp with time zone,timestamp with time zone),
    timers._lost_outcome(jsonb),
    timers._run_clock(timers.timers,jsonb),
    timers._late_reason(timestamp with time zone,bigint),
    timers._limit_lock_waits(),
    timers._lock_waiter(text),
    timers._yielded(timers.timers,text,timestamp with time zone,jsonb,jsonb),
    timers._ran_after_yield(jsonb,bigint),
    timers._after_run(timers.timers,timestamp with time zone,timestamp with time zone,timestamp with time zone,timestamp with time zone),
    timers._attempt_outcome(timers.timers,integer,boolean,text,timestamp with time zone,timestamp with time zone),
    timers._attempt_recorded(timers.timers,text,timestamp with time zone,integer,jsonb,bigint,timestamp with time zone,text,boolean,integer,text),
    timers._attempt_result(timers.timers,text,timestamp with time zone,integer,jsonb,bigint,jsonb,timestamp with time zone,text,boolean),
    timers._next_attempt(timers.timers,integer,timestamp with time zone,timestamp with time zone),
    timers._failed_outcome(timers.timers,integer,text,timestamp with time zone,text),
    timers._announce_failure(timers.timers,text,timestamp with time zone,integer,jsonb,timestamp with time zone,text,boolean,integer,text,bigint),
    timers._paused(timers.timers,timestamp with time zone,integer,text,text,integer,text),
    timers._pause(bigint,jsonb),
    timers._run_due(bigint,timestamp with time zone,text,jsonb),
    timers._run_retry(timers.timers,text,jsonb),
    timers._retry_recorded(timers.timers,timestamp with time zone,jsonb,text),
    timers._due_recorded(timers.timers,text,timestamp with time zone,timestamp with time zone,timestamp with time zone,jsonb,jsonb,text),
    timers._give_up_retry(timers.timers,text,text),
    timers._apply_gaps(text,text,timestamp with time zone),
    timers._server_clock_jumped(timestamp with time zone,timestamp with time zone,text),
    timers._run_error(text,text,interval)
    FROM PUBLIC, pgtimers_reader, pgtimers_admin, pgtimers_runner;
GRANT EXECUTE ON FUNCTION
    timers._fire(text,bigint[],bigint[],boolean,bigint,text),
    timers._say_claimed(text,text,bigint,timestamp with time zone),
    timers._run_lost(text,bigint,timestamp with time zone,text,jsonb),
    timers._claim_due(bigint[]),
    timers._due(integer),
    timers._next_wake(),
    timers._record_skips(timers.timers,timestamp with time zone[],bigint,timestamp with time zone,timestamp with time zone,text,text),
    timers._walk_dues(timers.timers,timestamp with time zone,timestamp with time zone),
    timers._apply_gap(timers.timers,timestamp with time zone,text,text,timestamp with time zone),
    timers._execute(timers.timers,timestamp with time zone,timestamp with time zone,integer,timestamp with time zone,jsonb,timestamp with time zone),
    timers._prev_due(timers.timers,timestamp with time zone,timestamp with time zone),
    timers._lost_outcome(jsonb),
    timers._run_clock(timers.timers,jsonb),
    timers._late_reason(timestamp with time zone,bigint),
    timers._limit_lock_waits(),
    timers._lock_waiter(text),
    timers._yielded(timers.timers,text,timestamp with time zone,jsonb,jsonb),
    timers._ran_after_yield(jsonb,bigint),
    timers._after_run(timers.timers,timestamp with time zone,timestamp with time zone,timestamp with time zone,timestamp with time zone),
    timers._attempt_outcome(timers.timers,integer,boolean,text,timestamp with time zone,timestamp with time zone),
    timers._attempt_recorded(timers.timers,text,timestamp with time zone,integer,jsonb,bigint,timestamp with time zone,text,boolean,integer,text),
    timers._attempt_result(timers.timers,text,timestamp with time zone,integer,jsonb,bigint,jsonb,timestamp with time zone,text,boolean),
    timers._next_attempt(timers.timers,integer,timestamp with time zone,timestamp with time zone),
    timers._failed_outcome(timers.timers,integer,text,timestamp with time zone,text),
    timers._announce_failure(timers.timers,text,timestamp with time zone,integer,jsonb,timestamp with time zone,text,boolean,integer,text,bigint),
    timers._paused(timers.timers,timestamp with time zone,integer,text,text,integer,text),
    timers._pause(bigint,jsonb),
    timers._run_due(bigint,timestamp with time zone,text,jsonb),
    timers._run_retry(timers.timers,text,jsonb),
    timers._retry_recorded(timers.timers,timestamp with time zone,jsonb,text),
    timers._due_recorded(timers.timers,text,timestamp with time zone,timestamp with time zone,timestamp with time zone,jsonb,jsonb,text),
    timers._give_up_retry(timers.timers,text,text),
    timers._apply_gaps(text,text,timestamp with time zone),
    timers._server_clock_jumped(timestamp with time zone,timestamp with time zone,text),
    timers._run_error(text,text,interval)
    TO pgtimers_runner;
GRANT EXECUTE ON FUNCTION
    timers._fire_kept(jsonb),
    timers._fire_stops(jsonb)
    TO pgtimers_runner;
