-- pgtimers code: running a timer's SQL as its owner: executors, the run gate, the
-- session after the SQL.
--
-- Repeatable: applied whole on every install and upgrade, after the versioned
-- migrations (docs/design.md). Each object here is defined in this file only.

-- The executor of an owner: a SECURITY DEFINER function owned by that role, in
-- schema timers_exec which owners cannot reach by name. Running a timer's SQL
-- inside it pins the owner's identity: PostgreSQL refuses SET ROLE, RESET ROLE
-- and SET SESSION AUTHORIZATION in a security-definer function, and a function
-- cannot COMMIT or ROLLBACK the run's transaction.
CREATE OR REPLACE FUNCTION timers._executor_name(p_owner name) RETURNS text
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$ SELECT 'as_' || r.oid::text FROM pg_roles r WHERE r.rolname = p_owner $$;

-- Make (or repair) the executor of p_owner; returns its name.
CREATE OR REPLACE FUNCTION timers._ensure_executor(p_owner name) RETURNS text
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_fn text := timers._executor_name(p_owner);
BEGIN
    IF v_fn IS NULL THEN
        RAISE EXCEPTION 'role "%" does not exist', p_owner USING ERRCODE = '42704';
    END IF;
    IF to_regprocedure(format('timers_exec.%I(text)', v_fn)) IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM pg_proc p JOIN pg_roles r ON r.oid = p.proowner
                        WHERE p.oid = to_regprocedure(format('timers_exec.%I(text)', v_fn))
                          AND p.prosecdef AND r.rolname = p_owner) THEN
        EXECUTE format('DROP FUNCTION timers_exec.%I(text)', v_fn);
    END IF;
    IF to_regprocedure(format('timers_exec.%I(text)', v_fn)) IS NULL THEN
        EXECUTE format(
            'CREATE FUNCTION timers_exec.%I(sql text) RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER '
            'SET search_path = "$user", public, pg_temp AS $x$ '
            'DECLARE n bigint; BEGIN EXECUTE sql; GET DIAGNOSTICS n = ROW_COUNT; '
            -- deferred triggers fire here, as the owner, not at COMMIT as the runner (PG < 18)
            'SET CONSTRAINTS ALL IMMEDIATE; RETURN n; END $x$',
            v_fn);
        EXECUTE format('REVOKE ALL ON FUNCTION timers_exec.%I(text) FROM PUBLIC', v_fn);
        EXECUTE format('ALTER FUNCTION timers_exec.%I(text) OWNER TO %I', v_fn, p_owner);
    END IF;
    RETURN v_fn;
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

-- The owner's oid, whenever the owner is written.
CREATE OR REPLACE FUNCTION timers._set_owner_oid() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    NEW.owner_oid := (SELECT r.oid FROM pg_roles r WHERE r.rolname = NEW.owner);
    RETURN NEW;
END
$$;

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

CREATE OR REPLACE TRIGGER owner_oid BEFORE INSERT OR UPDATE OF owner ON timers.timers
    FOR EACH ROW EXECUTE FUNCTION timers._set_owner_oid();

CREATE OR REPLACE TRIGGER owner_oid BEFORE INSERT OR UPDATE OF owner ON timers.keyed_timers
    FOR EACH ROW EXECUTE FUNCTION timers._set_owner_oid();

-- ---------------------------------------------------------------------------
-- Rights
-- ---------------------------------------------------------------------------
REVOKE ALL ON FUNCTION
    timers._executor_name(name),
    timers._ensure_executor(name),
    timers._exec_as(name,text),
    timers._set_owner_oid(),
    timers._guarded_settings(),
    timers._settings_now(),
    timers._prepared_now(),
    timers._check_saved(name,text),
    timers._checked_executor(name),
    timers._scan_session_use(text),
    timers._restore_session(text[],text[])
    FROM PUBLIC, pgtimers_reader, pgtimers_admin, pgtimers_runner;
GRANT EXECUTE ON FUNCTION
    timers._executor_name(name)
    TO PUBLIC;
GRANT EXECUTE ON FUNCTION
    timers._exec_as(name,text)
    TO pgtimers_runner;
