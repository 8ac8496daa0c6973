-- pgtimers 0004: the admin surface — save, enable, delete, set_timezone, unlock,
-- the status view, audit rows, NOTIFY, and the per-owner executors.
--
-- Public functions are SECURITY INVOKER: they see the caller's role in effect
-- (current_user), which becomes the timer's owner, and call an internal
-- SECURITY DEFINER function that refuses an owner the session user may not
-- act as. Only pgtimers_admin may execute the internal functions.

-- Advisory lock class a run holds on its timer id; status.running reads it from pg_locks.
CREATE OR REPLACE FUNCTION timers._running_lock_class() RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT 28775 $$;

CREATE OR REPLACE FUNCTION timers._default_zone() RETURNS text
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$ SELECT coalesce((SELECT value FROM timers.settings WHERE key = 'timezone'), 'UTC') $$;

-- The zone a timer's wall times are read in: its own, else the database default.
CREATE OR REPLACE FUNCTION timers._zone(p_timezone text) RETURNS text
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$ SELECT coalesce(p_timezone, timers._default_zone()) $$;

-- The time a timer lives on: its test clock's frozen time, else the server's.
CREATE OR REPLACE FUNCTION timers._now(p_test_clock text) RETURNS timestamptz
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
        SELECT CASE WHEN p_test_clock IS NULL THEN now()
                    ELSE (SELECT c.now FROM timers.test_clocks c WHERE c.name = p_test_clock) END
    $$;

-- The next due time strictly after p_after for a timer row, honouring enabled,
-- expired, start_at, end_at and max_runs; NULL when it is not armed.
CREATE OR REPLACE FUNCTION timers._plan(t timers.timers, p_after timestamptz) RETURNS timestamptz
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_next timestamptz;
BEGIN
    IF NOT t.enabled OR t.expired THEN
        RETURN NULL;
    END IF;
    IF t.max_runs IS NOT NULL AND t.scheduled_runs >= t.max_runs THEN
        RETURN NULL;
    END IF;
    v_next := timers._next_due(t.spec, p_after, timers._zone(t.timezone), t.start_at);
    IF v_next IS NOT NULL AND t.end_at IS NOT NULL AND v_next > t.end_at THEN
        RETURN NULL;
    END IF;
    RETURN v_next;
END
$$;

-- One audit row; actor is the role in effect at the public call, session the login role.
CREATE OR REPLACE FUNCTION timers._audit(p_actor name, p_action text, p_object text, p_detail jsonb)
    RETURNS void
    LANGUAGE sql
    SET search_path = pg_catalog, pg_temp
    AS $$
        INSERT INTO timers.audit (actor, session, action, object, detail)
        VALUES (p_actor, session_user, p_action, p_object, coalesce(p_detail, '{}'))
    $$;

-- Wake the runners of this database: they LISTEN on channel pgtimers.
CREATE OR REPLACE FUNCTION timers._notify(p_event text, p_object text) RETURNS void
    LANGUAGE sql
    SET search_path = pg_catalog, pg_temp
    AS $$
        SELECT pg_notify('pgtimers', jsonb_build_object(
            'database', current_database(), 'event', p_event, 'timer', p_object)::text)
    $$;

-- Who is calling. A SECURITY DEFINER body cannot see its caller's current_user,
-- and session_user is the runner inside a run, so the public wrappers leave a
-- ticket: a row (this transaction, current_user) that row-level security lets a
-- role insert only for itself. An internal body that acts for p_actor takes that
-- ticket first, so naming another role in a direct call is refused.
CREATE TABLE timers.callers (
    xid  xid8 NOT NULL DEFAULT pg_catalog.pg_current_xact_id(),
    role name NOT NULL DEFAULT current_user,
    -- each call its own row, taken newest first: a transaction that saves many
    -- timers never walks the dead rows of earlier calls (O(1), not O(N) each)
    n    bigint GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (xid, role, n)
);
ALTER TABLE timers.callers ENABLE ROW LEVEL SECURITY;
CREATE POLICY callers_self ON timers.callers FOR INSERT TO pgtimers_admin
    WITH CHECK (role = current_user AND xid = pg_catalog.pg_current_xact_id());
GRANT INSERT ON timers.callers TO pgtimers_admin;
GRANT SELECT, DELETE ON timers.callers TO pgtimers_runner;  -- pruning ended transactions

CREATE OR REPLACE FUNCTION timers._ticket() RETURNS void
    LANGUAGE sql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$ INSERT INTO timers.callers DEFAULT VALUES $$;

CREATE OR REPLACE FUNCTION timers._take_ticket(p_actor name, p_what text) RETURNS void
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    DELETE FROM timers.callers
     WHERE ctid = (SELECT c.ctid FROM timers.callers c
                    WHERE c.xid = pg_current_xact_id() AND c.role = p_actor
                    ORDER BY c.n DESC LIMIT 1);
    IF NOT FOUND THEN
        RAISE EXCEPTION 'cannot % as role "%": only that role itself may, through the timers.* functions', p_what, p_actor
            USING ERRCODE = '42501';
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION timers._require_admin(p_what text) RETURNS void
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    IF NOT pg_has_role(current_user, 'pgtimers_admin', 'MEMBER') THEN
        RAISE EXCEPTION 'permission denied to % : it needs the role pgtimers_admin, and role "%" is not a member', p_what, current_user
            USING ERRCODE = '42501',
                  HINT = 'An administrator can run: GRANT pgtimers_admin TO ' || quote_ident(current_user) || ';';
    END IF;
    PERFORM timers._ticket();
END
$$;

CREATE OR REPLACE FUNCTION timers._no_such_timer(p_name text) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    RAISE EXCEPTION 'there is no timer ''%'' in database %', p_name, current_database()
        USING ERRCODE = 'P0002';
END
$$;

-- Lock a timer row for a change; a running timer (row locked by a run) is refused, not waited for.
CREATE OR REPLACE FUNCTION timers._lock_for_change(p_name text) RETURNS timers.timers
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    t timers.timers;
BEGIN
    SELECT * INTO t FROM timers.timers WHERE lower(name) = lower(p_name) COLLATE "default" FOR UPDATE NOWAIT;
    RETURN t;
EXCEPTION WHEN lock_not_available THEN
    RAISE EXCEPTION 'timer ''%'' is running; change it when the run has finished', p_name
        USING ERRCODE = '55P03';
END
$$;

CREATE OR REPLACE FUNCTION timers._refuse_locked(t timers.timers, p_what text) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    IF t.locked THEN
        RAISE EXCEPTION 'timer ''%'' is locked: it cannot be % until a superuser runs SELECT timers.unlock(%)',
            t.name, p_what, quote_literal(t.name)
            USING ERRCODE = '42501';
    END IF;
END
$$;

-- The executor of an owner: a SECURITY DEFINER function owned by that role, in
-- schema timers_exec which owners cannot reach by name. Running a timer's SQL
-- inside it pins the owner's identity: PostgreSQL refuses SET ROLE, RESET ROLE
-- and SET SESSION AUTHORIZATION in a security-definer function, and a function
-- cannot COMMIT or ROLLBACK the run's transaction.
CREATE OR REPLACE FUNCTION timers._executor_name(p_owner name) RETURNS text
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$ SELECT 'as_' || r.oid::text FROM pg_roles r WHERE r.rolname = p_owner $$;

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
        EXECUTE format('GRANT EXECUTE ON FUNCTION timers_exec.%I(text) TO pgtimers_runner', v_fn);
    END IF;
    RETURN v_fn;
END
$$;

-- Run SQL as its owner (the runner's path). Returns the row count of its last statement.
CREATE OR REPLACE FUNCTION timers._exec_as(p_owner name, p_sql text) RETURNS bigint
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_fn text := timers._executor_name(p_owner);
    v_rows bigint;
BEGIN
    IF v_fn IS NULL OR to_regprocedure(format('timers_exec.%I(text)', v_fn)) IS NULL THEN
        RAISE EXCEPTION 'the timer''s owner "%" has no executor (the role was dropped or its objects were); save the timer again as an existing role', p_owner
            USING ERRCODE = '42704';
    END IF;
    -- Run only through a security-definer executor the owner owns: after a
    -- REASSIGN OWNED it would run as someone else.
    IF NOT EXISTS (SELECT 1 FROM pg_proc p JOIN pg_roles r ON r.oid = p.proowner
                    WHERE p.oid = to_regprocedure(format('timers_exec.%I(text)', v_fn))
                      AND p.prosecdef AND r.rolname = p_owner) THEN
        RAISE EXCEPTION 'the executor of role "%" is not a security-definer function owned by it; save the timer again to repair it', p_owner
            USING ERRCODE = '42501';
    END IF;
    EXECUTE format('SELECT timers_exec.%I($1)', v_fn) INTO v_rows USING p_sql;
    -- A WITH HOLD cursor would run its query at COMMIT, outside the executor.
    IF EXISTS (SELECT 1 FROM pg_cursors WHERE is_holdable) THEN
        RAISE EXCEPTION 'a timer''s SQL may not leave a WITH HOLD cursor open: it would run after the run, as the runner'
            USING ERRCODE = '42501';
    END IF;
    RETURN v_rows;
END
$$;

CREATE OR REPLACE VIEW timers.status AS
SELECT
    t.name,
    current_database()::text AS database,
    t.schedule,
    -- A timer's SQL may hold secrets: readers see it for their own timers only.
    CASE WHEN pg_has_role(current_user, 'pgtimers_admin', 'MEMBER')
           OR pg_has_role(current_user, (SELECT r.oid FROM pg_roles r WHERE r.rolname = t.owner), 'MEMBER')
         THEN t.sql END AS sql,
    t.enabled,
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
    EXISTS (SELECT 1 FROM pg_locks l
             WHERE l.locktype = 'advisory' AND l.granted
               AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
               AND l.classid = timers._running_lock_class()::oid
               AND l.objid = t.id::oid AND l.objsubid = 2) AS running,
    timers._zone(t.timezone) AS timezone,
    coalesce(t.catch_up, 'skip') AS catch_up,
    t.start_at,
    t.end_at,
    t.max_runs,
    t.expired,
    t.locked
FROM timers.timers t;

COMMENT ON VIEW timers.status IS
    'One row per timer: the fields of GET /api/timers (to_jsonb(row) is the HTTP body), plus timezone, catch_up, start_at, end_at, max_runs, expired, locked.';

-- VOLATILE on purpose: it must see the row the same statement has just written.
CREATE OR REPLACE FUNCTION timers._status(p_name text) RETURNS timers.status
    LANGUAGE sql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$ SELECT s.* FROM timers.status s WHERE lower(s.name) = lower(p_name) COLLATE "default" $$;

-- Validate the options of a save; raises on the first bad one.
CREATE OR REPLACE FUNCTION timers._check_options(
    p_catch_up text, p_start_at timestamptz, p_end_at timestamptz,
    p_max_runs bigint, p_timeout interval, p_test_clock text) RETURNS void
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    IF p_catch_up IS NOT NULL AND p_catch_up NOT IN ('skip', 'latest', 'all') THEN
        RAISE EXCEPTION 'bad catch_up ''%'': use ''skip'' (the default: missed due times are counted, not run), ''latest'' (one run for all of them) or ''all'' (each one, in order)', p_catch_up
            USING ERRCODE = '22023';
    END IF;
    IF p_start_at IS NOT NULL AND p_end_at IS NOT NULL AND p_end_at <= p_start_at THEN
        RAISE EXCEPTION 'end_at % is not after start_at %', p_end_at, p_start_at USING ERRCODE = '22023';
    END IF;
    IF p_max_runs IS NOT NULL AND p_max_runs < 1 THEN
        RAISE EXCEPTION 'bad max_runs %: use a number of runs of 1 or more', p_max_runs USING ERRCODE = '22023';
    END IF;
    IF p_timeout IS NOT NULL AND (p_timeout < interval '1 second' OR p_timeout > interval '24 hours') THEN
        RAISE EXCEPTION 'bad timeout %: use 1 second to 24 hours (the default is 10 minutes)', p_timeout
            USING ERRCODE = '22023';
    END IF;
    IF p_test_clock IS NOT NULL AND NOT EXISTS (SELECT 1 FROM timers.test_clocks WHERE name = p_test_clock) THEN
        RAISE EXCEPTION 'there is no test clock ''%''; make one with SELECT timers.create_test_clock(%, now())',
            p_test_clock, quote_literal(p_test_clock)
            USING ERRCODE = '22023';
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION timers._require_calendar(p_spec jsonb) RETURNS void
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    IF p_spec->>'kind' = 'trading'
       AND NOT EXISTS (SELECT 1 FROM timers.calendars c WHERE lower(c.name) = lower(p_spec->>'calendar') COLLATE "default") THEN
        RAISE EXCEPTION 'there is no calendar ''%'' in database %', p_spec->>'calendar', current_database()
            USING ERRCODE = '22023',
                  HINT = format('Make it first: SELECT timers.save_calendar(%L, ''mon-fri'');', p_spec->>'calendar');
    END IF;
END
$$;

-- The body of timers.save. p_owner is the caller's role in effect, proven by
-- its ticket, so calling this function directly (or from a timer's SQL, where
-- session_user is the runner) cannot make a timer run as someone else.
CREATE OR REPLACE FUNCTION timers._save(
    p_owner name, p_name text, p_schedule text, p_sql text, p_enabled boolean,
    p_timezone text, p_catch_up text, p_start_at timestamptz, p_end_at timestamptz,
    p_max_runs bigint, p_timeout interval, p_locked boolean, p_test_clock text)
    RETURNS text
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_old timers.timers;
    v_zone text;
    v_spec jsonb;
    v_now timestamptz;
    v_id bigint;
    v_row timers.timers;
BEGIN
    PERFORM timers._take_ticket(p_owner, 'save a timer that runs');
    IF NOT pg_has_role(p_owner, 'pgtimers_admin', 'MEMBER') THEN
        RAISE EXCEPTION 'permission denied to save a timer: it needs the role pgtimers_admin, and role "%" is not a member', p_owner
            USING ERRCODE = '42501';
    END IF;
    PERFORM timers._check_name(p_name);
    IF p_enabled IS NULL OR p_locked IS NULL THEN
        RAISE EXCEPTION 'enabled and locked must be true or false, not NULL' USING ERRCODE = '22004';
    END IF;
    v_zone := CASE WHEN p_timezone IS NULL THEN NULL ELSE timers._check_zone(p_timezone) END;
    PERFORM timers._check_options(p_catch_up, p_start_at, p_end_at, p_max_runs, p_timeout, p_test_clock);
    PERFORM timers._check_sql(p_sql);
    v_now := timers._now(p_test_clock);
    v_spec := timers._parse_schedule(p_schedule, timers._zone(v_zone), v_now);
    PERFORM timers._require_calendar(v_spec);
    IF v_spec->>'kind' = 'once' AND (v_spec->>'at')::timestamptz <= v_now THEN
        RAISE EXCEPTION 'schedule ''%'' is in the past (it is % now in %)', p_schedule,
            to_char(v_now AT TIME ZONE timers._zone(v_zone), 'YYYY-MM-DD HH24:MI:SS'), timers._zone(v_zone)
            USING ERRCODE = '22023';
    END IF;

    v_old := timers._lock_for_change(p_name);
    IF v_old.id IS NOT NULL THEN
        PERFORM timers._refuse_locked(v_old, 'changed');
    END IF;
    PERFORM timers._ensure_executor(p_owner);

    INSERT INTO timers.timers AS t (name, schedule, spec, sql, enabled, timezone, catch_up, start_at,
                                    end_at, max_runs, timeout, locked, test_clock, owner)
    VALUES (p_name, v_spec->>'schedule', v_spec, p_sql, p_enabled, v_zone, p_catch_up, p_start_at,
            p_end_at, p_max_runs, p_timeout, p_locked, p_test_clock, p_owner)
    ON CONFLICT ((lower(name))) DO UPDATE
        SET name = EXCLUDED.name, schedule = EXCLUDED.schedule, spec = EXCLUDED.spec,
            sql = EXCLUDED.sql, enabled = EXCLUDED.enabled, timezone = EXCLUDED.timezone,
            catch_up = EXCLUDED.catch_up, start_at = EXCLUDED.start_at, end_at = EXCLUDED.end_at,
            max_runs = EXCLUDED.max_runs, timeout = EXCLUDED.timeout, locked = EXCLUDED.locked,
            test_clock = EXCLUDED.test_clock, owner = EXCLUDED.owner, updated_at = now(),
            expired = false, scheduled_runs = 0
    RETURNING t.* INTO v_row;
    v_id := v_row.id;

    UPDATE timers.timers SET next_due_at = timers._plan(v_row, v_now) WHERE id = v_id
    RETURNING * INTO v_row;
    IF v_row.next_due_at IS NULL AND v_row.enabled THEN
        UPDATE timers.timers SET expired = true WHERE id = v_id;
    END IF;

    PERFORM timers._audit(p_owner, 'save', v_row.name, jsonb_build_object(
        'created', v_old.id IS NULL, 'schedule', v_row.schedule, 'sql', p_sql,
        'enabled', p_enabled, 'timezone', v_zone, 'catch_up', p_catch_up, 'start_at', p_start_at,
        'end_at', p_end_at, 'max_runs', p_max_runs, 'timeout', p_timeout, 'locked', p_locked,
        'test_clock', p_test_clock));
    PERFORM timers._notify('save', v_row.name);
    RETURN v_row.name;
END
$$;

CREATE OR REPLACE FUNCTION timers.save(
    name text, schedule text, sql text,
    enabled boolean DEFAULT true, timezone text DEFAULT NULL, catch_up text DEFAULT NULL,
    start_at timestamptz DEFAULT NULL, end_at timestamptz DEFAULT NULL, max_runs bigint DEFAULT NULL,
    timeout interval DEFAULT NULL, locked boolean DEFAULT false, test_clock text DEFAULT NULL)
    RETURNS timers.status
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM timers._require_admin('save a timer');
    RETURN timers._status(timers._save(current_user, save.name, save.schedule, save.sql, save.enabled,
        save.timezone, save.catch_up, save.start_at, save.end_at, save.max_runs, save.timeout,
        save.locked, save.test_clock));
END
$$;

CREATE OR REPLACE FUNCTION timers._set_enabled(p_actor name, p_name text, p_enabled boolean) RETURNS text
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    t timers.timers;
BEGIN
    PERFORM timers._take_ticket(p_actor, 'turn a timer on or off');
    IF p_enabled IS NULL THEN
        RAISE EXCEPTION 'enabled must be true or false, not NULL' USING ERRCODE = '22004';
    END IF;
    t := timers._lock_for_change(p_name);
    IF t.id IS NULL THEN
        PERFORM timers._no_such_timer(p_name);
    END IF;
    PERFORM timers._refuse_locked(t, CASE WHEN p_enabled THEN 'turned on' ELSE 'turned off' END);
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

CREATE OR REPLACE FUNCTION timers.enable(name text, enabled boolean DEFAULT true) RETURNS timers.status
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM timers._require_admin(CASE WHEN enable.enabled THEN 'turn a timer on' ELSE 'turn a timer off' END);
    RETURN timers._status(timers._set_enabled(current_user, enable.name, enable.enabled));
END
$$;

CREATE OR REPLACE FUNCTION timers._delete(p_actor name, p_name text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    t timers.timers;
BEGIN
    PERFORM timers._take_ticket(p_actor, 'delete a timer');
    t := timers._lock_for_change(p_name);
    IF t.id IS NULL THEN
        PERFORM timers._no_such_timer(p_name);
    END IF;
    PERFORM timers._refuse_locked(t, 'deleted');
    DELETE FROM timers.timers WHERE id = t.id;
    PERFORM timers._audit(p_actor, 'delete', t.name,
                          jsonb_build_object('schedule', t.schedule, 'sql', t.sql, 'owner', t.owner));
    PERFORM timers._notify('delete', t.name);
END
$$;

CREATE OR REPLACE FUNCTION timers.delete(name text) RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM timers._require_admin('delete a timer');
    PERFORM timers._delete(current_user, delete.name);
    RETURN '{"deleted": true}'::jsonb;
END
$$;

CREATE OR REPLACE FUNCTION timers._set_timezone(p_actor name, p_zone text) RETURNS text
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_zone text;
    v_old text;
    t timers.timers;
BEGIN
    PERFORM timers._take_ticket(p_actor, 'set the default time zone');
    v_zone := timers._check_zone(p_zone);
    v_old := timers._default_zone();
    INSERT INTO timers.settings (key, value) VALUES ('timezone', v_zone)
    ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value;
    -- Timers without a zone of their own follow the default: read their wall times
    -- in the new zone (a `once` stores a resolved instant) and plan them again now.
    FOR t IN SELECT * FROM timers.timers WHERE timezone IS NULL AND NOT expired FOR UPDATE LOOP
        t.spec := timers._parse_schedule(t.schedule, v_zone, timers._now(t.test_clock));
        UPDATE timers.timers
           SET spec = t.spec, next_due_at = timers._plan(t, timers._now(t.test_clock))
         WHERE id = t.id;
    END LOOP;
    PERFORM timers._audit(p_actor, 'set_timezone', 'timezone', jsonb_build_object('from', v_old, 'to', v_zone));
    PERFORM timers._notify('set_timezone', NULL);
    RETURN v_zone;
END
$$;

CREATE OR REPLACE FUNCTION timers.set_timezone(zone text) RETURNS text
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM timers._require_admin('set the default time zone');
    RETURN timers._set_timezone(current_user, set_timezone.zone);
END
$$;

-- Only a superuser may unlock a locked timer; it is then changeable until saved locked again.
CREATE OR REPLACE FUNCTION timers.unlock(name text) RETURNS timers.status
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    t timers.timers;
BEGIN
    IF NOT (SELECT rolsuper FROM pg_roles WHERE rolname = session_user) THEN
        RAISE EXCEPTION 'permission denied to unlock timer ''%'': only a superuser may unlock a timer', unlock.name
            USING ERRCODE = '42501';
    END IF;
    t := timers._lock_for_change(unlock.name);
    IF t.id IS NULL THEN
        PERFORM timers._no_such_timer(unlock.name);
    END IF;
    UPDATE timers.timers SET locked = false, updated_at = now() WHERE id = t.id;
    PERFORM timers._audit(session_user, 'unlock', t.name, '{}');
    RETURN timers._status(t.name);
END
$$;

COMMENT ON FUNCTION timers.save(text, text, text, boolean, text, text, timestamptz, timestamptz, bigint, interval, boolean, text) IS
    'Create or replace a timer; it runs as the role in effect now. Returns its timers.status row. Needs pgtimers_admin.';
COMMENT ON FUNCTION timers.enable(text, boolean) IS
    'Turn a timer on (true) or off (false); a timer that is off still runs with CALL timers.run. Needs pgtimers_admin.';
COMMENT ON FUNCTION timers.delete(text) IS
    'Delete a timer; returns {"deleted": true}. Unknown name: SQLSTATE P0002. Needs pgtimers_admin.';
COMMENT ON FUNCTION timers.set_timezone(text) IS
    'Set the database''s default zone for timers without their own, and plan them again. Needs pgtimers_admin.';
COMMENT ON FUNCTION timers.unlock(text) IS
    'Unlock a locked timer so it can be changed or deleted. Superuser only.';

-- Rights: internals are callable only by the roles that need them.
REVOKE ALL ON FUNCTION timers._take_ticket(name, text), timers._ticket(), timers._ensure_executor(name), timers._save(name, text, text, text, boolean, text, text, timestamptz, timestamptz, bigint, interval, boolean, text),
    timers._set_enabled(name, text, boolean), timers._delete(name, text), timers._set_timezone(name, text),
    timers.unlock(text), timers._exec_as(name, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION timers._save(name, text, text, text, boolean, text, text, timestamptz, timestamptz, bigint, interval, boolean, text),
    timers._set_enabled(name, text, boolean), timers._delete(name, text), timers._set_timezone(name, text)
    TO pgtimers_admin;
GRANT EXECUTE ON FUNCTION timers._exec_as(name, text) TO pgtimers_runner;
GRANT EXECUTE ON FUNCTION timers._ticket() TO pgtimers_admin;
GRANT SELECT ON timers.status TO pgtimers_reader, pgtimers_runner;
