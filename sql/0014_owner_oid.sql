-- pgtimers 0014: a timer runs only as the role that saved it, also after a rename.
--
-- Owners are stored by role name (timers.timers.owner, timers.keyed_timers.owner).
-- After ALTER ROLE a RENAME TO b, another role could take the name a, and with it
-- a's timers (its own executor, timers_exec.as_<its oid>, passes every check).
-- Each timer now also keeps the owner's oid, set by a trigger whenever its owner
-- is written (save, arm, repin); timers._exec_as refuses to run saved SQL for a
-- role whose oid is not the one that saved it. Save or arm the timer again as the
-- role that should run it.

ALTER TABLE timers.timers ADD COLUMN owner_oid oid;
ALTER TABLE timers.keyed_timers ADD COLUMN owner_oid oid;
UPDATE timers.timers t SET owner_oid = r.oid FROM pg_roles r WHERE r.rolname = t.owner;
UPDATE timers.keyed_timers k SET owner_oid = r.oid FROM pg_roles r WHERE r.rolname = k.owner;

COMMENT ON COLUMN timers.timers.owner_oid IS
    'The oid of the role that saved the timer (owner is its name then): a rename never hands the timer to another role.';
COMMENT ON COLUMN timers.keyed_timers.owner_oid IS
    'The oid of the role that armed (or repinned) the timer.';

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
REVOKE ALL ON FUNCTION timers._set_owner_oid() FROM PUBLIC;

CREATE TRIGGER owner_oid BEFORE INSERT OR UPDATE OF owner ON timers.timers
    FOR EACH ROW EXECUTE FUNCTION timers._set_owner_oid();
CREATE TRIGGER owner_oid BEFORE INSERT OR UPDATE OF owner ON timers.keyed_timers
    FOR EACH ROW EXECUTE FUNCTION timers._set_owner_oid();

-- 0012's timers._exec_as, with the owner's oid checked.
CREATE OR REPLACE FUNCTION timers._exec_as(p_owner name, p_sql text) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_fn text := timers._executor_name(p_owner);
    v_oid oid := (SELECT r.oid FROM pg_roles r WHERE r.rolname = p_owner);
    v_saved boolean;
    v_same boolean;
    v_rows bigint;
    v_refusal record;
    v_prepared text[];
    v_name text;
BEGIN
    -- The saved SQL being run, and whether the role that saved it is the one that
    -- has the name now (owner_oid): the timer being run by its name (pgtimers.timer,
    -- set by the run), a keyed timer by its SQL's md5 (index keyed_sql), anything
    -- else by a scan.
    SELECT bool_or(x.owner_oid = v_oid) INTO v_same
      FROM (SELECT t.owner_oid FROM timers.timers t
             WHERE lower(t.name) = lower(current_setting('pgtimers.timer', true)) COLLATE "default"
               AND t.owner = p_owner AND t.sql = p_sql
            UNION ALL
            SELECT k.owner_oid FROM timers.keyed_timers k
             WHERE md5(k.sql) = md5(p_sql) AND k.sql = p_sql AND k.owner = p_owner) x
    HAVING count(*) > 0;
    v_saved := FOUND;
    IF NOT v_saved THEN
        SELECT bool_or(t.owner_oid = v_oid) INTO v_same FROM timers.timers t
         WHERE t.owner = p_owner AND t.sql = p_sql
        HAVING count(*) > 0;
        v_saved := FOUND;
    END IF;
    IF NOT v_saved AND NOT coalesce((SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = session_user), false) THEN
        RAISE EXCEPTION 'permission denied to run this SQL as role "%": the runner runs only the saved SQL of a timer of that role', p_owner
            USING ERRCODE = '42501';
    END IF;
    IF v_fn IS NULL OR to_regprocedure(format('timers_exec.%I(text)', v_fn)) IS NULL THEN
        RAISE EXCEPTION 'the timer''s owner "%" has no executor (the role was dropped or its objects were); save the timer again as an existing role', p_owner
            USING ERRCODE = '42704';
    END IF;
    -- Owners are stored by name: after a rename, the role that takes the name is not
    -- the one that saved the timer, and never runs it.
    IF v_saved AND NOT coalesce(v_same, false) THEN
        RAISE EXCEPTION 'role "%" is not the role that saved this timer: its owner was renamed or dropped, and another role has the name now', p_owner
            USING ERRCODE = '42501',
                  HINT = 'Save or arm the timer again as the role that should run it.';
    END IF;
    -- Run only through a security-definer executor the owner owns: after a
    -- REASSIGN OWNED it would run as someone else.
    IF NOT EXISTS (SELECT 1 FROM pg_proc p JOIN pg_roles r ON r.oid = p.proowner
                    WHERE p.oid = to_regprocedure(format('timers_exec.%I(text)', v_fn))
                      AND p.prosecdef AND r.rolname = p_owner) THEN
        RAISE EXCEPTION 'the executor of role "%" is not a security-definer function owned by it; save the timer again to repair it', p_owner
            USING ERRCODE = '42501';
    END IF;
    -- Prepared statements share one namespace with the runner's driver and outlive
    -- the run: PREPARE, DEALLOCATE and EXECUTE never run. The text is read only
    -- when it can hold one: the word itself, or a body (DO, FUNCTION, PROCEDURE)
    -- where it can hide behind an escape (E'\x..', U&'\....') or be cut in two
    -- by a string continued on the next line.
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
    v_prepared := ARRAY(SELECT p.name || ' ' || p.prepare_time::text || ' ' || md5(p.statement)
                          FROM pg_prepared_statements p ORDER BY 1);
    EXECUTE format('SELECT timers_exec.%I($1)', v_fn) INTO v_rows USING p_sql;
    -- Dynamic SQL (EXECUTE 'PREPARE ...'): what it prepared goes now (a prepared
    -- statement is not undone by a rollback), and the run fails.
    IF ARRAY(SELECT p.name || ' ' || p.prepare_time::text || ' ' || md5(p.statement)
               FROM pg_prepared_statements p ORDER BY 1) IS DISTINCT FROM v_prepared THEN
        FOR v_name IN
            SELECT p.name FROM pg_prepared_statements p
             WHERE p.from_sql AND NOT (p.name || ' ' || p.prepare_time::text || ' ' || md5(p.statement) = ANY (v_prepared))
        LOOP
            EXECUTE format('DEALLOCATE %I', v_name);
        END LOOP;
        RAISE EXCEPTION 'a timer''s SQL may not prepare or deallocate statements, also not in dynamic SQL: they live in the runner''s session, which outlives the run and runs the runner''s own statements'
            USING ERRCODE = '42501';
    END IF;
    -- A WITH HOLD cursor would run its query at COMMIT, outside the executor.
    IF EXISTS (SELECT 1 FROM pg_cursors WHERE is_holdable) THEN
        RAISE EXCEPTION 'a timer''s SQL may not leave a WITH HOLD cursor open: it would run after the run, as the runner'
            USING ERRCODE = '42501';
    END IF;
    RETURN v_rows;
END
$$;

