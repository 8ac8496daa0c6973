-- pgtimers code: running a timer's SQL as its owner: executors, the run gate, the
-- session after the SQL.
--
-- On a run's path a call whose value is not needed is assigned to v_nil, not PERFORMed
-- (a simple expression does not start the executor; 10_fire.sql says why).
--
-- Repeatable: applied whole on every install and upgrade, after the versioned
-- migrations (docs/design.md). Each object here is defined in this file only.

-- Executors. A timer's SQL runs inside its executor: a SECURITY DEFINER function
-- of schema timers_exec that the timer names (its column executor). The executor's
-- owner is the timer's owner: the role it runs as is PostgreSQL's own ownership of a
-- function, which pg_dump restores by role name, REASSIGN OWNED moves, DROP OWNED
-- drops and ALTER ROLE ... RENAME keeps. Inside a security-definer function
-- PostgreSQL refuses SET ROLE, RESET ROLE and SET SESSION AUTHORIZATION, and a
-- function cannot COMMIT or ROLLBACK the run's transaction. The role that saves a
-- timer makes its executor itself (pgtimers_admin may CREATE in timers_exec, never
-- use it by name), so no step needs the right to act as another role.

-- The executor a role has made, if it has one: timers_exec.as_<its oid>, or as_<its
-- oid>_n<k> when that name was taken (a restored database may hold another role's), a
-- security-definer function it owns. Found by the name index: a save asks every time.
CREATE OR REPLACE FUNCTION timers._executor_of(p_role name) RETURNS text
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    v_oid oid := (SELECT r.oid FROM pg_roles r WHERE r.rolname = p_role);
    v_fn text := 'as_' || v_oid::text;
BEGIN
    IF v_oid IS NULL THEN
        RETURN NULL;
    END IF;
    RETURN (SELECT p.proname::text FROM pg_proc p
             -- the range lets the name index find the _n<k> ones (LIKE alone scans pg_proc)
             WHERE (p.proname = v_fn OR (p.proname >= (v_fn || '_n')::name AND p.proname < (v_fn || '_o')::name
                                         AND p.proname LIKE v_fn || '\_n%'))
               AND p.proargtypes = '25'::oidvector AND p.pronamespace = 'timers_exec'::regnamespace
               AND p.proowner = v_oid AND p.prosecdef
             ORDER BY length(p.proname), p.proname
             LIMIT 1);
END
$$;

-- The executor of p_owner (the caller of a save or arm, proven by its ticket), made
-- now if it has none; its name. SECURITY DEFINER: made by the role that installed
-- pgtimers, which then hands it to p_owner (ALTER FUNCTION ... OWNER TO) inside this
-- one call, so that no code of the caller runs while anything is lent. For that hand
-- over a role that is not a superuser must be able to act as p_owner, and p_owner
-- needs CREATE on timers_exec: both are lent for the hand over and taken back. Only
-- roles with USAGE on timers_exec can call an executor: its owner, the role that
-- installed pgtimers, which runs timers through timers._exec_as.
CREATE OR REPLACE FUNCTION timers._ensure_executor(p_owner name) RETURNS text
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_fn text := timers._executor_of(p_owner);
    v_oid oid := (SELECT r.oid FROM pg_roles r WHERE r.rolname = p_owner);
    v_n integer := 1;
BEGIN
    IF v_fn IS NOT NULL THEN
        -- made on a cluster without a superuser before its maker kept EXECUTE: hand it again
        IF NOT has_function_privilege(current_user, format('timers_exec.%I(text)', v_fn)::regprocedure, 'EXECUTE') THEN
            PERFORM timers._hand_over(v_fn, p_owner);
        END IF;
        RETURN v_fn;
    END IF;
    IF v_oid IS NULL THEN
        RAISE EXCEPTION 'role "%" does not exist', p_owner USING ERRCODE = '42704';
    END IF;
    v_fn := 'as_' || v_oid::text;
    -- a restored database may hold another role's executor of that name
    WHILE EXISTS (SELECT 1 FROM pg_proc p
                   WHERE p.pronamespace = 'timers_exec'::regnamespace AND p.proname = v_fn) LOOP
        v_n := v_n + 1;
        v_fn := 'as_' || v_oid::text || '_n' || v_n;
    END LOOP;
    EXECUTE format(
        'CREATE FUNCTION timers_exec.%I(sql text) RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER '
        'SET search_path = "$user", public, pg_temp AS $x$ '
        'DECLARE n bigint; BEGIN EXECUTE sql; GET DIAGNOSTICS n = ROW_COUNT; '
        -- deferred triggers fire here, as the owner, not at COMMIT as the runner (PG < 18)
        'SET CONSTRAINTS ALL IMMEDIATE; RETURN n; END $x$',
        v_fn);
    EXECUTE format('REVOKE ALL ON FUNCTION timers_exec.%I(text) FROM PUBLIC', v_fn);
    PERFORM timers._hand_over(v_fn, p_owner);
    RETURN v_fn;
END
$$;

-- Give executor p_fn to role p_owner, and keep the right to call it (the runner runs
-- timers through timers._exec_as, which this role owns). A superuser just does (and
-- needs no grant to call it). Another role (a managed database's owner: CREATEROLE, no
-- SUPERUSER) needs for ALTER ... OWNER TO to be able to act as p_owner, p_owner CREATE
-- on timers_exec, and for the GRANT EXECUTE afterwards (made as the new owner) p_owner's
-- privileges: it lends itself the role when it may (PostgreSQL 15: CREATEROLE; 16 and
-- later: the ADMIN option on p_owner, which a role has on the roles it created) and
-- p_owner CREATE, and takes both back (timers._take_back) before it returns. Where the
-- server's rules forbid it, timers._refuse_hand_over says which GRANT lets it (or why
-- none can). Called again for an executor that p_owner owns already, it only grants.
CREATE OR REPLACE FUNCTION timers._hand_over(p_fn text, p_owner name) RETURNS void
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    v_me name := current_user;
    v_super boolean := (SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = current_user);
    v_16 boolean := current_setting('server_version_num')::int >= 160000;
    v_before jsonb;  -- v_me's grants of p_owner before the lend (NULL: nothing lent)
    v_lent_create boolean := false;
BEGIN
    IF v_super THEN
        EXECUTE format('ALTER FUNCTION timers_exec.%I(text) OWNER TO %I', p_fn, p_owner);
        RETURN;
    END IF;
    IF NOT (pg_has_role(v_me, p_owner, 'USAGE')
            AND pg_has_role(v_me, p_owner, CASE WHEN v_16 THEN 'SET' ELSE 'MEMBER' END)) THEN
        IF (SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = p_owner) THEN
            PERFORM timers._refuse_hand_over(p_owner, 'superuser');
        ELSIF pg_has_role(p_owner, v_me, 'MEMBER') THEN
            PERFORM timers._refuse_hand_over(p_owner, 'member');
        END IF;
        v_before := timers._grants_of(p_owner);
        BEGIN
            -- the options as a value, not in the statement's text: PostgreSQL 15 (and
            -- plpgsql_check there) cannot parse GRANT ... WITH INHERIT
            EXECUTE format('GRANT %I TO %I%s', p_owner, v_me,
                           CASE WHEN v_16 THEN ' WITH INHERIT TRUE, SET TRUE' ELSE '' END);
        EXCEPTION WHEN insufficient_privilege OR invalid_grant_operation THEN
            PERFORM timers._refuse_hand_over(p_owner, 'grant');
        END;
        IF NOT pg_has_role(v_me, p_owner, 'USAGE') THEN
            -- PostgreSQL 15: a role made NOINHERIT never has its member roles' privileges
            PERFORM timers._refuse_hand_over(p_owner, 'noinherit');
        END IF;
    END IF;
    IF NOT has_schema_privilege(p_owner, 'timers_exec', 'CREATE') THEN
        EXECUTE format('GRANT CREATE ON SCHEMA timers_exec TO %I', p_owner);
        v_lent_create := true;
    END IF;
    EXECUTE format('ALTER FUNCTION timers_exec.%I(text) OWNER TO %I', p_fn, p_owner);
    EXECUTE format('GRANT EXECUTE ON FUNCTION timers_exec.%I(text) TO %I', p_fn, v_me);
    IF v_lent_create THEN
        EXECUTE format('REVOKE CREATE ON SCHEMA timers_exec FROM %I', p_owner);
    END IF;
    IF v_before IS NOT NULL THEN
        PERFORM timers._take_back(p_owner, v_before);
    END IF;
END
$$;

-- The grants of role p_owner to the current role: [{grantor, inherit, set}] by grantor
-- (on PostgreSQL 15 inherit and set are NULL: a membership has no options there).
CREATE OR REPLACE FUNCTION timers._grants_of(p_owner name) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    RETURN (SELECT coalesce(jsonb_agg(jsonb_build_object(
                        'grantor', m.grantor::regrole::text,
                        'inherit', to_jsonb(m) -> 'inherit_option',
                        'set', to_jsonb(m) -> 'set_option') ORDER BY m.grantor), '[]')
              FROM pg_auth_members m
             WHERE m.roleid = (SELECT r.oid FROM pg_roles r WHERE r.rolname = p_owner)
               AND m.member = (SELECT r.oid FROM pg_roles r WHERE r.rolname = current_user));
END
$$;

-- Take back the role p_owner that timers._hand_over lent the current role: a grant the
-- lend made is revoked; a grant it changed (16+: one of this role's own, which GRANT
-- ... WITH updates) gets its options back. p_before: timers._grants_of before the lend.
CREATE OR REPLACE FUNCTION timers._take_back(p_owner name, p_before jsonb) RETURNS void
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    v_now jsonb := timers._grants_of(p_owner);
    v_old jsonb;
BEGIN
    IF jsonb_array_length(v_now) > jsonb_array_length(p_before) THEN
        EXECUTE format('REVOKE %I FROM %I', p_owner, current_user);
        RETURN;
    END IF;
    SELECT o INTO v_old
      FROM jsonb_array_elements(p_before) o JOIN jsonb_array_elements(v_now) n
        ON n ->> 'grantor' = o ->> 'grantor'
     WHERE n IS DISTINCT FROM o
     LIMIT 1;
    IF v_old IS NOT NULL THEN
        EXECUTE format('GRANT %I TO %I WITH INHERIT %s, SET %s', p_owner, current_user,
                       upper(v_old ->> 'inherit'), upper(v_old ->> 'set'));
    END IF;
END
$$;

-- Refuse, 42501, to hand an executor to role p_owner, saying why and what lets it:
-- p_why 'superuser' (only a superuser can give a function to a superuser), 'member'
-- (p_owner is a member of the installing role: the server refuses the circular grant),
-- 'grant' (the installing role may not grant itself p_owner: the GRANT to run),
-- 'noinherit' (PostgreSQL 15: the installing role is NOINHERIT).
CREATE OR REPLACE FUNCTION timers._refuse_hand_over(p_owner name, p_why text) RETURNS void
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    v_me name := current_user;
    v_what constant text := format('role "%s" (which installed pgtimers) cannot make the executor of role "%s"', v_me, p_owner);
BEGIN
    IF p_why = 'superuser' THEN
        RAISE EXCEPTION '%: "%" is a superuser, and only a superuser can make a function that runs as one', v_what, p_owner
            USING ERRCODE = '42501',
                  HINT = 'Save the timer as a role that is not a superuser (SET ROLE that role, then call timers.save), or install pgtimers as a superuser.';
    ELSIF p_why = 'member' THEN
        RAISE EXCEPTION '%: "%" is a member of "%", so PostgreSQL does not let "%" become a member of "%" (a circular membership)', v_what, p_owner, v_me, v_me, p_owner
            USING ERRCODE = '42501',
                  HINT = format('Save the timer as %1$I (SET ROLE %1$I; it then runs as %1$I), or as a role that is not a member of %1$I.', v_me);
    ELSIF p_why = 'noinherit' THEN
        RAISE EXCEPTION '%: it is NOINHERIT, so a role it is a member of lends it no privileges', v_what
            USING ERRCODE = '42501',
                  HINT = format('A superuser or a role with CREATEROLE can run: ALTER ROLE %I INHERIT;', v_me);
    ELSIF current_setting('server_version_num')::int >= 160000 THEN
        RAISE EXCEPTION '%: it must be able to act as "%" for the hand over, and it has no ADMIN option on "%" to lend itself that', v_what, p_owner, p_owner
            USING ERRCODE = '42501',
                  HINT = format('A superuser, or the role that created %1$I (it has the ADMIN option on it), can run: GRANT %1$I TO %2$I WITH ADMIN TRUE, INHERIT FALSE, SET FALSE;', p_owner, v_me);
    ELSE
        RAISE EXCEPTION '%: it must be a member of "%", and it may not grant itself that role (no CREATEROLE)', v_what, p_owner
            USING ERRCODE = '42501',
                  HINT = format('A superuser or a role with CREATEROLE can run: GRANT %I TO %I;', p_owner, v_me);
    END IF;
END
$$;

-- The role a timer's executor runs as (its owner), NULL when it is gone.
CREATE OR REPLACE FUNCTION timers._executor_owner(p_executor text) RETURNS oid
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    RETURN (SELECT p.proowner FROM pg_proc p
             WHERE p.proname = p_executor AND p.proargtypes = '25'::oidvector
               AND p.pronamespace = 'timers_exec'::regnamespace AND p.prosecdef);
END
$$;

-- Rows this transaction has inserted, updated and deleted in tables outside pgtimers'
-- schema and the catalogs, from the server's own counters of the transaction (they
-- count the rows a procedure or a DO block wrote, which no row count reports).
CREATE OR REPLACE FUNCTION timers._rows_written() RETURNS bigint
    LANGUAGE plpgsql VOLATILE
    AS $$
BEGIN
    RETURN (SELECT coalesce(sum(pg_catalog.pg_stat_get_xact_tuples_inserted(c.oid)
                                + pg_catalog.pg_stat_get_xact_tuples_updated(c.oid)
                                + pg_catalog.pg_stat_get_xact_tuples_deleted(c.oid)), 0)::bigint
              FROM pg_catalog.pg_class c
             WHERE c.relkind = 'r'
               AND c.relnamespace <> ALL (ARRAY['pg_catalog'::regnamespace, 'information_schema'::regnamespace,
                                                'timers'::regnamespace]::oid[]));
END
$$;

-- Run a timer's saved SQL as its owner (the runner's path), through the owner's
-- executor; returns its rows (timers._run_rows). SECURITY DEFINER: the runner's role
-- reaches the executors only through this function. Before the SQL, the session state a
-- transaction does not undo (sequences' currval, random()'s seed) is made new
-- (timers._fresh_run_state), so the SQL never sees what an earlier run on this
-- connection left, whoever's it was. Nothing between the executor's return and
-- timers._restore_session may look a name up.
CREATE OR REPLACE FUNCTION timers._exec_as(p_owner name, p_sql text) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_nil text;  -- what a call whose value is not needed returns (not PERFORM: see the top)
    v_fn text;
    v_role oid;
    v_settings text[];
    v_prepared text;
    v_call text;
    v_rows bigint;
    v_written bigint;
BEGIN
    v_fn := timers._saved_executor(p_owner, p_sql);
    v_nil := timers._scan_session_use(p_sql);
    v_nil := timers._fresh_run_state();
    -- as a login of the role would have them (work_mem, enable_*, jit ...): cheap when none
    v_role := timers._executor_owner(v_fn);
    IF EXISTS (SELECT 1 FROM pg_db_role_setting d WHERE d.setrole = v_role) THEN
        v_nil := timers._apply_role_settings(v_role);
    END IF;
    v_settings := timers._settings_now();
    v_prepared := timers._prepared_now();
    -- the rows written before the SQL, when its own count may not tell (timers._run_rows)
    IF NOT timers._counted_by_statement(p_sql) THEN
        v_written := timers._rows_written();
    END IF;
    v_call := format('SELECT timers_exec.%I($1)', v_fn);
    EXECUTE v_call INTO v_rows USING p_sql;
    v_nil := timers._restore_session(v_settings, v_prepared);
    RETURN timers._run_rows(v_rows, v_written);
END
$$;

-- A run's rows: for one INSERT, UPDATE, DELETE, MERGE or query, its row count (rows
-- written or returned); for anything else (a CALL, a DO block, REFRESH, several
-- statements: p_before is known) the rows the run inserted, updated and deleted in all,
-- whatever its last statement returned: the server's counters of
-- this session's writes now less p_before, their value before the SQL. The counters keep
-- the writes of this session's earlier transactions until they are sent to the
-- statistics (at most once a second, when the session is idle), so without p_before a
-- run that wrote nothing would report an earlier run's writes. In the runner's
-- transaction nothing but pgtimers' own tables (not counted) is written before the run.
CREATE OR REPLACE FUNCTION timers._run_rows(p_count bigint, p_before bigint) RETURNS bigint
    LANGUAGE plpgsql VOLATILE
    AS $$
BEGIN
    IF p_before IS NULL THEN
        RETURN coalesce(p_count, 0);
    END IF;
    RETURN greatest(timers._rows_written() - p_before, 0);
END
$$;

-- Whether the SQL is one statement whose row count says what it did: one INSERT, UPDATE,
-- DELETE, MERGE or query (no `;` but at its end). Read from the text, cheaply: SQL that
-- does not look like one (a leading comment, say) is counted the other way, which costs a
-- look at the counters before and after.
CREATE OR REPLACE FUNCTION timers._counted_by_statement(p_sql text) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $$
BEGIN
    RETURN p_sql ~* '^\s*(insert|update|delete|merge|select|with|values|table)\M'
       AND strpos(rtrim(p_sql, E' \t\n\r;'), ';') = 0;
END
$$;

-- Before a run's SQL: the state of the session that a transaction does not undo and
-- that a run could leave for the next one on the runner's connection, whoever's it is,
-- made as a new session's: sequences' currval and lastval (DISCARD SEQUENCES), and the
-- seed of random() (setseed, a run could make the next run's values known), drawn again
-- from the server's strong random source. The rest a run may leave (settings, temporary
-- objects, LISTEN) goes with its transaction: timers._session_reset.
CREATE OR REPLACE FUNCTION timers._fresh_run_state() RETURNS void
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    v_nil text;  -- what a call whose value is not needed returns (not PERFORM: see the top)
BEGIN
    DISCARD SEQUENCES;
    v_nil := pg_catalog.setseed(
        ('x' || pg_catalog.substr(pg_catalog.md5(pg_catalog.gen_random_uuid()::text), 1, 13))::bit(52)::bigint
        / 4503599627370496.0 * 2 - 1);
END
$$;

-- Before a fire's COMMIT: the runner's session as the runner made it, whatever the run
-- left in it: every setting back to the value a new session has (RESET ALL: also ones
-- pgtimers does not know, a custom `app.tenant`, work_mem, setseed aside), then the
-- runner's own session settings (p_names, p_values: read by the runner when it
-- connected, before any run), temporary objects dropped, LISTENs ended. The settings are
-- plain SETs, so they hold after this function and the transaction. RESET ALL also
-- resets search_path: the first statement after it sets it back, naming the function
-- with its schema. A NULL p_names (a runner of an older version) resets nothing.
CREATE OR REPLACE FUNCTION timers._session_reset(p_names text[], p_values text[]) RETURNS void
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_nil text;  -- what a call whose value is not needed returns (not PERFORM: see the top)
    i integer;
BEGIN
    IF p_names IS NULL THEN
        RETURN;
    END IF;
    RESET ALL;
    v_nil := pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
    FOR i IN 1 .. pg_catalog.cardinality(p_names) LOOP
        v_nil := pg_catalog.set_config(p_names[i], p_values[i], false);
    END LOOP;
    IF pg_catalog.pg_my_temp_schema() OPERATOR(pg_catalog.<>) 0 THEN
        IF EXISTS (SELECT 1 FROM pg_catalog.pg_class c
                    WHERE c.relnamespace OPERATOR(pg_catalog.=) pg_catalog.pg_my_temp_schema()) THEN
            DISCARD TEMP;
        END IF;
    END IF;
    UNLISTEN *;
END
$$;

-- The settings a role was given with ALTER ROLE ... SET (for this database, or for all),
-- as a login of that role would have them: set for the rest of the run's transaction,
-- before its SQL. Left out: the settings the code after the SQL depends on
-- (timers._guarded_settings: search_path, TimeZone, statement_timeout, lock_timeout ...;
-- a run's time limit is its timer's timeout), the transaction's own (default_transaction_*,
-- already begun), the session's (idle and transaction timeouts, application_name, the
-- run's pgtimers.*), and any this session may not set (tried, and left). A
-- database-specific setting wins over the same one for all databases.
CREATE OR REPLACE FUNCTION timers._apply_role_settings(p_role oid) RETURNS void
    LANGUAGE plpgsql
    AS $$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT DISTINCT ON (lower(x.name)) x.name, x.value
          FROM (SELECT split_part(c, '=', 1) AS name, substr(c, strpos(c, '=') + 1) AS value,
                       d.setdatabase <> 0 AS here
                  FROM pg_db_role_setting d, unnest(d.setconfig) c
                 WHERE d.setrole = p_role
                   AND d.setdatabase IN (0, (SELECT o.oid FROM pg_database o WHERE o.datname = current_database()))) x
         WHERE lower(x.name) <> ALL (SELECT lower(n) FROM unnest(timers._guarded_settings()) n)
           AND lower(x.name) NOT IN ('idle_session_timeout', 'transaction_timeout', 'application_name')
           AND lower(x.name) NOT LIKE 'default\_transaction\_%'
           AND lower(x.name) NOT LIKE 'pgtimers.%'
         ORDER BY lower(x.name), x.here DESC
    LOOP
        BEGIN
            PERFORM set_config(r.name, r.value, true);
        EXCEPTION WHEN insufficient_privilege OR cant_change_runtime_param OR undefined_object
                       OR invalid_parameter_value THEN
            NULL;  -- a login of the role would have it; this session may not set it
        END;
    END LOOP;
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
                     'plpgsql.extra_errors', 'plpgsql.extra_warnings', 'statement_timeout',
                     'idle_in_transaction_session_timeout', 'default_transaction_isolation',
                     'default_transaction_read_only', 'default_transaction_deferrable',
                     'synchronous_commit', 'session_replication_role', 'idle_session_timeout',
                     'transaction_timeout', 'transaction_read_only']::text[]
    $$;

-- The values of timers._guarded_settings() now, in that order (the same names, written
-- out: an inlined expression, not a query, as it runs twice in every run;
-- tests/unit/test_sql_code.py holds the two lists equal).
CREATE OR REPLACE FUNCTION timers._settings_now() RETURNS text[]
    LANGUAGE sql STABLE
    AS $$
        SELECT ARRAY[
            pg_catalog.current_setting('search_path', true),
            pg_catalog.current_setting('exit_on_error', true),
            pg_catalog.current_setting('TimeZone', true),
            pg_catalog.current_setting('DateStyle', true),
            pg_catalog.current_setting('IntervalStyle', true),
            pg_catalog.current_setting('extra_float_digits', true),
            pg_catalog.current_setting('standard_conforming_strings', true),
            pg_catalog.current_setting('backslash_quote', true),
            pg_catalog.current_setting('escape_string_warning', true),
            pg_catalog.current_setting('transform_null_equals', true),
            pg_catalog.current_setting('array_nulls', true),
            pg_catalog.current_setting('bytea_output', true),
            pg_catalog.current_setting('xmlbinary', true),
            pg_catalog.current_setting('xmloption', true),
            pg_catalog.current_setting('lc_monetary', true),
            pg_catalog.current_setting('lc_numeric', true),
            pg_catalog.current_setting('lc_time', true),
            pg_catalog.current_setting('default_text_search_config', true),
            pg_catalog.current_setting('quote_all_identifiers', true),
            pg_catalog.current_setting('row_security', true),
            pg_catalog.current_setting('lock_timeout', true),
            pg_catalog.current_setting('client_encoding', true),
            pg_catalog.current_setting('client_min_messages', true),
            pg_catalog.current_setting('check_function_bodies', true),
            pg_catalog.current_setting('plpgsql.variable_conflict', true),
            pg_catalog.current_setting('plpgsql.extra_errors', true),
            pg_catalog.current_setting('plpgsql.extra_warnings', true),
            pg_catalog.current_setting('statement_timeout', true),
            pg_catalog.current_setting('idle_in_transaction_session_timeout', true),
            pg_catalog.current_setting('default_transaction_isolation', true),
            pg_catalog.current_setting('default_transaction_read_only', true),
            pg_catalog.current_setting('default_transaction_deferrable', true),
            pg_catalog.current_setting('synchronous_commit', true),
            pg_catalog.current_setting('session_replication_role', true),
            pg_catalog.current_setting('idle_session_timeout', true),
            pg_catalog.current_setting('transaction_timeout', true),
            pg_catalog.current_setting('transaction_read_only', true)]
    $$;

-- What tells the statements prepared in this session apart: how many, and when the
-- last was prepared (a PREPARE adds one or moves the time, a DEALLOCATE takes one).
CREATE OR REPLACE FUNCTION timers._prepared_now() RETURNS text
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    RETURN (SELECT count(*)::text || ' ' || coalesce(max(p.prepare_time)::text, '')
              FROM pg_catalog.pg_prepared_statements p);
END
$$;

-- The run's identity check: the executor of the saved timer or keyed timer whose
-- SQL p_sql is (the one the run names in pgtimers.timer, else any of p_owner's),
-- checked to be there and to be a security-definer function; else 42501 (SQL of the
-- caller's choosing) or 42704 (the executor is gone). A superuser session may run any
-- SQL as a role with an executor (it could SET ROLE anyway).
CREATE OR REPLACE FUNCTION timers._saved_executor(p_owner name, p_sql text) RETURNS text
    LANGUAGE plpgsql STABLE
    -- the name (or key) index whatever the statistics say: a table analyzed while empty
    -- would make each look-up a scan, and a bulk save quadratic
    SET enable_seqscan = off SET jit = off
    AS $$
DECLARE
    v_timer text := current_setting('pgtimers.timer', true);
    v_fn text;
    v_saved boolean;
BEGIN
    -- a run names what it runs (a timer's name or a keyed timer's key): a unique index finds it
    SELECT t.executor INTO v_fn FROM timers.timers t
     WHERE lower(t.name) = lower(v_timer) COLLATE "default" AND t.owner = p_owner AND t.sql = p_sql;
    v_saved := FOUND;
    IF NOT v_saved THEN
        SELECT k.executor INTO v_fn FROM timers.keyed_timers k
         WHERE k.key = v_timer AND k.owner = p_owner AND k.sql = p_sql;
        v_saved := FOUND;
    END IF;
    IF NOT v_saved THEN
        SELECT t.executor INTO v_fn FROM timers.timers t WHERE t.owner = p_owner AND t.sql = p_sql LIMIT 1;
        v_saved := FOUND;
    END IF;
    IF NOT v_saved THEN
        SELECT k.executor INTO v_fn FROM timers.keyed_timers k
         WHERE md5(k.sql) = md5(p_sql) AND k.sql = p_sql AND k.owner = p_owner LIMIT 1;
        v_saved := FOUND;
    END IF;
    IF NOT v_saved THEN
        IF NOT coalesce((SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = session_user), false) THEN
            RAISE EXCEPTION 'permission denied to run this SQL as role "%": the runner runs only the saved SQL of a timer of that role', p_owner
                USING ERRCODE = '42501';
        END IF;
        v_fn := timers._executor_of(p_owner);
    END IF;
    IF v_fn IS NULL OR timers._executor_owner(v_fn) IS NULL THEN
        RAISE EXCEPTION 'the timer''s owner "%" has no executor (the role was dropped or its objects were); save the timer again as an existing role', p_owner
            USING ERRCODE = '42704';
    END IF;
    RETURN v_fn;
END
$$;

-- Before a run: prepared statements share one namespace with the runner's driver and
-- outlive the run, so PREPARE, DEALLOCATE and EXECUTE never run (also in SQL saved
-- before the save-time check knew them). The text is read only when it can hold one.
CREATE OR REPLACE FUNCTION timers._scan_session_use(p_sql text) RETURNS void
    LANGUAGE plpgsql STABLE
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
-- the SQL) are put back, search_path first, for the run's bookkeeping in this
-- transaction (session advisory locks it took go now). A plain set_config here persists
-- after this function returns, in every frame of the run (that is what the SQL did too);
-- before the COMMIT, timers._session_reset puts the whole session back.
-- Then what the SQL may not leave: statements it prepared (dropped now: a rollback
-- does not undo them), a WITH HOLD cursor (its query would run at COMMIT, as the
-- runner), a read-only transaction (the bookkeeping commits in it). Raising fails the
-- run, which rolls the SQL back with everything it set.
CREATE OR REPLACE FUNCTION timers._restore_session(p_settings text[], p_prepared text) RETURNS void
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_nil text;  -- what a call whose value is not needed returns (not PERFORM: see the top)
    v_names constant text[] := timers._guarded_settings();
    v_name text;
    i integer;
BEGIN
    v_nil := pg_catalog.set_config('search_path', p_settings[1], false);
    IF timers._settings_now() OPERATOR(pg_catalog.<>) p_settings THEN
      FOR i IN 2 .. pg_catalog.cardinality(v_names) LOOP
        v_name := v_names[i];
        CONTINUE WHEN v_name = 'transaction_read_only'
                   OR pg_catalog.current_setting(v_name, true) IS NOT DISTINCT FROM p_settings[i];
        v_nil := pg_catalog.set_config(v_name, p_settings[i], false);
      END LOOP;
    END IF;
    IF pg_catalog.current_setting('transaction_read_only') IS DISTINCT FROM
       p_settings[pg_catalog.array_position(v_names, 'transaction_read_only')] THEN
        RAISE EXCEPTION 'a timer''s SQL may not leave its transaction read-only (SET transaction_read_only): the run''s bookkeeping commits in the same transaction'
            USING ERRCODE = '25006';
    END IF;
    IF timers._prepared_now() IS DISTINCT FROM p_prepared THEN
        FOR v_name IN
            SELECT p.name FROM pg_catalog.pg_prepared_statements p
             WHERE p.from_sql AND p.prepare_time >= pg_catalog.statement_timestamp()
        LOOP
            EXECUTE format('DEALLOCATE %I', v_name);
        END LOOP;
        RAISE EXCEPTION 'a timer''s SQL may not prepare or deallocate statements, also not in dynamic SQL: they live in the runner''s session, which outlives the run and runs the runner''s own statements'
            USING ERRCODE = '42501';
    END IF;
    -- what else the SQL may leave in the session goes before the COMMIT (_session_reset)
    v_nil := pg_catalog.pg_advisory_unlock_all();
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_cursors c WHERE c.is_holdable) THEN
        RAISE EXCEPTION 'a timer''s SQL may not leave a WITH HOLD cursor open: it would run after the run, as the runner'
            USING ERRCODE = '42501';
    END IF;
END
$$;



-- ---------------------------------------------------------------------------
-- Rights
-- ---------------------------------------------------------------------------
REVOKE ALL ON FUNCTION
    timers._apply_role_settings(oid),
    timers._rows_written(),
    timers._executor_of(name),
    timers._ensure_executor(name),
    timers._hand_over(text,name),
    timers._grants_of(name),
    timers._take_back(name,jsonb),
    timers._refuse_hand_over(name,text),
    timers._executor_owner(text),
    timers._saved_executor(name,text),
    timers._exec_as(name,text),
    timers._run_rows(bigint,bigint),
    timers._counted_by_statement(text),
    timers._fresh_run_state(),
    timers._session_reset(text[],text[]),
    timers._guarded_settings(),
    timers._settings_now(),
    timers._prepared_now(),
    timers._scan_session_use(text),
    timers._restore_session(text[],text)
    FROM PUBLIC, pgtimers_reader, pgtimers_admin, pgtimers_runner;
GRANT EXECUTE ON FUNCTION
    timers._executor_owner(text)
    TO pgtimers_reader, pgtimers_runner;
GRANT EXECUTE ON FUNCTION
    timers._executor_of(name)
    TO pgtimers_admin;
GRANT EXECUTE ON FUNCTION
    timers._exec_as(name,text),
    timers._session_reset(text[],text[])
    TO pgtimers_runner;
