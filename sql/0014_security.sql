-- pgtimers 0014: security.
--
-- 1. What a timer's SQL leaves in the session is undone before anything else runs.
--    A plain SET inside a function overrides the function's own SET clause and
--    persists after it returns (PostgreSQL documents this). A timer's SQL that left
--    `search_path = pg_temp, pg_catalog` made the code after it, in
--    timers._exec_as (SECURITY DEFINER, owned by the role that installed pgtimers)
--    and in the runner's functions, find the owner's temporary view pg_cursors, or
--    an operator in a writable schema, and run it with that code's rights. Now
--    timers._exec_as takes a snapshot of the settings that change what SQL means
--    (timers._guarded_settings) before the SQL, and its first statement after the
--    SQL, a schema-qualified call with no operator in it, puts them back
--    (timers._restore_session): search_path first, so every statement after it
--    runs under search_path = pg_catalog, pg_temp, where no function or operator
--    can come from a user's schema and no temporary relation shadows a catalog's.
--    A setting that cannot be put back (transaction_read_only) fails the run,
--    which rolls the SQL back with it. timers._exec_as is split into one job per
--    function.
-- 2. Correctness never rests on an advisory lock, which any role can take:
--    "running" is the timer row's own lock (only pgtimers' roles can lock it);
--    a runner is live while its registered control backend (pid, role, database,
--    application_name) is; runner starts, pruning and keyed fires take row locks
--    on timers.locks, which only pgtimers' roles can lock; runner start waits at
--    most 10 s and names what holds the lock. The wake-up query no longer reads
--    pg_locks: the runner itself stops asking while a claim finds nothing.
-- 3. Errors are cut to 8,000 characters, marked as cut.
-- 4. timers.enable(name, false) and timers.delete(name) take effect on a running
--    timer: they answer at once, no new run starts, and the running one finishes
--    (timers.pending_changes, applied by whoever holds the timer's row next).
--    timers.cancel(name) cancels a running run.

-- ---------------------------------------------------------------------------
-- Tables
-- ---------------------------------------------------------------------------

-- Locks of pgtimers' own coordination, taken as row locks (FOR UPDATE): only roles
-- with UPDATE on this table (pgtimers_runner, and pgtimers' own functions) can take them.
CREATE TABLE timers.locks (
    name text PRIMARY KEY,
    note text NOT NULL DEFAULT ''
);
INSERT INTO timers.locks (name, note) VALUES
    ('runner_start', 'one runner start at a time: the downtime rules see the runners before it'),
    ('prune', 'one pruner at a time'),
    ('keyed_fire:', 'one keyed fire at a time on the server''s clock: tick order');
INSERT INTO timers.locks (name, note)
SELECT 'keyed_fire:' || c.name, 'one keyed fire at a time on this test clock: tick order'
  FROM timers.test_clocks c;
REVOKE ALL ON timers.locks FROM PUBLIC;
GRANT SELECT, UPDATE (note) ON timers.locks TO pgtimers_runner;
COMMENT ON TABLE timers.locks IS
    'Row locks of pgtimers'' coordination (runner start, pruning, one keyed fire per clock); only pgtimers'' roles can take them.';

-- A runner is live while the backend it registered is: same pid, database, login
-- role (a member of pgtimers_runner) and application_name (which names the runner).
ALTER TABLE timers.runners ADD COLUMN application_name text NOT NULL DEFAULT '';
ALTER TABLE timers.runners ADD COLUMN stopped_at timestamptz;
UPDATE timers.runners SET stopped_at = seen_at;

-- enable(name, false), enable(name) and delete(name) of a timer whose row is locked
-- (a run holds it): done by whoever holds the row next, at the latest when the run ends.
CREATE TABLE timers.pending_changes (
    timer_id     bigint PRIMARY KEY,
    action       text NOT NULL CHECK (action IN ('enable', 'disable', 'delete')),
    requested_by name NOT NULL,
    requested_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
REVOKE ALL ON timers.pending_changes FROM PUBLIC;
GRANT SELECT ON timers.pending_changes TO pgtimers_runner;
COMMENT ON TABLE timers.pending_changes IS
    'Changes asked for while the timer ran (disable, enable, delete): applied when its run ends.';

-- ---------------------------------------------------------------------------
-- 3. Errors are cut
-- ---------------------------------------------------------------------------

-- An error text as stored and logged: at most 8,000 characters, the rest marked as cut.
CREATE OR REPLACE FUNCTION timers._cut(p_text text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    AS $$
        SELECT CASE WHEN length(p_text) <= 8000 THEN p_text
                    ELSE left(p_text, 8000) || format(' … [cut: %s characters in all]', length(p_text)) END
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
            ELSE timers._cut(p_message) END
    $$;

-- ---------------------------------------------------------------------------
-- 1. The run of a timer's SQL, one job per function
-- ---------------------------------------------------------------------------

-- Settings a timer's SQL may change that would change what the code after it means
-- or computes: where names are looked up, how values are read and written, how
-- errors are handled. search_path comes first: it is put back first.
CREATE OR REPLACE FUNCTION timers._guarded_settings() RETURNS text[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
        SELECT ARRAY['search_path', 'exit_on_error', 'TimeZone', 'DateStyle', 'IntervalStyle',
                     'extra_float_digits', 'standard_conforming_strings', 'backslash_quote',
                     'escape_string_warning', 'transform_null_equals', 'array_nulls',
                     'bytea_output', 'xmlbinary', 'xmloption', 'lc_monetary', 'lc_numeric',
                     'lc_time', 'default_text_search_config', 'quote_all_identifiers',
                     'row_security', 'lock_timeout', 'client_encoding', 'client_min_messages',
                     'check_function_bodies', 'plpgsql.variable_conflict',
                     'plpgsql.extra_errors', 'plpgsql.extra_warnings', 'transaction_read_only']::text[]
    $$;

-- The values of timers._guarded_settings() now, in that order.
CREATE OR REPLACE FUNCTION timers._settings_now() RETURNS text[]
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
        SELECT array_agg(current_setting(s.name, true) ORDER BY s.n)
          FROM unnest(timers._guarded_settings()) WITH ORDINALITY AS s(name, n)
    $$;

-- Statements prepared in this session, as name, time and statement's md5.
CREATE OR REPLACE FUNCTION timers._prepared_now() RETURNS text[]
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
        SELECT coalesce(array_agg(p.name || ' ' || p.prepare_time::text || ' ' || md5(p.statement)
                                  ORDER BY p.name), '{}')
          FROM pg_catalog.pg_prepared_statements p
    $$;

-- The run's identity check: p_sql is the saved SQL of a timer or keyed timer of
-- p_owner (the one the run names in pgtimers.timer, else any); else 42501. A
-- superuser session may run any SQL (it could SET ROLE). Returns whether the role
-- that saved it is the one that has the name now (false after a rename).
CREATE OR REPLACE FUNCTION timers._check_saved(p_owner name, p_sql text) RETURNS boolean
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_oid oid := (SELECT r.oid FROM pg_roles r WHERE r.rolname = p_owner);
    v_timer text := current_setting('pgtimers.timer', true);
    v_saved_oid oid;
    v_saved boolean;
    v_same boolean;
BEGIN
    -- a run names what it runs (a timer's name or a keyed timer's key): a unique index finds it
    SELECT t.owner_oid INTO v_saved_oid FROM timers.timers t
     WHERE lower(t.name) = lower(v_timer) COLLATE "default" AND t.owner = p_owner AND t.sql = p_sql;
    v_saved := FOUND;
    IF NOT v_saved THEN
        SELECT k.owner_oid INTO v_saved_oid FROM timers.keyed_timers k
         WHERE k.key = v_timer AND k.owner = p_owner AND k.sql = p_sql;
        v_saved := FOUND;
    END IF;
    IF v_saved THEN
        v_same := v_saved_oid IS NOT DISTINCT FROM v_oid;
    ELSE
        v_same := EXISTS (SELECT 1 FROM timers.timers t
                           WHERE t.owner = p_owner AND t.sql = p_sql AND t.owner_oid = v_oid)
               OR EXISTS (SELECT 1 FROM timers.keyed_timers k
                           WHERE md5(k.sql) = md5(p_sql) AND k.sql = p_sql AND k.owner = p_owner
                             AND k.owner_oid = v_oid);
        v_saved := v_same
               OR EXISTS (SELECT 1 FROM timers.timers t WHERE t.owner = p_owner AND t.sql = p_sql)
               OR EXISTS (SELECT 1 FROM timers.keyed_timers k
                           WHERE md5(k.sql) = md5(p_sql) AND k.sql = p_sql AND k.owner = p_owner);
    END IF;
    IF NOT v_saved AND NOT coalesce((SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = session_user), false) THEN
        RAISE EXCEPTION 'permission denied to run this SQL as role "%": the runner runs only the saved SQL of a timer of that role', p_owner
            USING ERRCODE = '42501';
    END IF;
    RETURN NOT v_saved OR v_same;
END
$$;

-- The owner's executor, checked: it exists and is a security-definer function owned
-- by the owner (after REASSIGN OWNED it would run as someone else). Its name.
CREATE OR REPLACE FUNCTION timers._checked_executor(p_owner name) RETURNS text
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_fn text := timers._executor_name(p_owner);
    v_proc regprocedure;
BEGIN
    v_proc := CASE WHEN v_fn IS NOT NULL THEN to_regprocedure(format('timers_exec.%I(text)', v_fn)) END;
    IF v_proc IS NULL THEN
        RAISE EXCEPTION 'the timer''s owner "%" has no executor (the role was dropped or its objects were); save the timer again as an existing role', p_owner
            USING ERRCODE = '42704';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_proc p JOIN pg_roles r ON r.oid = p.proowner
                    WHERE p.oid = v_proc AND p.prosecdef AND r.rolname = p_owner) THEN
        RAISE EXCEPTION 'the executor of role "%" is not a security-definer function owned by it; save the timer again to repair it', p_owner
            USING ERRCODE = '42501';
    END IF;
    RETURN v_fn;
END
$$;

-- Before a run: prepared statements share one namespace with the runner's driver and
-- outlive the run, so PREPARE, DEALLOCATE and EXECUTE never run (also in SQL saved
-- before the save-time check knew them). The text is read only when it can hold one.
CREATE OR REPLACE FUNCTION timers._scan_session_use(p_sql text) RETURNS void
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_refusal record;
BEGIN
    IF p_sql ~* '\m(prepare|deallocate|execute)\M|u&'
       OR (p_sql ~* '\m(do|function|procedure)\M'
           AND (strpos(p_sql, '\') > 0 OR p_sql ~ '''[ \t\f\v]*(--[^\n\r]*)?[\n\r]')) THEN
        v_refusal := timers._sql_scan(p_sql, true);
        IF v_refusal.statement IS NOT NULL THEN
            RAISE EXCEPTION 'the timer''s SQL may not use %: % (%)',
                v_refusal.statement, v_refusal.reason, timers._sql_line_col(p_sql, v_refusal.pos)
                USING ERRCODE = '42501',
                      HINT = 'Change the timer''s SQL and save it again.';
        END IF;
    END IF;
END
$$;

-- After a run, first of all: the settings of p_settings (timers._settings_now() before
-- the SQL) are put back, search_path first. A plain set_config here persists after
-- this function returns, in every frame of the run (that is what the SQL did too).
-- Then what the SQL may not leave: statements it prepared (dropped now: a rollback
-- does not undo them), a WITH HOLD cursor (its query would run at COMMIT, as the
-- runner), a read-only transaction (the bookkeeping commits in it). Raising fails the
-- run, which rolls the SQL back with everything it set.
CREATE OR REPLACE FUNCTION timers._restore_session(p_settings text[], p_prepared text[]) RETURNS void
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_names constant text[] := timers._guarded_settings();
    v_name text;
    i integer;
BEGIN
    PERFORM pg_catalog.set_config('search_path', p_settings[1], false);
    FOR i IN 2 .. pg_catalog.cardinality(v_names) LOOP
        v_name := v_names[i];
        CONTINUE WHEN v_name = 'transaction_read_only'
                   OR pg_catalog.current_setting(v_name, true) IS NOT DISTINCT FROM p_settings[i];
        PERFORM pg_catalog.set_config(v_name, p_settings[i], false);
    END LOOP;
    IF pg_catalog.current_setting('transaction_read_only') IS DISTINCT FROM
       p_settings[pg_catalog.array_position(v_names, 'transaction_read_only')] THEN
        RAISE EXCEPTION 'a timer''s SQL may not leave its transaction read-only (SET transaction_read_only): the run''s bookkeeping commits in the same transaction'
            USING ERRCODE = '25006';
    END IF;
    IF timers._prepared_now() IS DISTINCT FROM p_prepared THEN
        FOR v_name IN
            SELECT p.name FROM pg_catalog.pg_prepared_statements p
             WHERE p.from_sql AND NOT (p.name || ' ' || p.prepare_time::text || ' ' || md5(p.statement) = ANY (p_prepared))
        LOOP
            EXECUTE format('DEALLOCATE %I', v_name);
        END LOOP;
        RAISE EXCEPTION 'a timer''s SQL may not prepare or deallocate statements, also not in dynamic SQL: they live in the runner''s session, which outlives the run and runs the runner''s own statements'
            USING ERRCODE = '42501';
    END IF;
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_cursors c WHERE c.is_holdable) THEN
        RAISE EXCEPTION 'a timer''s SQL may not leave a WITH HOLD cursor open: it would run after the run, as the runner'
            USING ERRCODE = '42501';
    END IF;
END
$$;

-- Run a timer's saved SQL as its owner (the runner's path), through the owner's
-- executor; returns the row count of its last statement. SECURITY DEFINER: the
-- runner's role reaches the executors only through this function. Nothing between
-- the executor's return and timers._restore_session may look a name up.
CREATE OR REPLACE FUNCTION timers._exec_as(p_owner name, p_sql text) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_same boolean;
    v_fn text;
    v_settings text[];
    v_prepared text[];
    v_call text;
    v_rows bigint;
BEGIN
    v_same := timers._check_saved(p_owner, p_sql);
    v_fn := timers._checked_executor(p_owner);
    -- owners are stored by name: after a rename, the role that takes the name never runs it
    IF NOT v_same THEN
        RAISE EXCEPTION 'role "%" is not the role that saved this timer: its owner was renamed or dropped, and another role has the name now', p_owner
            USING ERRCODE = '42501',
                  HINT = 'Save or arm the timer again as the role that should run it.';
    END IF;
    PERFORM timers._scan_session_use(p_sql);
    v_settings := timers._settings_now();
    v_prepared := timers._prepared_now();
    v_call := format('SELECT timers_exec.%I($1)', v_fn);
    EXECUTE v_call INTO v_rows USING p_sql;
    PERFORM timers._restore_session(v_settings, v_prepared);
    RETURN v_rows;
END
$$;

-- A scheduled or run-now run of a timer's SQL, in a sub-block (a savepoint): an
-- error or the time limit (statement_timeout, set by the runner) rolls back the
-- SQL's effects only. Sets the run context first. Returns the outcome.
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
    EXCEPTION WHEN query_canceled OR OTHERS THEN
        v_ok := false;
        v_state := SQLSTATE;
        v_error := timers._run_error(SQLSTATE, SQLERRM, t.timeout);
    END;
    RETURN jsonb_build_object(
        'ok', v_ok, 'error', v_error, 'sqlstate', v_state, 'rows', coalesce(v_rows, 0),
        'started_at', v_start, 'took_ms', timers._ms(clock_timestamp() - v_start),
        'late_ms', CASE WHEN t.test_clock IS NULL THEN timers._ms(v_start - p_due)
                        ELSE timers._ms(p_now - p_due) END);
END
$$;

-- The same for a keyed timer.
CREATE OR REPLACE FUNCTION timers._keyed_execute(k timers.keyed_timers) RETURNS jsonb
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
    PERFORM set_config('pgtimers.timer', k.key, true);
    PERFORM set_config('pgtimers.due_at', timers._iso(k.owed_at), true);
    PERFORM set_config('application_name', left('pgtimers: ' || k.key, 63), true);
    v_start := clock_timestamp();
    BEGIN
        PERFORM timers._keyed_calendar_ready(k);
        v_rows := timers._exec_as(k.owner, k.sql);
    EXCEPTION WHEN query_canceled OR OTHERS THEN
        v_ok := false;
        v_state := SQLSTATE;
        v_error := timers._run_error(SQLSTATE, SQLERRM, NULL);
    END;
    RETURN jsonb_build_object('ok', v_ok, 'error', v_error, 'sqlstate', v_state,
        'rows', coalesce(v_rows, 0), 'started_at', v_start,
        'took_ms', timers._ms(clock_timestamp() - v_start));
END
$$;

-- ---------------------------------------------------------------------------
-- 4. Changes of a running timer
-- ---------------------------------------------------------------------------

-- Apply the change asked for while timer p_id was running (see timers.pending_changes);
-- the caller holds (or may wait for) the timer's row. True when there was one.
-- SECURITY DEFINER: it only does what an admin asked for, so the runner may call it.
CREATE OR REPLACE FUNCTION timers._apply_pending(p_id bigint) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_action text;
    t timers.timers;
BEGIN
    DELETE FROM timers.pending_changes WHERE timer_id = p_id RETURNING action INTO v_action;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    SELECT * INTO t FROM timers.timers WHERE id = p_id FOR UPDATE;
    IF NOT FOUND THEN
        RETURN true;
    END IF;
    IF v_action = 'delete' THEN
        DELETE FROM timers.timers WHERE id = p_id;
    ELSE
        t.enabled := v_action = 'enable';
        UPDATE timers.timers
           SET enabled = t.enabled, updated_at = now(),
               next_due_at = timers._plan(t, timers._now(t.test_clock))
         WHERE id = p_id;
    END IF;
    PERFORM timers._notify(v_action, t.name);
    RETURN true;
END
$$;

-- The row of timer p_name locked for a change, with running = false; when a run
-- holds it, the row as last committed with running = true. NULL row: no such timer
-- (also one being deleted). What an earlier change asked for is applied first.
CREATE OR REPLACE FUNCTION timers._lock_or_running(p_name text, OUT t timers.timers, OUT running boolean)
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    SELECT * INTO t FROM timers.timers x
     WHERE lower(x.name) = lower(p_name) COLLATE "default" FOR UPDATE SKIP LOCKED;
    IF FOUND THEN
        running := false;
        IF timers._apply_pending(t.id) THEN
            SELECT * INTO t FROM timers.timers x WHERE x.id = t.id;
        END IF;
        RETURN;
    END IF;
    SELECT * INTO t FROM timers.timers x WHERE lower(x.name) = lower(p_name) COLLATE "default";
    running := FOUND;
    IF EXISTS (SELECT 1 FROM timers.pending_changes c WHERE c.timer_id = t.id AND c.action = 'delete') THEN
        t := NULL;
        running := false;
    END IF;
END
$$;

-- Lock a timer row for a save; a running timer is refused, not waited for.
CREATE OR REPLACE FUNCTION timers._lock_for_change(p_name text) RETURNS timers.timers
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    r record;
BEGIN
    r := timers._lock_or_running(p_name);
    IF r.running THEN
        RAISE EXCEPTION 'timer % is running; change it when the run has finished', timers._shown(p_name)
            USING ERRCODE = '55P03',
                  HINT = 'timers.enable(name, false) and timers.delete(name) work while it runs; timers.cancel(name) stops the run.';
    END IF;
    RETURN r.t;
END
$$;

-- Record a change of a running timer for its run to apply; audited like the change.
CREATE OR REPLACE FUNCTION timers._ask_pending(p_actor name, t timers.timers, p_action text) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    INSERT INTO timers.pending_changes AS c (timer_id, action, requested_by)
    VALUES (t.id, p_action, p_actor)
    ON CONFLICT (timer_id) DO UPDATE
        SET action = EXCLUDED.action, requested_by = EXCLUDED.requested_by,
            requested_at = EXCLUDED.requested_at;
    PERFORM timers._audit(p_actor, p_action, t.name, jsonb_build_object(
        'enabled', CASE p_action WHEN 'enable' THEN true WHEN 'disable' THEN false END,
        'while_running', true));
    PERFORM timers._notify(p_action, t.name);
END
$$;

CREATE OR REPLACE FUNCTION timers._set_enabled(p_actor name, p_name text, p_enabled boolean) RETURNS text
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    r record;
    t timers.timers;
BEGIN
    PERFORM timers._take_ticket(p_actor, 'turn a timer on or off');
    IF p_enabled IS NULL THEN
        RAISE EXCEPTION 'enabled must be true or false, not NULL' USING ERRCODE = '22004';
    END IF;
    r := timers._lock_or_running(p_name);
    t := r.t;
    IF t.id IS NULL THEN
        PERFORM timers._no_such_timer(p_name);
    END IF;
    PERFORM timers._refuse_locked(t, CASE WHEN p_enabled THEN 'turned on' ELSE 'turned off' END);
    IF r.running THEN
        PERFORM timers._ask_pending(p_actor, t, CASE WHEN p_enabled THEN 'enable' ELSE 'disable' END);
        RETURN t.name;
    END IF;
    t.enabled := p_enabled;
    UPDATE timers.timers
       SET enabled = p_enabled, updated_at = now(),
           next_due_at = timers._plan(t, timers._now(t.test_clock))
     WHERE id = t.id;
    PERFORM timers._audit(p_actor, CASE WHEN p_enabled THEN 'enable' ELSE 'disable' END, t.name,
                          jsonb_build_object('enabled', p_enabled));
    PERFORM timers._notify('enable', t.name);
    RETURN t.name;
END
$$;

CREATE OR REPLACE FUNCTION timers._delete(p_actor name, p_name text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    r record;
    t timers.timers;
BEGIN
    PERFORM timers._take_ticket(p_actor, 'delete a timer');
    r := timers._lock_or_running(p_name);
    t := r.t;
    IF t.id IS NULL THEN
        PERFORM timers._no_such_timer(p_name);
    END IF;
    PERFORM timers._refuse_locked(t, 'deleted');
    IF r.running THEN
        PERFORM timers._ask_pending(p_actor, t, 'delete');
        RETURN;
    END IF;
    DELETE FROM timers.timers WHERE id = t.id;
    PERFORM timers._audit(p_actor, 'delete', t.name,
                          jsonb_build_object('schedule', t.schedule, 'sql', t.sql, 'owner', t.owner));
    PERFORM timers._notify('delete', t.name);
END
$$;

-- The backend running timer p_id now: the holder of its row lock, when that backend
-- is a pgtimers runner's (a member of pgtimers_runner) naming the timer in its
-- application_name. NULL when it is not running.
CREATE OR REPLACE FUNCTION timers._run_backend(p_id bigint) RETURNS integer
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
        SELECT l.pid
          FROM timers.timers t
          JOIN pg_catalog.pg_locks l ON l.locktype = 'transactionid' AND l.transactionid = t.xmax
                                    AND l.mode = 'ExclusiveLock' AND l.granted
          CROSS JOIN LATERAL pg_catalog.pg_stat_get_activity(l.pid) a
         WHERE t.id = p_id AND t.xmax <> '0'::xid
           AND a.application_name = left('pgtimers: ' || t.name, 63)
           AND pg_has_role(a.usesysid, 'pgtimers_runner', 'MEMBER')
         LIMIT 1
    $$;

CREATE OR REPLACE FUNCTION timers._cancel(p_actor name, p_name text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    t timers.timers;
    v_pid integer;
    v_done boolean;
BEGIN
    PERFORM timers._take_ticket(p_actor, 'cancel a run');
    SELECT * INTO t FROM timers.timers x WHERE lower(x.name) = lower(p_name) COLLATE "default";
    IF NOT FOUND THEN
        PERFORM timers._no_such_timer(p_name);
    END IF;
    v_pid := timers._run_backend(t.id);
    IF v_pid IS NULL THEN
        RETURN jsonb_build_object('name', t.name, 'running', false, 'cancelled', false);
    END IF;
    PERFORM timers._audit(p_actor, 'cancel', t.name, jsonb_build_object('pid', v_pid));
    BEGIN
        v_done := pg_cancel_backend(v_pid);
    EXCEPTION WHEN insufficient_privilege THEN
        RAISE EXCEPTION 'cannot cancel the run of timer %: the role that installed pgtimers may not signal the runner''s session', timers._shown(t.name)
            USING ERRCODE = '42501',
                  HINT = 'GRANT pg_signal_backend TO the role that installed pgtimers, or cancel it as a superuser.';
    END;
    RETURN jsonb_build_object('name', t.name, 'running', true, 'cancelled', v_done, 'pid', v_pid);
END
$$;

CREATE OR REPLACE FUNCTION timers.cancel(name text) RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM timers._require_admin('cancel a run');
    RETURN timers._cancel(current_user, cancel.name);
END
$$;

COMMENT ON FUNCTION timers.cancel(text) IS
    'Cancel the running run of a timer: it fails with "cancelled" and its SQL rolls back; the timer keeps its schedule (turn it off first with timers.enable(name, false) to stop it for good). Returns {name, running, cancelled}. Needs pgtimers_admin.';

-- ---------------------------------------------------------------------------
-- 2. Runs, runners and keyed fires without advisory locks
-- ---------------------------------------------------------------------------

-- Take one of timers.locks, waiting at most p_wait; after that, name who holds it.
CREATE OR REPLACE FUNCTION timers._take_lock(p_name text, p_wait interval) RETURNS void
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_old text := current_setting('lock_timeout');
    v_holders text;
BEGIN
    PERFORM set_config('lock_timeout', (extract(epoch FROM p_wait) * 1000)::bigint::text, true);
    BEGIN
        PERFORM 1 FROM timers.locks k WHERE k.name = p_name FOR UPDATE;
    EXCEPTION WHEN lock_not_available THEN
        SELECT string_agg(format('pid %s (role %s, %s)', a.pid, pg_get_userbyid(a.usesysid),
                                 coalesce(nullif(a.application_name, ''), 'no application_name')), ', ')
          INTO v_holders
          FROM timers.locks k
          JOIN pg_locks l ON l.locktype = 'transactionid' AND l.transactionid = k.xmax AND l.granted
          CROSS JOIN LATERAL pg_stat_get_activity(l.pid) a
         WHERE k.name = p_name;
        RAISE EXCEPTION 'pgtimers lock "%" was not free within %: it is held by %', p_name, p_wait,
            coalesce(v_holders, 'a session that has ended')
            USING ERRCODE = '55P03';
    END;
    PERFORM set_config('lock_timeout', v_old, true);
END
$$;

-- How many runners serve this database right now: registered control backends that
-- are still there (same pid, database and application_name) and log in as a member
-- of pgtimers_runner (what pg_stat_get_activity shows every role).
CREATE OR REPLACE FUNCTION timers._live_runners() RETURNS integer
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
        SELECT count(*)::integer
          FROM timers.runners r
          CROSS JOIN LATERAL pg_stat_get_activity(r.backend_pid) a
         WHERE r.stopped_at IS NULL
           AND a.datid = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
           AND a.application_name = r.application_name
           AND pg_has_role(a.usesysid, 'pgtimers_runner', 'MEMBER')
    $$;

-- A runner starts serving this database. When no other runner is live, the due
-- times missed before now were missed while no runner served it: they follow each
-- timer's catch_up. The caller's session (with its application_name) is registered.
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
    PERFORM timers._take_lock('runner_start', interval '10 seconds');
    v_others := timers._live_runners();
    IF v_others = 0 THEN
        -- a live runner updates seen_at every second; the margin covers that
        v_since := (SELECT max(r.seen_at) FROM timers.runners r) + interval '2 seconds';
        v_events := timers._apply_gaps('no runner was serving the database', p_runner, v_since);
    END IF;
    -- rows of runners gone for a week are history nobody needs
    DELETE FROM timers.runners r WHERE r.id = p_runner OR r.seen_at < now() - interval '7 days';
    INSERT INTO timers.runners (id, host, os_pid, backend_pid, version, workers, application_name)
    VALUES (p_runner, p_host, p_os_pid, pg_backend_pid(), p_version, p_workers,
            current_setting('application_name'));
    RETURN jsonb_build_object('other_runners', v_others, 'downtime', v_others = 0,
                              'last_seen', v_since - interval '2 seconds', 'skipped', v_events);
END
$$;

-- A runner stops serving (its row stays: seen_at says until when it served).
CREATE OR REPLACE FUNCTION timers._runner_stop(p_runner text) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    UPDATE timers.runners SET seen_at = now(), stopped_at = now() WHERE id = p_runner;
END
$$;

-- When the runner must look next: wake_at, the earliest due time of anything (it
-- may have passed: a timer being run now still has its due time), and next_at, the
-- earliest due time still to come on the server's clock. While a claim finds
-- nothing to do, the runner sleeps until next_at (at most a second).
DROP FUNCTION timers._next_wake();
CREATE FUNCTION timers._next_wake(
    OUT db_now timestamptz, OUT wake_at timestamptz, OUT next_at timestamptz)
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
        SELECT clock_timestamp(),
            least(
                (SELECT t.next_due_at FROM timers.timers t
                  WHERE t.next_due_at IS NOT NULL AND t.test_clock IS NULL
                  ORDER BY t.next_due_at, t.id LIMIT 1),
                (SELECT now() WHERE EXISTS (
                    SELECT 1 FROM timers.timers t JOIN timers.test_clocks c ON c.name = t.test_clock
                     WHERE t.test_clock IS NOT NULL AND t.next_due_at IS NOT NULL
                       AND t.next_due_at <= c.now)),
                (SELECT now() WHERE EXISTS (
                    SELECT 1 FROM timers.run_requests r
                     WHERE r.finished_at IS NULL AND r.requested_at > now() - interval '5 minutes')),
                (SELECT k.owed_at FROM timers.keyed_timers k
                  WHERE k.status = 'armed' AND k.test_clock IS NULL
                  ORDER BY k.owed_at, k.place, k.key LIMIT 1),
                (SELECT now() WHERE EXISTS (
                    SELECT 1 FROM timers.keyed_timers k JOIN timers.test_clocks c ON c.name = k.test_clock
                     WHERE k.test_clock IS NOT NULL AND k.status = 'armed' AND k.owed_at <= c.now))),
            least(
                (SELECT t.next_due_at FROM timers.timers t
                  WHERE t.next_due_at > now() AND t.test_clock IS NULL
                  ORDER BY t.next_due_at, t.id LIMIT 1),
                (SELECT k.owed_at FROM timers.keyed_timers k
                  WHERE k.status = 'armed' AND k.test_clock IS NULL AND k.owed_at > now()
                  ORDER BY k.owed_at, k.place, k.key LIMIT 1))
    $$;

-- Retention (as before; one pruner at a time by timers.locks 'prune').
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
    PERFORM 1 FROM timers.locks k WHERE k.name = 'prune' FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
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
    -- turned off or deleted while it ran: done now, and nothing runs
    IF EXISTS (SELECT 1 FROM timers.pending_changes c WHERE c.timer_id = t.id)
       AND timers._apply_pending(t.id) THEN
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
    -- a change asked for during the run takes effect with it
    IF EXISTS (SELECT 1 FROM timers.pending_changes c WHERE c.timer_id = t.id) THEN
        PERFORM timers._apply_pending(t.id);
    END IF;

    RETURN jsonb_build_object(
        'timer', t.name, 'kind', v_kind, 'due_at', timers._iso(v_due), 'ok', v_ok,
        'error', r->>'error', 'sqlstate', r->>'sqlstate', 'rows', (r->>'rows')::bigint,
        'took_ms', (r->>'took_ms')::bigint, 'late_ms', v_late,
        'next_due_at', timers._iso(a.next_due), 'expired', a.next_due IS NULL,
        'skipped', v_skips);
END
$$;

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
    IF FOUND AND EXISTS (SELECT 1 FROM timers.pending_changes c WHERE c.timer_id = t.id)
       AND timers._apply_pending(t.id) THEN
        SELECT * INTO t FROM timers.timers WHERE id = q.timer_id;
    END IF;
    IF t.id IS NULL THEN
        v_result := jsonb_build_object('name', q.timer, 'finished', true, 'ok', false,
            'error', 'the timer was deleted before it could run', 'took_ms', 0, 'rows', 0);
    ELSE
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
        IF EXISTS (SELECT 1 FROM timers.pending_changes c WHERE c.timer_id = t.id) THEN
            PERFORM timers._apply_pending(t.id);
        END IF;
        v_result := jsonb_build_object('name', t.name, 'finished', true, 'ok', v_ok,
            'error', r->>'error', 'took_ms', (r->>'took_ms')::bigint, 'rows', (r->>'rows')::bigint);
    END IF;
    UPDATE timers.run_requests SET finished_at = clock_timestamp(), result = v_result WHERE id = q.id;
    RETURN v_result || jsonb_build_object('timer', v_result->>'name', 'kind', 'run_now',
                                          'sqlstate', r->>'sqlstate');
END
$$;

-- Claim the next keyed timer in tick order on a clock whose fire lock (a row of
-- timers.locks, 'keyed_fire:' and the clock's name) this transaction can take,
-- held until commit. No row when nothing is owed. p_skip: ids to leave alone for a
-- while (their fire raised).
CREATE OR REPLACE FUNCTION timers._claim_keyed(p_skip bigint[])
    RETURNS TABLE (id bigint, owed_at timestamptz, timeout_ms bigint)
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    c record;
    v_skip bigint[] := coalesce(p_skip, '{}');
BEGIN
    -- the server's clock (index keyed_due), then each test clock (index keyed_due_test_clock)
    IF EXISTS (SELECT 1 FROM timers.keyed_timers k
                WHERE k.status = 'armed' AND k.test_clock IS NULL AND k.owed_at <= now()
                  AND k.id <> ALL (v_skip))
       AND EXISTS (SELECT 1 FROM timers.locks l WHERE l.name = 'keyed_fire:' FOR UPDATE SKIP LOCKED) THEN
        RETURN QUERY
            SELECT k.id, k.owed_at, 600000::bigint
              FROM timers.keyed_timers k
             WHERE k.status = 'armed' AND k.test_clock IS NULL AND k.owed_at <= now()
               AND k.id <> ALL (v_skip)
             ORDER BY k.owed_at, k.place, k.key
             LIMIT 1
               FOR UPDATE OF k SKIP LOCKED;
        IF FOUND THEN
            RETURN;
        END IF;
    END IF;
    FOR c IN SELECT tc.name, tc.now FROM timers.test_clocks tc ORDER BY tc.name LOOP
        CONTINUE WHEN NOT EXISTS (
            SELECT 1 FROM timers.keyed_timers k
             WHERE k.status = 'armed' AND k.test_clock = c.name AND k.owed_at <= c.now
               AND k.id <> ALL (v_skip));
        CONTINUE WHEN NOT EXISTS (SELECT 1 FROM timers.locks l
                                   WHERE l.name = 'keyed_fire:' || c.name FOR UPDATE SKIP LOCKED);
        RETURN QUERY
            SELECT k.id, k.owed_at, 600000::bigint
              FROM timers.keyed_timers k
             WHERE k.status = 'armed' AND k.test_clock = c.name AND k.owed_at <= c.now
               AND k.id <> ALL (v_skip)
             ORDER BY k.owed_at, k.place, k.key
             LIMIT 1
               FOR UPDATE OF k SKIP LOCKED;
        IF FOUND THEN
            RETURN;
        END IF;
    END LOOP;
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
REVOKE ALL ON FUNCTION timers._clock_fire_lock() FROM PUBLIC;
CREATE TRIGGER fire_lock AFTER INSERT OR DELETE ON timers.test_clocks
    FOR EACH ROW EXECUTE FUNCTION timers._clock_fire_lock();

-- ---------------------------------------------------------------------------
-- The status view: running is the row lock of a run
-- ---------------------------------------------------------------------------

CREATE OR REPLACE VIEW timers.status AS
SELECT
    t.name,
    current_database()::text AS database,
    t.schedule,
    -- A timer's SQL may hold secrets: readers see it for their own timers only.
    CASE WHEN pg_has_role(current_user, 'pgtimers_admin', 'MEMBER')
           OR pg_has_role(current_user, (SELECT r.oid FROM pg_roles r WHERE r.rolname = t.owner), 'MEMBER')
         THEN t.sql END AS sql,
    -- turned on or off while running: shown as asked
    coalesce((SELECT pc.action = 'enable' FROM timers.pending_changes pc WHERE pc.timer_id = t.id),
             t.enabled) AS enabled,
    (extract(epoch FROM t.created_at) * 1000)::bigint AS created_ms,
    (extract(epoch FROM t.updated_at) * 1000)::bigint AS updated_ms,
    t.owner::text AS created_by,
    coalesce((extract(epoch FROM t.next_due_at) * 1000)::bigint, 0) AS next_run_ms,
    coalesce((extract(epoch FROM t.last_run_at) * 1000)::bigint, 0) AS last_run_ms,
    coalesce((extract(epoch FROM t.last_due_at) * 1000)::bigint, 0) AS last_due_ms,
    t.last_late_ms,
    t.max_late_ms,
    t.last_ok,
    t.last_error,
    t.last_took_ms,
    t.last_rows,
    t.runs,
    t.failures,
    (SELECT count(*) FROM timers.runs r
      WHERE r.timer_id = t.id AND r.ok = false AND r.kind <> 'skipped'
        AND r.started_at > now() - interval '24 hours') AS failures_24h,
    t.skipped,
    coalesce((extract(epoch FROM t.last_skip_at) * 1000)::bigint, 0) AS last_skip_ms,
    t.last_skip_reason,
    t.caught_up,
    -- a run holds the timer's row lock until it commits; only pgtimers' roles can take
    -- it (this session's own lock, taken by a change it is making, is no run)
    (t.xmax <> '0'::xid AND EXISTS (
        SELECT 1 FROM pg_locks l
         WHERE l.locktype = 'transactionid' AND l.transactionid = t.xmax AND l.granted
           AND l.pid <> pg_backend_pid())) AS running,
    timers._zone(t.timezone) AS timezone,
    coalesce(t.catch_up, 'skip') AS catch_up,
    t.start_at,
    t.end_at,
    t.max_runs,
    t.expired,
    t.locked
FROM timers.timers t
-- deleted while running: gone already
WHERE NOT EXISTS (SELECT 1 FROM timers.pending_changes pc WHERE pc.timer_id = t.id AND pc.action = 'delete');

COMMENT ON VIEW timers.status IS
    'One row per timer: the fields of GET /api/timers (to_jsonb(row) is the HTTP body), plus timezone, catch_up, start_at, end_at, max_runs, expired, locked.';

-- ---------------------------------------------------------------------------
-- Gone: the advisory lock classes
-- ---------------------------------------------------------------------------
DROP FUNCTION timers._running_lock_class();
DROP FUNCTION timers._runner_lock_class();
DROP FUNCTION timers._keyed_lock_key(text);
DROP FUNCTION timers._keyed_lock_class();

-- ---------------------------------------------------------------------------
-- Rights
-- ---------------------------------------------------------------------------
REVOKE ALL ON FUNCTION
    timers._cut(text), timers._run_error(text, text, interval), timers._guarded_settings(),
    timers._settings_now(), timers._prepared_now(), timers._check_saved(name, text),
    timers._checked_executor(name), timers._scan_session_use(text),
    timers._restore_session(text[], text[]), timers._apply_pending(bigint),
    timers._lock_or_running(text), timers._ask_pending(name, timers.timers, text),
    timers._run_backend(bigint), timers._cancel(name, text), timers.cancel(text),
    timers._take_lock(text, interval)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION timers._cut(text), timers._run_error(text, text, interval),
    timers._apply_pending(bigint), timers._take_lock(text, interval)
    TO pgtimers_runner;
GRANT EXECUTE ON FUNCTION timers._cancel(name, text), timers.cancel(text) TO pgtimers_admin;
GRANT EXECUTE ON FUNCTION timers._live_runners() TO pgtimers_reader;
REVOKE ALL ON FUNCTION timers._next_wake() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION timers._next_wake() TO pgtimers_runner;
