-- pgtimers 0005: the runner's side in SQL — the due set, one run in one
-- transaction with its bookkeeping, the seed's catch-up and skip rules,
-- downtime rules (catch_up), run-now, retention, and test clocks.
--
-- How a run works (docs/running.md has the long form):
--   the runner, in one transaction: claims the earliest due timer
--   (pgtimers/queries.sql claim_due: FOR UPDATE SKIP LOCKED on index timers_due),
--   sets statement_timeout to the timer's timeout, and calls timers._run_due,
--   which runs the SQL as its owner in a sub-block and writes the result, the
--   next due time and the history row; then it commits. The SQL's effects and
--   the bookkeeping commit together or not at all.

-- ---------------------------------------------------------------------------
-- Tables and columns
-- ---------------------------------------------------------------------------

-- The due time that the next run catches up (the seed's single catch-up run);
-- the run of next_due_at counts as caught_up when the two are equal.
ALTER TABLE timers.timers ADD COLUMN IF NOT EXISTS catch_up_due_at timestamptz;

-- The claim index serves the server's clock only; test-clock timers have their own.
DROP INDEX IF EXISTS timers.timers_due;
CREATE INDEX timers_due ON timers.timers (next_due_at, id)
    WHERE next_due_at IS NOT NULL AND test_clock IS NULL;
CREATE INDEX timers_due_test_clock ON timers.timers (test_clock, next_due_at, id)
    WHERE next_due_at IS NOT NULL AND test_clock IS NOT NULL;

-- Runners that serve this database. A runner is live while its control
-- session holds the shared advisory lock (timers._runner_lock_class(), 0):
-- that ends with its connection, so a killed runner is not live any more.
CREATE TABLE IF NOT EXISTS timers.runners (
    id          text PRIMARY KEY,
    host        text NOT NULL,
    os_pid      integer NOT NULL,
    backend_pid integer NOT NULL,
    version     text NOT NULL DEFAULT '',
    workers     integer NOT NULL DEFAULT 0,
    started_at  timestamptz NOT NULL DEFAULT now(),
    seen_at     timestamptz NOT NULL DEFAULT now()
);

-- Run-now requests (CALL timers.run): the runner fills in result.
CREATE TABLE IF NOT EXISTS timers.run_requests (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    timer_id     bigint NOT NULL,
    timer        text NOT NULL,
    requested_by name NOT NULL,
    requested_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    finished_at  timestamptz,
    result       jsonb
);
CREATE INDEX IF NOT EXISTS run_requests_open ON timers.run_requests (id) WHERE finished_at IS NULL;

REVOKE ALL ON timers.runners, timers.run_requests FROM PUBLIC;
GRANT SELECT ON timers.runners TO pgtimers_reader;
GRANT SELECT, INSERT, UPDATE, DELETE ON timers.runners TO pgtimers_runner;
GRANT SELECT, UPDATE, DELETE ON timers.run_requests TO pgtimers_runner;
GRANT SELECT ON timers.test_clocks TO pgtimers_runner;
GRANT SELECT ON timers.timers TO pgtimers_runner;

-- ---------------------------------------------------------------------------
-- Small helpers
-- ---------------------------------------------------------------------------

-- Advisory lock class of runner liveness: key 0 shared = a live runner's
-- control session; key 1 = serialises runner starts; key 2 = one pruner.
CREATE OR REPLACE FUNCTION timers._runner_lock_class() RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT 28776 $$;

-- ISO 8601 in UTC, e.g. 2027-01-04T09:00:00Z (fraction only when there is one).
CREATE OR REPLACE FUNCTION timers._iso(p_at timestamptz) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    AS $$
        SELECT to_char(p_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS')
            || CASE WHEN date_trunc('second', p_at) = p_at THEN ''
                    ELSE rtrim(to_char(p_at AT TIME ZONE 'UTC', '.US'), '0') END
            || 'Z'
    $$;

CREATE OR REPLACE FUNCTION timers._ms(p_span interval) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    AS $$ SELECT greatest(0, round(extract(epoch FROM p_span) * 1000))::bigint $$;

-- How many sessions of runners serve this database right now.
CREATE OR REPLACE FUNCTION timers._live_runners() RETURNS integer
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
        SELECT count(*)::integer FROM pg_locks l
         WHERE l.locktype = 'advisory' AND l.granted
           AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
           AND l.classid = timers._runner_lock_class()::oid AND l.objid = 0::oid AND l.objsubid = 2
    $$;

-- The rows of a skip event written one per due time up to this many; a larger
-- gap (an `every 1s` timer down for a week) is one summary row.
CREATE OR REPLACE FUNCTION timers._skip_rows_cap() RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT 100 $$;

-- Due timers in due order, without locking: the server's clock for plain
-- timers (index timers_due), each test clock's time for timers on one.
CREATE OR REPLACE FUNCTION timers._due(p_limit integer)
    RETURNS TABLE (id bigint, due_at timestamptz, test_clock text)
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
        SELECT d.id, d.due_at, d.test_clock FROM (
            (SELECT t.id, t.next_due_at AS due_at, NULL::text AS test_clock
               FROM timers.timers t
              WHERE t.next_due_at <= now() AND t.test_clock IS NULL
              ORDER BY t.next_due_at, t.id
              LIMIT p_limit)
            UNION ALL
            (SELECT t.id, t.next_due_at, t.test_clock
               FROM timers.timers t JOIN timers.test_clocks c ON c.name = t.test_clock
              WHERE t.test_clock IS NOT NULL AND t.next_due_at IS NOT NULL AND t.next_due_at <= c.now
              ORDER BY t.next_due_at, t.id
              LIMIT p_limit)
        ) d
        ORDER BY d.due_at, d.id
        LIMIT p_limit
    $$;

-- When the runner must look next: the earliest due time on the server's
-- clock, or now when a test-clock timer or a run-now request is waiting;
-- leaving out timers being run now (their advisory lock is in pg_locks), so
-- that a long run does not keep the runner awake.
CREATE OR REPLACE FUNCTION timers._next_wake(OUT db_now timestamptz, OUT wake_at timestamptz)
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
        WITH running AS (
            SELECT l.objid::bigint AS id FROM pg_locks l
             WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
               AND l.classid = timers._running_lock_class()::oid
               AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()))
        SELECT clock_timestamp(), least(
            (SELECT t.next_due_at FROM timers.timers t
              WHERE t.next_due_at IS NOT NULL AND t.test_clock IS NULL
                AND t.id NOT IN (SELECT id FROM running)
              ORDER BY t.next_due_at, t.id LIMIT 1),
            (SELECT now() WHERE EXISTS (
                SELECT 1 FROM timers.timers t JOIN timers.test_clocks c ON c.name = t.test_clock
                 WHERE t.test_clock IS NOT NULL AND t.next_due_at IS NOT NULL AND t.next_due_at <= c.now
                   AND t.id NOT IN (SELECT id FROM running))),
            (SELECT now() WHERE EXISTS (
                SELECT 1 FROM timers.run_requests r
                 WHERE r.finished_at IS NULL AND r.requested_at > now() - interval '5 minutes'
                   AND r.timer_id NOT IN (SELECT id FROM running))))
    $$;

-- ---------------------------------------------------------------------------
-- Skips
-- ---------------------------------------------------------------------------

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
-- order, so nothing changes here; a one-shot always fires late.
CREATE OR REPLACE FUNCTION timers._apply_gap(
    t timers.timers, p_gap_end timestamptz, p_reason text, p_runner text,
    p_since timestamptz DEFAULT NULL) RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_mode text := coalesce(t.catch_up, 'skip');
    w record;
    v_skip timestamptz[];
    v_event jsonb;
BEGIN
    IF t.next_due_at IS NULL OR t.next_due_at > p_gap_end
       OR v_mode = 'all' OR t.spec->>'kind' = 'once' THEN
        RETURN NULL;
    END IF;
    w := timers._walk_dues(t, t.next_due_at, p_gap_end);
    IF p_since IS NOT NULL AND w.last_due <= p_since THEN
        RETURN NULL;
    END IF;
    IF v_mode = 'latest' THEN
        IF w.n <= 1 THEN
            RETURN NULL;
        END IF;
        v_skip := w.dues[1:least(w.n - 1, timers._skip_rows_cap())];
        v_event := timers._record_skips(t, v_skip, w.n - 1, w.first_due, w.before_last,
            format('%s; coalesced into the run due at %s', p_reason, timers._iso(w.last_due)), p_runner);
        UPDATE timers.timers SET next_due_at = w.last_due, catch_up_due_at = NULL WHERE id = t.id;
        RETURN v_event || jsonb_build_object('timer', t.name, 'next_due_at', timers._iso(w.last_due));
    END IF;
    -- skip
    v_event := timers._record_skips(t, w.dues, w.n, w.first_due, w.last_due, p_reason, p_runner);
    UPDATE timers.timers
       SET next_due_at = w.next_due, catch_up_due_at = NULL, expired = (w.next_due IS NULL)
     WHERE id = t.id;
    RETURN v_event || jsonb_build_object('timer', t.name, 'next_due_at', timers._iso(w.next_due));
END
$$;

-- ---------------------------------------------------------------------------
-- One run
-- ---------------------------------------------------------------------------

-- Run a timer's SQL as its owner, in a sub-block (a savepoint): an error or the
-- time limit (statement_timeout, set by the runner before the call) rolls back
-- the SQL's effects only. Sets the run context first. Returns the outcome.
CREATE OR REPLACE FUNCTION timers._execute(t timers.timers, p_due timestamptz, p_now timestamptz)
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
BEGIN
    PERFORM set_config('pgtimers.timer', t.name, true);
    PERFORM set_config('pgtimers.due_at', timers._iso(p_due), true);
    PERFORM set_config('application_name', left('pgtimers: ' || t.name, 63), true);
    v_start := clock_timestamp();
    BEGIN
        -- a trading timer whose calendar is gone fails: calendar 'X' does not exist
        PERFORM timers._calendar_ready(t.spec, p_due, timers._zone(t.timezone));
        v_rows := timers._exec_as(t.owner, t.sql);
    EXCEPTION
        WHEN query_canceled THEN
            v_ok := false;
            v_state := SQLSTATE;
            v_error := CASE WHEN SQLERRM LIKE '%statement timeout%'
                            THEN format('timed out: the run took longer than its timeout of %s',
                                        coalesce(t.timeout, interval '10 minutes'))
                            ELSE SQLERRM END;
        WHEN OTHERS THEN
            v_ok := false;
            v_state := SQLSTATE;
            v_error := SQLERRM;
    END;
    RETURN jsonb_build_object(
        'ok', v_ok, 'error', v_error, 'sqlstate', v_state, 'rows', coalesce(v_rows, 0),
        'started_at', v_start, 'took_ms', timers._ms(clock_timestamp() - v_start),
        'late_ms', CASE WHEN t.test_clock IS NULL THEN timers._ms(v_start - p_due)
                        ELSE timers._ms(p_now - p_due) END);
END
$$;

-- The seed's rule after a run of due time p_due that started at p_started and
-- ended at p_ended (t.scheduled_runs already counts it). The next due time n1
-- normally comes after the run ended. When it came during the run, it gets one
-- catch-up run right away if the run took less than one interval (n1 - p_due)
-- and ended before the regular time after n1; otherwise every due time that
-- came during the run is skipped and the timer keeps its regular times.
-- catch_up = 'all' never skips: each due time runs, in order.
CREATE OR REPLACE FUNCTION timers._after_run(
    t timers.timers, p_due timestamptz, p_started timestamptz, p_ended timestamptz,
    OUT next_due timestamptz, OUT catch_up boolean, OUT skip_n bigint,
    OUT skip_first timestamptz, OUT skip_last timestamptz, OUT skip_dues timestamptz[])
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_n1 timestamptz := timers._plan(t, p_due);
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

-- The whole run of one due time, in the caller's transaction. The runner has
-- claimed the row (pgtimers/queries.sql claim_due) and set statement_timeout;
-- this locks it again (a no-op for the claimer), so it is also safe to call on
-- its own. Returns NULL when the due time is not this caller's to run (run by
-- someone else, being run, no longer due), else what happened, as jsonb.
CREATE OR REPLACE FUNCTION timers._run_due(p_id bigint, p_due timestamptz, p_runner text)
    RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    t timers.timers;
    v_now timestamptz;
    v_due timestamptz := p_due;
    v_kind text;
    v_started timestamptz;
    v_ended timestamptz;
    v_cap integer := timers._skip_rows_cap();
    v_skips jsonb := '[]';
    v_event jsonb;
    w record;
    a record;
    r jsonb;
    v_ok boolean;
    v_late bigint;
BEGIN
    SELECT * INTO t FROM timers.timers
     WHERE id = p_id AND next_due_at = p_due FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
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
    v_now := timers._now(t.test_clock);
    IF v_now IS NULL OR p_due > v_now THEN
        RETURN NULL;
    END IF;
    PERFORM pg_advisory_xact_lock(timers._running_lock_class(), t.id::integer);
    v_kind := CASE WHEN t.catch_up_due_at = p_due THEN 'catch_up' ELSE 'scheduled' END;

    -- Never run a due time whose successor has come (unless catch_up = 'all'):
    -- the earlier ones are skipped, the latest runs.
    IF coalesce(t.catch_up, 'skip') <> 'all' AND t.spec->>'kind' <> 'once' THEN
        w := timers._walk_dues(t, p_due, v_now);
        IF w.n > 1 THEN
            v_event := timers._record_skips(t, w.dues[1:least(w.n - 1, v_cap)], w.n - 1,
                w.first_due, w.before_last,
                'late: the next due time had come before a run could start', p_runner);
            v_skips := v_skips || jsonb_build_array(v_event);
            v_due := w.last_due;
            v_kind := 'scheduled';
        END IF;
    END IF;

    r := timers._execute(t, v_due, v_now);
    v_ok := (r->>'ok')::boolean;
    v_late := (r->>'late_ms')::bigint;
    IF t.test_clock IS NULL THEN
        v_started := (r->>'started_at')::timestamptz;
        v_ended := clock_timestamp();
    ELSE
        v_started := v_now;
        v_ended := v_now;
    END IF;

    t.scheduled_runs := t.scheduled_runs + 1;
    a := timers._after_run(t, v_due, v_started, v_ended);
    IF a.skip_n > 0 THEN
        v_event := timers._record_skips(t, a.skip_dues, a.skip_n, a.skip_first, a.skip_last,
            format('the run due at %s was still running', timers._iso(v_due)), p_runner);
        v_skips := v_skips || jsonb_build_array(v_event);
    END IF;

    UPDATE timers.timers SET
        last_due_at = v_due,
        last_run_at = v_started,
        last_late_ms = v_late,
        max_late_ms = greatest(max_late_ms, v_late),
        last_ok = v_ok,
        last_error = r->>'error',
        last_took_ms = (r->>'took_ms')::bigint,
        last_rows = (r->>'rows')::bigint,
        runs = runs + 1,
        scheduled_runs = scheduled_runs + 1,
        failures = failures + CASE WHEN v_ok THEN 0 ELSE 1 END,
        caught_up = caught_up + CASE WHEN v_kind = 'catch_up' THEN 1 ELSE 0 END,
        next_due_at = a.next_due,
        catch_up_due_at = CASE WHEN a.catch_up THEN a.next_due END,
        expired = (a.next_due IS NULL)
     WHERE id = t.id;
    INSERT INTO timers.runs (timer_id, timer, kind, due_at, started_at, took_ms, late_ms, ok,
                             error, rows, runner)
    VALUES (t.id, t.name, v_kind, v_due, (r->>'started_at')::timestamptz, (r->>'took_ms')::bigint,
            v_late, v_ok, r->>'error', (r->>'rows')::bigint, p_runner);

    RETURN jsonb_build_object(
        'timer', t.name, 'kind', v_kind, 'due_at', timers._iso(v_due), 'ok', v_ok,
        'error', r->>'error', 'sqlstate', r->>'sqlstate', 'rows', (r->>'rows')::bigint,
        'took_ms', (r->>'took_ms')::bigint, 'late_ms', v_late,
        'next_due_at', timers._iso(a.next_due), 'expired', a.next_due IS NULL,
        'skipped', v_skips);
END
$$;

-- ---------------------------------------------------------------------------
-- Run now (CALL timers.run)
-- ---------------------------------------------------------------------------

-- Queue a run-now request. p_actor is the caller's role in effect; a session
-- that cannot act as it is refused. Refuses a running timer (55P03) and a
-- database that no runner serves (55000).
CREATE OR REPLACE FUNCTION timers._run_ask(p_actor name, p_name text) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    t timers.timers;
    v_id bigint;
BEGIN
    PERFORM timers._take_ticket(p_actor, 'run a timer');
    IF NOT pg_has_role(p_actor, 'pgtimers_admin', 'MEMBER') THEN
        RAISE EXCEPTION 'permission denied to run a timer: it needs the role pgtimers_admin, and role "%" is not a member', p_actor
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
    IF EXISTS (SELECT 1 FROM timers.run_requests q WHERE q.timer_id = t.id AND q.finished_at IS NULL) THEN
        RAISE EXCEPTION 'timer ''%'' is running', t.name
            USING ERRCODE = '55P03', DETAIL = 'A run-now of it is waiting for the runner.';
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
-- next_due_at or last_due_at; counts in runs and failures, not in max_runs.
CREATE OR REPLACE FUNCTION timers._run_request(p_request bigint, p_runner text) RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    q timers.run_requests;
    t timers.timers;
    r jsonb;
    v_now timestamptz;
    v_ok boolean;
    v_result jsonb;
BEGIN
    SELECT * INTO q FROM timers.run_requests
     WHERE id = p_request AND finished_at IS NULL FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    SELECT * INTO t FROM timers.timers WHERE id = q.timer_id FOR UPDATE;
    IF NOT FOUND THEN
        v_result := jsonb_build_object('name', q.timer, 'finished', true, 'ok', false,
            'error', 'the timer was deleted before it could run', 'took_ms', 0, 'rows', 0);
    ELSE
        PERFORM pg_advisory_xact_lock(timers._running_lock_class(), t.id::integer);
        v_now := coalesce(timers._now(t.test_clock), now());
        r := timers._execute(t, v_now, v_now);
        v_ok := (r->>'ok')::boolean;
        UPDATE timers.timers SET
            last_run_at = CASE WHEN t.test_clock IS NULL THEN (r->>'started_at')::timestamptz ELSE v_now END,
            last_ok = v_ok,
            last_error = r->>'error',
            last_took_ms = (r->>'took_ms')::bigint,
            last_rows = (r->>'rows')::bigint,
            runs = runs + 1,
            failures = failures + CASE WHEN v_ok THEN 0 ELSE 1 END
         WHERE id = t.id;
        INSERT INTO timers.runs (timer_id, timer, kind, due_at, started_at, took_ms, ok, error, rows, runner)
        VALUES (t.id, t.name, 'run_now', NULL, (r->>'started_at')::timestamptz, (r->>'took_ms')::bigint,
                v_ok, r->>'error', (r->>'rows')::bigint, p_runner);
        v_result := jsonb_build_object('name', t.name, 'finished', true, 'ok', v_ok,
            'error', r->>'error', 'took_ms', (r->>'took_ms')::bigint, 'rows', (r->>'rows')::bigint);
    END IF;
    UPDATE timers.run_requests SET finished_at = clock_timestamp(), result = v_result WHERE id = q.id;
    RETURN v_result || jsonb_build_object('timer', v_result->>'name', 'kind', 'run_now',
                                          'sqlstate', r->>'sqlstate');
END
$$;

-- A procedure that commits cannot run inside a transaction block. The run-now
-- and advance procedures find out first: inside an exception block COMMIT always
-- fails, and its message tells a transaction block (atomic context: "invalid
-- transaction termination") from a plain CALL ("cannot commit while a
-- subtransaction is active"). plpgsql_check flags that COMMIT, on purpose here.
CREATE OR REPLACE FUNCTION timers._in_transaction_block_message() RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT 'invalid transaction termination' $$;

CREATE OR REPLACE PROCEDURE timers.run(name text, INOUT result jsonb DEFAULT NULL)
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_probe text;
    v_request bigint;
    v_deadline timestamptz;
    v_started timestamptz := clock_timestamp();
    v_nap double precision := 0.005;
BEGIN
    PERFORM 'PRAGMA:DISABLE:CHECK';
    BEGIN
        COMMIT;
    EXCEPTION WHEN invalid_transaction_termination THEN
        GET STACKED DIAGNOSTICS v_probe = MESSAGE_TEXT;
    END;
    PERFORM 'PRAGMA:ENABLE:CHECK';
    IF v_probe = timers._in_transaction_block_message() THEN
        RAISE EXCEPTION 'CALL timers.run() cannot be used inside a transaction block: it commits so that the runner can see the request'
            USING ERRCODE = '25001', HINT = 'Call it on its own, in autocommit mode.';
    END IF;
    PERFORM timers._require_admin('run a timer');
    v_request := timers._run_ask(current_user, run.name);
    COMMIT;
    v_deadline := v_started + interval '60 seconds';
    LOOP
        result := timers._run_answer(v_request);
        EXIT WHEN result IS NOT NULL;
        IF clock_timestamp() >= v_deadline THEN
            result := jsonb_build_object('name', run.name, 'finished', false, 'ok', NULL, 'error', '',
                'took_ms', timers._ms(clock_timestamp() - v_started), 'rows', 0);
            EXIT;
        END IF;
        PERFORM pg_sleep(v_nap);
        v_nap := least(v_nap * 2, 0.1);
    END LOOP;
END
$$;

COMMENT ON PROCEDURE timers.run(text, jsonb) IS
    'Run a timer now through the runner (also when it is off) and wait up to 60 s: result is {name, finished, ok, error, took_ms, rows}. Already running: 55P03. Not inside a transaction block (it commits). Needs pgtimers_admin.';

-- ---------------------------------------------------------------------------
-- Runners: liveness, downtime, clock jumps, retention
-- ---------------------------------------------------------------------------

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
                         WHERE d.test_clock IS NULL AND d.next_due_at <= now()
                        UNION ALL
                        SELECT d.id FROM timers.timers d
                          JOIN timers.test_clocks k ON k.name = d.test_clock
                         WHERE d.test_clock IS NOT NULL AND d.next_due_at IS NOT NULL
                           AND d.next_due_at <= k.now)
           AND x.enabled AND NOT x.expired
         ORDER BY x.id
           FOR UPDATE OF x SKIP LOCKED
    LOOP
        -- a test clock only moves while a runner is up (or it is downtime): no p_since there
        v_event := timers._apply_gap(t, timers._now(t.test_clock), p_reason, p_runner,
                                     CASE WHEN t.test_clock IS NULL THEN p_since END);
        IF v_event IS NOT NULL THEN
            v_events := v_events || jsonb_build_array(v_event);
        END IF;
    END LOOP;
    RETURN v_events;
END
$$;

-- A runner starts serving this database. When no other runner is live, the
-- due times missed before now were missed while no runner served it: they
-- follow each timer's catch_up. Then the caller's session holds the shared
-- liveness lock until it ends (or timers._runner_stop).
CREATE OR REPLACE FUNCTION timers._runner_start(
    p_runner text, p_host text, p_os_pid integer, p_version text, p_workers integer) RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_others integer;
    v_since timestamptz;
    v_events jsonb := '[]';
BEGIN
    PERFORM pg_advisory_xact_lock(timers._runner_lock_class(), 1);
    v_others := timers._live_runners();
    IF v_others = 0 THEN
        -- a live runner updates seen_at every second; the margin covers that
        v_since := (SELECT max(r.seen_at) FROM timers.runners r) + interval '2 seconds';
        v_events := timers._apply_gaps('no runner was serving the database', p_runner, v_since);
    END IF;
    PERFORM pg_advisory_lock_shared(timers._runner_lock_class(), 0);
    -- rows of runners gone for a week are history nobody needs
    DELETE FROM timers.runners r WHERE r.id = p_runner OR r.seen_at < now() - interval '7 days';
    INSERT INTO timers.runners (id, host, os_pid, backend_pid, version, workers)
    VALUES (p_runner, p_host, p_os_pid, pg_backend_pid(), p_version, p_workers);
    RETURN jsonb_build_object('other_runners', v_others, 'downtime', v_others = 0,
                              'last_seen', v_since - interval '2 seconds', 'skipped', v_events);
END
$$;

-- The runner is alive (called every second; durability is not needed for it).
CREATE OR REPLACE FUNCTION timers._runner_beat(p_runner text) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    UPDATE timers.runners SET seen_at = now() WHERE id = p_runner;
END
$$;

-- A runner stops serving (its row stays: seen_at says until when it served).
CREATE OR REPLACE FUNCTION timers._runner_stop(p_runner text) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    UPDATE timers.runners SET seen_at = now() WHERE id = p_runner;
    PERFORM pg_advisory_unlock_shared(timers._runner_lock_class(), 0);
END
$$;

-- The server's clock was set forward from p_from to p_to: due times in that
-- span were jumped over; they follow each timer's catch_up like downtime.
CREATE OR REPLACE FUNCTION timers._clock_jump(p_from timestamptz, p_to timestamptz, p_runner text)
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
         WHERE x.test_clock IS NULL AND x.next_due_at > p_from AND x.next_due_at <= p_to
           AND x.enabled AND NOT x.expired
         ORDER BY x.id
           FOR UPDATE SKIP LOCKED
    LOOP
        v_event := timers._apply_gap(t, p_to, 'the clock was set forward', p_runner);
        IF v_event IS NOT NULL THEN
            v_events := v_events || jsonb_build_array(v_event);
        END IF;
    END LOOP;
    RETURN v_events;
END
$$;

-- Retention: history older than settings.runs_retention, finished run-now
-- requests older than a day, and requests no runner took within 5 minutes.
-- One runner prunes at a time; returns NULL when another one is at it.
CREATE OR REPLACE FUNCTION timers._prune() RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_keep interval;
    v_runs bigint := 0;
    v_batch bigint;
    v_requests bigint;
BEGIN
    IF NOT pg_try_advisory_xact_lock(timers._runner_lock_class(), 2) THEN
        RETURN NULL;
    END IF;
    v_keep := coalesce((SELECT value::interval FROM timers.settings WHERE key = 'runs_retention'),
                       interval '30 days');
    -- caller tickets left by transactions that have ended (a call that checked rights but
    -- then acted for nobody leaves one)
    DELETE FROM timers.callers WHERE xid < pg_snapshot_xmin(pg_current_snapshot());
    LOOP
        DELETE FROM timers.runs WHERE id IN (
            SELECT id FROM timers.runs WHERE started_at < now() - v_keep LIMIT 10000);
        GET DIAGNOSTICS v_batch = ROW_COUNT;
        v_runs := v_runs + v_batch;
        EXIT WHEN v_batch < 10000;
    END LOOP;
    UPDATE timers.run_requests
       SET finished_at = clock_timestamp(),
           result = jsonb_build_object('name', timer, 'finished', false, 'ok', NULL,
                                       'error', 'no runner took the request within 5 minutes',
                                       'took_ms', 0, 'rows', 0)
     WHERE finished_at IS NULL AND requested_at < now() - interval '5 minutes';
    DELETE FROM timers.run_requests WHERE finished_at < now() - interval '1 day';
    GET DIAGNOSTICS v_requests = ROW_COUNT;
    RETURN jsonb_build_object('runs', v_runs, 'run_requests', v_requests, 'retention', v_keep::text);
END
$$;

-- ---------------------------------------------------------------------------
-- Test clocks
-- ---------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION timers._no_such_test_clock(p_name text) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    RAISE EXCEPTION 'there is no test clock ''%'' in database %', p_name, current_database()
        USING ERRCODE = 'P0002';
END
$$;

CREATE OR REPLACE FUNCTION timers._create_test_clock(p_actor name, p_name text, p_at timestamptz)
    RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM timers._take_ticket(p_actor, 'create a test clock');
    IF p_name IS NULL OR p_name !~ '^[A-Za-z0-9_-]{1,64}$' THEN
        RAISE EXCEPTION 'bad test clock name ''%'': use 1 to 64 letters, digits, _ and -', p_name
            USING ERRCODE = '22023';
    END IF;
    IF p_at IS NULL THEN
        RAISE EXCEPTION 'frozen_at must be a time, not NULL' USING ERRCODE = '22004';
    END IF;
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

-- One step of an advance: move the clock to its next owed due time (or to
-- p_to when none is owed, or when no runner is up: then the due times it
-- passes are missed, as in downtime). Returns {done, at, owed, runner, now}.
CREATE OR REPLACE FUNCTION timers._clock_step(p_actor name, p_name text, p_to timestamptz, p_first boolean)
    RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    c timers.test_clocks;
    v_runner boolean := timers._live_runners() > 0;
    v_next timestamptz;
    v_at timestamptz;
    v_owed integer;
BEGIN
    PERFORM timers._take_ticket(p_actor, 'advance a test clock');
    IF NOT pg_has_role(p_actor, 'pgtimers_admin', 'MEMBER') THEN
        RAISE EXCEPTION 'permission denied to advance a test clock: it needs the role pgtimers_admin'
            USING ERRCODE = '42501';
    END IF;
    SELECT * INTO c FROM timers.test_clocks WHERE name = p_name FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM timers._no_such_test_clock(p_name);
    END IF;
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
        SELECT min(t.next_due_at) INTO v_next FROM timers.timers t
         WHERE t.test_clock = c.name AND t.next_due_at IS NOT NULL AND t.next_due_at <= p_to;
    END IF;
    IF v_next IS NULL THEN
        UPDATE timers.test_clocks SET now = p_to WHERE name = c.name;
        RETURN jsonb_build_object('done', true, 'runner', v_runner, 'now', timers._iso(p_to), 'owed', 0);
    END IF;
    v_at := greatest(v_next, c.now);
    UPDATE timers.test_clocks SET now = v_at WHERE name = c.name;
    SELECT count(*) INTO v_owed FROM timers.timers t
     WHERE t.test_clock = c.name AND t.next_due_at IS NOT NULL AND t.next_due_at <= v_at;
    PERFORM timers._notify('advance_test_clock', c.name);
    RETURN jsonb_build_object('done', false, 'runner', true, 'at', v_at, 'now', timers._iso(v_at), 'owed', v_owed);
END
$$;

-- How many timers of a clock still owe a due time at or before p_at.
CREATE OR REPLACE FUNCTION timers._clock_owed(p_name text, p_at timestamptz) RETURNS integer
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
        SELECT count(*)::integer FROM timers.timers t
         WHERE t.test_clock = p_name AND t.next_due_at IS NOT NULL AND t.next_due_at <= p_at
    $$;

-- Redeliver: offer every due time fired at p_at once more; each must answer
-- that it has run already (the exactly-once guard). Returns how many did.
CREATE OR REPLACE FUNCTION timers._clock_redeliver(p_name text, p_at timestamptz) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_id bigint;
    v_replayed integer := 0;
BEGIN
    FOR v_id IN SELECT t.id FROM timers.timers t WHERE t.test_clock = p_name AND t.last_due_at = p_at LOOP
        IF timers._run_due(v_id, p_at, 'redeliver') IS NULL THEN
            v_replayed := v_replayed + 1;
        ELSE
            RAISE EXCEPTION 'due time % of timer % ran twice', timers._iso(p_at), v_id USING ERRCODE = 'XX000';
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
    v_probe text;
    v_step jsonb;
    v_first boolean := true;
    v_fired bigint := 0;
    v_replayed bigint := 0;
    v_at timestamptz;
    v_deadline timestamptz;
    v_nap double precision;
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
        v_deadline := clock_timestamp() + interval '60 seconds';
        v_nap := 0.002;
        WHILE timers._clock_owed(advance_test_clock.name, v_at) > 0 LOOP
            IF clock_timestamp() > v_deadline THEN
                RAISE EXCEPTION 'test clock ''%'': the runner did not fire the due times at % within 60 seconds',
                    advance_test_clock.name, timers._iso(v_at) USING ERRCODE = '57014';
            END IF;
            PERFORM pg_sleep(v_nap);
            v_nap := least(v_nap * 2, 0.05);
        END LOOP;
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

-- Deleting a clock voids its timers: each one's next due time is skipped
-- ("test clock 'X' was deleted"), it is expired with no next due time, and it
-- is back on the server's clock only when saved again.
CREATE OR REPLACE FUNCTION timers._delete_test_clock(p_actor name, p_name text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    c timers.test_clocks;
    t timers.timers;
    v_reason text;
    v_voided integer := 0;
BEGIN
    PERFORM timers._take_ticket(p_actor, 'delete a test clock');
    SELECT * INTO c FROM timers.test_clocks WHERE lower(name) = lower(p_name) COLLATE "default" FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM timers._no_such_test_clock(p_name);
    END IF;
    v_reason := format('test clock ''%s'' was deleted: the timer is void', c.name);
    FOR t IN SELECT * FROM timers.timers WHERE test_clock = c.name ORDER BY id FOR UPDATE LOOP
        IF t.next_due_at IS NOT NULL THEN
            PERFORM timers._record_skips(t, ARRAY[t.next_due_at], 1, t.next_due_at, t.next_due_at, v_reason, '');
        END IF;
        UPDATE timers.timers SET next_due_at = NULL, catch_up_due_at = NULL, expired = true WHERE id = t.id;
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

COMMENT ON FUNCTION timers.create_test_clock(text, timestamptz) IS
    'Make a test clock frozen at frozen_at; timers saved with test_clock => name live on its time. Returns {name, now}. Needs pgtimers_admin.';
COMMENT ON PROCEDURE timers.advance_test_clock(text, timestamptz, boolean, jsonb) IS
    'Move a test clock forward to "to", stopping at every due time of its timers so the runner fires each (returns when they have committed); with no runner up it only moves the clock (a NOTICE says so), which simulates downtime. Backward: test_clock_backward (22023). redeliver => true offers each fired due time once more, which must answer it ran already. Needs pgtimers_admin.';
COMMENT ON FUNCTION timers.delete_test_clock(text) IS
    'Delete a test clock and void its timers (expired, no next due time, the due time they owed skipped with the reason). Needs pgtimers_admin.';
COMMENT ON TABLE timers.runners IS
    'Runners serving this database; a runner is live while its session holds the shared advisory lock (28776, 0).';
COMMENT ON TABLE timers.run_requests IS
    'Run-now requests of CALL timers.run, with the result the runner wrote.';

-- ---------------------------------------------------------------------------
-- Rights
-- ---------------------------------------------------------------------------
REVOKE ALL ON FUNCTION
    timers._due(integer), timers._next_wake(), timers._live_runners(),
    timers._record_skips(timers.timers, timestamptz[], bigint, timestamptz, timestamptz, text, text),
    timers._walk_dues(timers.timers, timestamptz, timestamptz),
    timers._apply_gap(timers.timers, timestamptz, text, text, timestamptz),
    timers._execute(timers.timers, timestamptz, timestamptz),
    timers._after_run(timers.timers, timestamptz, timestamptz, timestamptz),
    timers._run_due(bigint, timestamptz, text),
    timers._run_ask(name, text), timers._run_answer(bigint),
    timers._run_request(bigint, text),
    timers._apply_gaps(text, text, timestamptz),
    timers._runner_start(text, text, integer, text, integer),
    timers._runner_beat(text), timers._runner_stop(text),
    timers._clock_jump(timestamptz, timestamptz, text), timers._prune(),
    timers._create_test_clock(name, text, timestamptz),
    timers._clock_step(name, text, timestamptz, boolean),
    timers._clock_owed(text, timestamptz), timers._clock_redeliver(text, timestamptz),
    timers._delete_test_clock(name, text),
    timers.create_test_clock(text, timestamptz), timers.delete_test_clock(text)
    FROM PUBLIC;
REVOKE ALL ON PROCEDURE timers.run(text, jsonb),
    timers.advance_test_clock(text, timestamptz, boolean, jsonb) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION
    timers._due(integer), timers._next_wake(), timers._live_runners(),
    timers._record_skips(timers.timers, timestamptz[], bigint, timestamptz, timestamptz, text, text),
    timers._walk_dues(timers.timers, timestamptz, timestamptz),
    timers._apply_gap(timers.timers, timestamptz, text, text, timestamptz),
    timers._execute(timers.timers, timestamptz, timestamptz),
    timers._after_run(timers.timers, timestamptz, timestamptz, timestamptz),
    timers._run_due(bigint, timestamptz, text),
    timers._run_request(bigint, text),
    timers._apply_gaps(text, text, timestamptz),
    timers._runner_start(text, text, integer, text, integer),
    timers._runner_beat(text), timers._runner_stop(text),
    timers._clock_jump(timestamptz, timestamptz, text), timers._prune()
    TO pgtimers_runner;
GRANT EXECUTE ON FUNCTION
    timers._run_ask(name, text), timers._run_answer(bigint),
    timers._create_test_clock(name, text, timestamptz),
    timers._clock_step(name, text, timestamptz, boolean),
    timers._clock_owed(text, timestamptz), timers._clock_redeliver(text, timestamptz),
    timers._delete_test_clock(name, text),
    timers.create_test_clock(text, timestamptz), timers.delete_test_clock(text)
    TO pgtimers_admin;
GRANT EXECUTE ON PROCEDURE timers.run(text, jsonb),
    timers.advance_test_clock(text, timestamptz, boolean, jsonb) TO pgtimers_admin;
