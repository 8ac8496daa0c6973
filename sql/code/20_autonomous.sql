-- pgtimers code: autonomous timers, whose SQL the runner runs as the timer's owner in a
-- session of that login, statement by statement, outside any transaction block: the
-- attempt committed as started, the outcome written when the runner reports it, and an
-- attempt that never reports back recorded as interrupted.
--
-- Repeatable: applied whole on every install and upgrade, after the versioned
-- migrations (docs/design.md). Each object here is defined in this file only.

-- Whether timer t has an autonomous attempt under way (started, not yet recorded): it
-- is then neither claimed nor run again, and changes to it wait (timers._lock_or_running).
CREATE OR REPLACE FUNCTION timers._autonomous_open(t timers.timers) RETURNS boolean
    LANGUAGE sql STABLE
    AS $$
        SELECT t.autonomous AND EXISTS (SELECT 1 FROM timers.autonomous_runs o WHERE o.timer_id = t.id)
    $$;

-- The login an autonomous timer's run logs in as: the owner of its executor (the role it
-- runs as, by oid: renamed, it is still that role), by its name now. NULL for an atomic
-- timer, and for one whose executor is gone (DROP OWNED): that run goes the atomic way,
-- which fails naming the owner (timers._saved_executor).
CREATE OR REPLACE FUNCTION timers._autonomous_owner(t timers.timers) RETURNS name
    LANGUAGE sql STABLE
    AS $$
        SELECT r.rolname FROM pg_roles r
         WHERE t.autonomous AND r.oid = timers._executor_owner(t.executor)
    $$;

-- Whether an autonomous attempt can still report back: the server has not restarted since
-- it started, and its runner's session (runner_pid) or the owner's session that runs its
-- SQL (owner_pid) is still there, a backend of the same login. pg_stat_activity shows
-- every backend's pid and login to every role.
CREATE OR REPLACE FUNCTION timers._autonomous_alive(a timers.autonomous_runs) RETURNS boolean
    LANGUAGE sql STABLE
    AS $$
        SELECT a.server_started = pg_postmaster_start_time()
           AND EXISTS (SELECT 1 FROM pg_stat_activity s
                        WHERE (s.pid = a.runner_pid AND s.usesysid = a.runner_login)
                           OR (s.pid = a.owner_pid AND s.usesysid = a.owner_login))
    $$;

-- The statements of a timer's SQL, each as written (from its first word to the ';' that
-- ends it), split where the save-time check splits them (timers._sql_statements: a ';'
-- inside a string, a comment, a dollar-quoted body or BEGIN ATOMIC ... END does not end
-- a statement). An autonomous run sends them one at a time, each committing by itself.
CREATE OR REPLACE FUNCTION timers._autonomous_statements(p_sql text) RETURNS text[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
        SELECT coalesce(array_agg(x.stmt ORDER BY x.n), '{}')
          FROM (SELECT s.n, substr(p_sql, s.pos,
                                   coalesce(lead(s.pos) OVER (ORDER BY s.n), length(p_sql) + 1) - s.pos) AS stmt
                  FROM timers._sql_statements(p_sql) s) x
         WHERE rtrim(x.stmt, E' \t\n\r\f\x0b;') <> ''
    $$;

-- Start an attempt of autonomous timer t (its row locked by the caller, timers._run_due,
-- _run_retry or _run_request): commit it as started before any of its SQL runs. A
-- scheduled due time p_due is taken at once (last_due_at; the next due time moves on, to
-- p_n1 or as planned), a retry keeps its place until it is recorded, a run-now request
-- stays open; the timers.runs row (ok NULL: running) and the timers.autonomous_runs row
-- say it is under way, and keep the claim off the timer until timers._autonomous_finish
-- or _autonomous_sweep records it. Returns {"autonomous": {...}}: what the runner runs,
-- as whom, with which run settings and time limit.
CREATE OR REPLACE FUNCTION timers._autonomous_start(
    t timers.timers, p_source text, p_kind text, p_due timestamptz, p_attempt integer,
    p_planned timestamptz, p_prev timestamptz, p_n1 timestamptz, p_skips jsonb, p_request bigint,
    p_runner text)
    RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
    v_next timestamptz := p_n1;
    v_run bigint;
BEGIN
    IF p_source = 'timer' THEN
        -- as timers._due_recorded will count it: max_runs may end the timer with this run
        t.scheduled_runs := t.scheduled_runs + 1;
        IF v_next IS NULL OR t.max_runs IS NOT NULL THEN
            v_next := timers._plan(t, p_due);
        END IF;
        UPDATE timers.timers SET last_due_at = p_due, next_due_at = v_next, catch_up_due_at = NULL
         WHERE id = t.id;
    END IF;
    INSERT INTO timers.runs (timer_id, timer, kind, due_at, started_at, late_ms, ok, runner, attempt)
    VALUES (t.id, t.name, p_kind, p_due, v_started, timers._ms(v_started - p_planned), NULL, p_runner,
            p_attempt)
    RETURNING id INTO v_run;
    INSERT INTO timers.autonomous_runs (timer_id, run_id, source, kind, due_at, attempt, request_id,
                                        planned_at, next_due, skips, runner, runner_pid, runner_login,
                                        server_started, started_at)
    VALUES (t.id, v_run, p_source, p_kind, p_due, p_attempt, p_request, p_planned, v_next,
            coalesce(p_skips, '[]'), p_runner, pg_backend_pid(),
            (SELECT r.oid FROM pg_roles r WHERE r.rolname = session_user),
            pg_postmaster_start_time(), v_started);
    RETURN jsonb_build_object(
        'timer', t.name, 'kind', p_kind, 'due_at', timers._iso(p_due), 'skipped', coalesce(p_skips, '[]'),
        'autonomous', jsonb_build_object(
            'run_id', v_run, 'timer', t.name, 'owner', timers._autonomous_owner(t),
            'statements', to_jsonb(timers._autonomous_statements(t.sql)),
            'due_at', coalesce(timers._iso(p_due), ''), 'prev_due_at', coalesce(timers._iso(p_prev), ''),
            'attempt', p_attempt, 'timeout_ms', timers._ms(coalesce(t.timeout, timers._run_timeout()))));
END
$$;

-- The runner's word that the owner's session of autonomous run p_run is up: its backend
-- pid and login, by which timers._autonomous_alive knows it runs while the runner's own
-- session may be gone.
CREATE OR REPLACE FUNCTION timers._autonomous_began(p_run bigint, p_pid integer, p_login name)
    RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    UPDATE timers.autonomous_runs
       SET owner_pid = p_pid, owner_login = (SELECT r.oid FROM pg_roles r WHERE r.rolname = p_login)
     WHERE run_id = p_run;
END
$$;

-- Record the outcome of autonomous run p_run, as the runner saw it (p_outcome: {ok,
-- error, sqlstate, rows, messages, messages_cut}): its running rows go and the attempt is recorded by the routine
-- that records an attempt of its kind (timers._due_recorded, _retry_recorded,
-- _request_recorded): retries, pause_after, due times that came while it ran, all as for
-- a timer run in one transaction. NULL when it was recorded already (an attempt taken for
-- dead, timers._autonomous_sweep) or its timer is gone.
CREATE OR REPLACE FUNCTION timers._autonomous_finish(p_run bigint, p_outcome jsonb, p_runner text)
    RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_timer bigint := (SELECT a.timer_id FROM timers.autonomous_runs a WHERE a.run_id = p_run);
    t timers.timers;
    a timers.autonomous_runs;
BEGIN
    IF p_outcome IS NULL OR jsonb_typeof(p_outcome->'ok') IS DISTINCT FROM 'boolean' THEN
        RAISE EXCEPTION 'an autonomous run''s outcome needs ok (a boolean), error, sqlstate and rows'
            USING ERRCODE = '22023';
    END IF;
    -- the timer's row first, as every claim takes it
    SELECT * INTO t FROM timers.timers WHERE id = v_timer FOR UPDATE;
    SELECT * INTO a FROM timers.autonomous_runs o WHERE o.run_id = p_run FOR UPDATE;
    IF t.id IS NULL OR a.run_id IS NULL THEN
        RETURN NULL;
    END IF;
    RETURN timers._autonomous_record(t, a, p_outcome, p_runner);
END
$$;

-- Record attempt a of timer t (both rows locked by the caller) with outcome p_outcome
-- ({ok, error, sqlstate, rows}; error as the server said it, made plain here by
-- timers._run_error; messages: what the owner's session was told while it ran, its NOTICE,
-- INFO and WARNING messages and its error's DETAIL and HINT, of which the runner cut
-- messages_cut bytes already: kept to 8 KB, timers._messages_cut).
CREATE OR REPLACE FUNCTION timers._autonomous_record(
    t timers.timers, a timers.autonomous_runs, p_outcome jsonb, p_runner text)
    RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
DECLARE
    q timers.run_requests;
    -- the runner's word, read once: from here on a run's outcome like any other
    r timers.run_outcome := ROW(
        (p_outcome->>'ok')::boolean,
        CASE WHEN (p_outcome->>'ok')::boolean THEN ''
             ELSE timers._run_error(coalesce(p_outcome->>'sqlstate', ''),
                                    coalesce(p_outcome->>'error', ''), t.timeout) END,
        coalesce(p_outcome->>'sqlstate', ''),
        coalesce((p_outcome->>'rows')::bigint, 0),
        coalesce(timers._messages_cut(p_outcome->>'messages',
                                      coalesce((p_outcome->>'messages_cut')::bigint, 0)), ''),
        a.started_at,
        greatest(timers._ms(clock_timestamp() - a.started_at), 0),
        timers._ms(a.started_at - a.planned_at));
BEGIN
    DELETE FROM timers.autonomous_runs WHERE timer_id = a.timer_id;
    DELETE FROM timers.runs WHERE id = a.run_id;
    IF a.source = 'timer' THEN
        RETURN timers._due_recorded(t, a.kind, a.due_at, t.next_due_at, a.started_at, r, a.skips, p_runner);
    ELSIF a.source = 'retry' THEN
        RETURN timers._retry_recorded(t, a.started_at, r, p_runner);
    END IF;
    SELECT * INTO q FROM timers.run_requests WHERE id = a.request_id FOR UPDATE;
    RETURN timers._request_recorded(q, t, a.started_at, r, p_runner);
END
$$;

-- Record every autonomous attempt that can no longer report back (timers._autonomous_alive:
-- its runner and the owner's session are gone, or the server restarted) as failed, with
-- an error that starts "interrupted:"; it is not run again unless the timer's retries
-- allow another attempt, which counts as one. Called by the runner before its fires
-- (timers._fire_many). Returns the results to log, as an array.
CREATE OR REPLACE FUNCTION timers._autonomous_sweep(p_runner text) RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    a timers.autonomous_runs;
    t timers.timers;
    v_results jsonb := '[]';
BEGIN
    FOR a IN SELECT * FROM timers.autonomous_runs o ORDER BY o.timer_id LOOP
        CONTINUE WHEN timers._autonomous_alive(a);
        BEGIN
            SELECT * INTO t FROM timers.timers WHERE id = a.timer_id FOR UPDATE SKIP LOCKED;
            CONTINUE WHEN NOT FOUND;
            SELECT * INTO a FROM timers.autonomous_runs o WHERE o.timer_id = t.id FOR UPDATE SKIP LOCKED;
            CONTINUE WHEN NOT FOUND OR timers._autonomous_alive(a);
            v_results := v_results || jsonb_build_array(timers._autonomous_record(t, a, jsonb_build_object(
                'ok', false, 'sqlstate', '', 'rows', 0,
                'error', format('interrupted: the run started at %s by runner %s never reported back (the runner '
                                || 'and the owner''s session ended: a crash, a lost connection or a restart), so '
                                || 'whether its SQL ran to the end is not known; it is not run again unless the '
                                || 'timer''s retries allow', timers._iso(a.started_at), a.runner)), p_runner));
        EXCEPTION WHEN OTHERS THEN
            -- the record itself failed: the runner leaves the timer alone for a while
            v_results := v_results || jsonb_build_array(jsonb_build_object(
                'failed', 'timer', 'id', a.timer_id, 'sqlstate', SQLSTATE, 'error', timers._cut(SQLERRM)));
        END;
    END LOOP;
    RETURN v_results;
END
$$;

-- ---------------------------------------------------------------------------
-- Rights
-- ---------------------------------------------------------------------------
REVOKE ALL ON FUNCTION
    timers._autonomous_open(timers.timers),
    timers._autonomous_owner(timers.timers),
    timers._autonomous_alive(timers.autonomous_runs),
    timers._autonomous_statements(text),
    timers._autonomous_start(timers.timers,text,text,timestamp with time zone,integer,timestamp with time zone,timestamp with time zone,timestamp with time zone,jsonb,bigint,text),
    timers._autonomous_began(bigint,integer,name),
    timers._autonomous_finish(bigint,jsonb,text),
    timers._autonomous_record(timers.timers,timers.autonomous_runs,jsonb,text),
    timers._autonomous_sweep(text)
    FROM PUBLIC, pgtimers_reader, pgtimers_admin, pgtimers_runner;
GRANT EXECUTE ON FUNCTION
    timers._autonomous_open(timers.timers),
    timers._autonomous_owner(timers.timers),
    timers._autonomous_alive(timers.autonomous_runs),
    timers._autonomous_statements(text),
    timers._autonomous_start(timers.timers,text,text,timestamp with time zone,integer,timestamp with time zone,timestamp with time zone,timestamp with time zone,jsonb,bigint,text),
    timers._autonomous_began(bigint,integer,name),
    timers._autonomous_finish(bigint,jsonb,text),
    timers._autonomous_record(timers.timers,timers.autonomous_runs,jsonb,text),
    timers._autonomous_sweep(text)
    TO pgtimers_runner;
