-- pgtimers code: the timers API: save, enable, delete, set_timezone, unlock, cancel.
--
-- Repeatable: applied whole on every install and upgrade, after the versioned
-- migrations (docs/design.md). Each object here is defined in this file only.

-- The next due time strictly after p_after for a timer row, honouring enabled,
-- expired, start_at, end_at and max_runs; NULL when it is not armed.
CREATE OR REPLACE FUNCTION timers._plan(t timers.timers, p_after timestamptz) RETURNS timestamptz
    LANGUAGE plpgsql STABLE
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
    v_next := timers._next_due(t.spec, p_after, t.zone, t.start_at);
    IF v_next IS NOT NULL AND t.end_at IS NOT NULL AND v_next > t.end_at THEN
        RETURN NULL;
    END IF;
    RETURN v_next;
END
$$;

-- Raise P0002 for a timer name that is not there.
CREATE OR REPLACE FUNCTION timers._no_such_timer(p_name text) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    RAISE EXCEPTION 'there is no timer % in database %', timers._quoted(p_name), current_database()
        USING ERRCODE = 'P0002';
END
$$;

-- Lock a timer row for a save; a running timer is refused, not waited for.
CREATE OR REPLACE FUNCTION timers._lock_for_change(p_name text) RETURNS timers.timers
    LANGUAGE plpgsql
    AS $$
DECLARE
    r record;
BEGIN
    r := timers._lock_or_running(p_name);
    IF r.running THEN
        RAISE EXCEPTION 'timer % is running; change it when the run has finished', timers._quoted(p_name)
            USING ERRCODE = '55P03',
                  HINT = 'timers.enable(name, false) and timers.delete(name) work while it runs; timers.cancel(name) stops the run.';
    END IF;
    RETURN r.t;
END
$$;

-- A locked timer is changed only after timers.unlock (42501).
CREATE OR REPLACE FUNCTION timers._refuse_locked(t timers.timers, p_what text) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF t.locked THEN
        RAISE EXCEPTION 'timer ''%'' is locked: it cannot be % until a superuser or the role that installed pgtimers runs SELECT timers.unlock(%)',
            t.name, p_what, quote_literal(t.name)
            USING ERRCODE = '42501';
    END IF;
END
$$;

-- Validate the options of a save; raises on the first bad one.
CREATE OR REPLACE FUNCTION timers._check_options(
    p_catch_up text, p_start_at timestamptz, p_end_at timestamptz,
    p_max_runs bigint, p_timeout interval, p_test_clock text, p_catch_up_window interval) RETURNS void
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    IF p_catch_up IS NOT NULL AND p_catch_up NOT IN ('skip', 'latest', 'all') THEN
        RAISE EXCEPTION 'bad catch_up %: use ''skip'' (the default: missed due times are counted, not run), ''latest'' (one run for all of them) or ''all'' (each one, in order)', timers._quoted(p_catch_up)
            USING ERRCODE = '22023';
    END IF;
    -- by its length in seconds: interval '1 year' compares as 360 days, '365 days' is less
    IF p_catch_up_window IS NOT NULL
       AND (extract(epoch FROM p_catch_up_window) <= 0
            OR extract(epoch FROM p_catch_up_window) > extract(epoch FROM interval '1 year')) THEN
        RAISE EXCEPTION 'bad catch_up_window %: use more than 0 and at most 1 year, for example ''15 minutes'', or NULL (no window: catch_up alone decides)',
            quote_literal(p_catch_up_window::text) USING ERRCODE = '22023';
    END IF;
    PERFORM timers._check_time('start_at', p_start_at);
    PERFORM timers._check_time('end_at', p_end_at);
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
        RAISE EXCEPTION 'there is no test clock %; make one with SELECT timers.create_test_clock(%, now())',
            timers._quoted(p_test_clock), timers._quoted(p_test_clock)
            USING ERRCODE = '22023';
    END IF;
END
$$;

-- Validate the run policies of a save (retries, retry_delay, pause_after, jitter,
-- priority); raises on the first bad one, naming it.
CREATE OR REPLACE FUNCTION timers._check_policies(
    p_retries integer, p_retry_delay interval, p_pause_after integer, p_jitter interval,
    p_priority integer) RETURNS void
    LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF p_retries IS NULL OR p_retries < 0 OR p_retries > 100 THEN
        RAISE EXCEPTION 'bad retries %: use 0 (no retry, the default) to 100 attempts after the first',
            coalesce(p_retries::text, 'NULL') USING ERRCODE = '22023';
    END IF;
    IF p_retry_delay IS NULL OR p_retry_delay < interval '1 second' OR p_retry_delay > interval '1 hour' THEN
        RAISE EXCEPTION 'bad retry_delay %: use 1 second to 1 hour (the default is 30 seconds; it doubles with each retry, to at most an hour)',
            coalesce(quote_literal(p_retry_delay::text), 'NULL') USING ERRCODE = '22023';
    END IF;
    IF p_pause_after IS NOT NULL AND (p_pause_after < 1 OR p_pause_after > 10000) THEN
        RAISE EXCEPTION 'bad pause_after %: use a number of failed due times in a row from 1 to 10000, or NULL (never pause)',
            p_pause_after USING ERRCODE = '22023';
    END IF;
    IF p_jitter IS NOT NULL AND (p_jitter < interval '0' OR p_jitter > interval '1 hour') THEN
        RAISE EXCEPTION 'bad jitter %: use 0 to 1 hour, for example ''30 seconds'', or NULL (none)',
            quote_literal(p_jitter::text) USING ERRCODE = '22023';
    END IF;
    IF p_priority IS NULL OR p_priority < -100 OR p_priority > 100 THEN
        RAISE EXCEPTION 'bad priority %: use -100 to 100 (the default is 0; higher starts first when workers are short)',
            coalesce(p_priority::text, 'NULL') USING ERRCODE = '22023';
    END IF;
END
$$;

-- Check a history option of timers.save: 'all' (every run keeps a timers.runs row) or
-- 'failures' (a run that went well keeps none).
CREATE OR REPLACE FUNCTION timers._check_history(p_history text) RETURNS void
    LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF p_history IS NULL OR p_history NOT IN ('all', 'failures') THEN
        RAISE EXCEPTION 'bad history %: use ''all'' (the default: every run keeps its row in timers.runs) or ''failures'' (failures, skips and retries only)',
            timers._quoted(p_history) USING ERRCODE = '22023';
    END IF;
END
$$;

-- A jitter must stay below the time between the timer's due times, else a due time's
-- run could come after the next one: checked on its next two due times from p_now.
CREATE OR REPLACE FUNCTION timers._check_jitter(p_jitter interval, t timers.timers, p_now timestamptz)
    RETURNS void
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    v_first timestamptz;
    v_second timestamptz;
BEGIN
    IF p_jitter IS NULL THEN
        RETURN;
    END IF;
    v_first := timers._next_due(t.spec, p_now, t.zone, t.start_at);
    v_second := timers._next_due(t.spec, v_first, t.zone, t.start_at);
    IF v_second IS NOT NULL AND p_jitter >= v_second - v_first THEN
        RAISE EXCEPTION 'bad jitter %: it must be less than the % between the timer''s due times',
            quote_literal(p_jitter::text), v_second - v_first USING ERRCODE = '22023';
    END IF;
END
$$;

-- A trading schedule needs its calendar at save (22023 with a hint to make it).
CREATE OR REPLACE FUNCTION timers._require_calendar(p_spec jsonb) RETURNS void
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    IF p_spec->>'kind' = 'trading'
       AND NOT EXISTS (SELECT 1 FROM timers.calendars c WHERE lower(c.name) = lower(p_spec->>'calendar') COLLATE "default") THEN
        RAISE EXCEPTION 'there is no calendar % in database %', timers._quoted(p_spec->>'calendar'), current_database()
            USING ERRCODE = '22023',
                  HINT = format('Make it first: SELECT timers.save_calendar(%s, ''mon-fri'');',
                                timers._quoted(p_spec->>'calendar'));
    END IF;
END
$$;

-- A timer's definition from jsonb: name, schedule and sql, and the options of
-- timers.save (enabled, timezone, catch_up, start_at, end_at, max_runs, timeout,
-- locked, test_clock, retries, retry_delay, pause_after, jitter, priority,
-- catch_up_window, autonomous, deadline, history, after, run_group); 22023
-- naming an unknown key or a value of the wrong type. A JSON null is the default,
-- except for enabled, locked and autonomous (22004).
CREATE OR REPLACE FUNCTION timers._timer_args(
    p_timer jsonb,
    OUT name text, OUT schedule text, OUT sql text, OUT enabled boolean, OUT timezone text,
    OUT catch_up text, OUT start_at timestamptz, OUT end_at timestamptz, OUT max_runs bigint,
    OUT timeout interval, OUT locked boolean, OUT test_clock text, OUT retries integer,
    OUT retry_delay interval, OUT pause_after integer, OUT jitter interval, OUT priority integer,
    OUT catch_up_window interval, OUT autonomous boolean, OUT deadline interval,
    OUT history text, OUT after text[], OUT run_group text)
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    c_keys constant text[] := ARRAY['name', 'schedule', 'sql', 'enabled', 'timezone', 'catch_up',
                                    'start_at', 'end_at', 'max_runs', 'timeout', 'locked', 'test_clock',
                                    'retries', 'retry_delay', 'pause_after', 'jitter', 'priority',
                                    'catch_up_window', 'autonomous', 'deadline', 'history', 'after',
                                    'run_group'];
    v_key text;
    v_value text;
BEGIN
    IF jsonb_typeof(p_timer) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'a timer is a JSON object with name, schedule and sql, not %',
            coalesce(jsonb_typeof(p_timer), 'NULL') USING ERRCODE = '22023';
    END IF;
    FOR v_key IN SELECT k FROM jsonb_object_keys(p_timer) k LOOP
        IF NOT v_key = ANY (c_keys) THEN
            RAISE EXCEPTION 'unknown option %: use %', timers._quoted(v_key),
                array_to_string(c_keys, ', ') USING ERRCODE = '22023';
        END IF;
        IF v_key = 'after' AND jsonb_typeof(p_timer->v_key) IN ('array', 'null') THEN
            IF EXISTS (SELECT 1 FROM jsonb_array_elements(coalesce(nullif(p_timer->v_key, 'null'), '[]')) e
                        WHERE jsonb_typeof(e) <> 'string') THEN
                RAISE EXCEPTION 'option after must be an array of timer names' USING ERRCODE = '22023';
            END IF;
            CONTINUE;
        END IF;
        IF jsonb_typeof(p_timer->v_key) IN ('object', 'array') OR v_key = 'after' THEN
            RAISE EXCEPTION 'option % must be a string, a number or true/false', v_key
                USING ERRCODE = '22023';
        END IF;
    END LOOP;
    name := p_timer->>'name';
    schedule := p_timer->>'schedule';
    sql := p_timer->>'sql';
    timezone := p_timer->>'timezone';
    catch_up := p_timer->>'catch_up';
    test_clock := p_timer->>'test_clock';
    history := coalesce(p_timer->>'history', 'all');
    after := CASE WHEN jsonb_typeof(p_timer->'after') = 'array'
                  THEN ARRAY(SELECT jsonb_array_elements_text(p_timer->'after')) END;
    run_group := p_timer->>'run_group';
    -- All casts in one block (one subtransaction, not one per option); only a bad
    -- value pays for finding which option it is.
    BEGIN
        enabled := coalesce((p_timer->>'enabled')::boolean, true);
        locked := coalesce((p_timer->>'locked')::boolean, false);
        start_at := (p_timer->>'start_at')::timestamptz;
        end_at := (p_timer->>'end_at')::timestamptz;
        max_runs := (p_timer->>'max_runs')::bigint;
        timeout := (p_timer->>'timeout')::interval;
        retries := coalesce((p_timer->>'retries')::integer, 0);
        retry_delay := coalesce((p_timer->>'retry_delay')::interval, interval '30 seconds');
        pause_after := (p_timer->>'pause_after')::integer;
        jitter := (p_timer->>'jitter')::interval;
        priority := coalesce((p_timer->>'priority')::integer, 0);
        catch_up_window := (p_timer->>'catch_up_window')::interval;
        autonomous := coalesce((p_timer->>'autonomous')::boolean, false);
        deadline := (p_timer->>'deadline')::interval;
    EXCEPTION WHEN data_exception THEN
        FOREACH v_key IN ARRAY ARRAY['enabled', 'locked', 'start_at', 'end_at', 'max_runs', 'timeout',
                                     'retries', 'retry_delay', 'pause_after', 'jitter', 'priority',
                                     'catch_up_window', 'autonomous', 'deadline'] LOOP
            v_value := p_timer->>v_key;
            BEGIN
                CASE v_key
                WHEN 'enabled', 'locked', 'autonomous' THEN PERFORM v_value::boolean;
                WHEN 'start_at', 'end_at' THEN PERFORM v_value::timestamptz;
                WHEN 'max_runs' THEN PERFORM v_value::bigint;
                WHEN 'timeout', 'retry_delay', 'jitter', 'catch_up_window', 'deadline' THEN PERFORM v_value::interval;
                WHEN 'retries', 'pause_after', 'priority' THEN PERFORM v_value::integer;
                END CASE;
            EXCEPTION WHEN data_exception THEN
                RAISE EXCEPTION 'bad %: % (%)', v_key, timers._quoted(v_value), SQLERRM
                    USING ERRCODE = '22023';
            END;
        END LOOP;
        RAISE;
    END;
    IF p_timer ? 'enabled' AND p_timer->'enabled' = 'null' OR p_timer ? 'locked' AND p_timer->'locked' = 'null' THEN
        RAISE EXCEPTION 'enabled and locked must be true or false, not NULL' USING ERRCODE = '22004';
    END IF;
    IF p_timer ? 'autonomous' AND p_timer->'autonomous' = 'null' THEN
        RAISE EXCEPTION 'autonomous must be true or false, not NULL' USING ERRCODE = '22004';
    END IF;
END
$$;

-- Save one timer of role p_owner (already proven and checked) that runs in executor
-- p_executor, planned from p_now; writes its audit row. Its name. p_sql_checked: SQL
-- that has passed timers._check_sql for a timer that is not autonomous in this call (the
-- timer before, in save_many), which is not checked again when this timer's SQL is the
-- same text (an autonomous timer's check refuses less: what passed passes). p_managed_by:
-- the file set that declares it (timers.apply; NULL: saved by hand). p_locked_ok: a locked
-- timer is saved too (timers.apply, which keeps it only when nothing changed).
CREATE OR REPLACE FUNCTION timers._save_one(
    p_owner name, p_executor text, p_timer jsonb, p_sql_checked text DEFAULT NULL,
    p_managed_by text DEFAULT NULL, p_locked_ok boolean DEFAULT false)
    RETURNS text
    LANGUAGE plpgsql
    AS $$
DECLARE
    a record;
    v_old timers.timers;
    v_zone text;
    v_spec jsonb;
    v_now timestamptz;
    v_next timestamptz;
    v_row timers.timers;
BEGIN
    a := timers._timer_args(p_timer);
    PERFORM timers._check_name(a.name);
    v_zone := CASE WHEN a.timezone IS NULL THEN NULL ELSE timers._check_zone(a.timezone) END;
    PERFORM timers._check_options(a.catch_up, a.start_at, a.end_at, a.max_runs, a.timeout, a.test_clock,
                                  a.catch_up_window);
    PERFORM timers._check_policies(a.retries, a.retry_delay, a.pause_after, a.jitter, a.priority);
    PERFORM timers._check_deadline(a.deadline);
    PERFORM timers._check_history(a.history);
    -- (made with max_running 1 when it does not exist yet: timers.set_group changes it)
    PERFORM timers._ensure_group(a.run_group, a.autonomous);
    IF a.autonomous AND a.test_clock IS NOT NULL THEN
        RAISE EXCEPTION 'a timer cannot be both autonomous and on test clock %: a test clock''s timers run inside the transaction that advances it',
            timers._quoted(a.test_clock)
            USING ERRCODE = '0A000',
                  HINT = 'Save it with autonomous => false to test it on the clock, or without test_clock to run it autonomously.';
    END IF;
    IF p_sql_checked IS NULL OR a.sql IS DISTINCT FROM p_sql_checked THEN
        PERFORM timers._check_sql(a.sql, a.autonomous);
    END IF;
    v_now := timers._now(a.test_clock);
    v_spec := timers._parse_schedule(a.schedule, timers._zone(v_zone), v_now);
    PERFORM timers._require_calendar(v_spec);
    IF v_spec->>'kind' = 'once' AND (v_spec->>'at')::timestamptz <= v_now THEN
        RAISE EXCEPTION 'schedule ''%'' is in the past (it is % now in %)', a.schedule,
            to_char(v_now AT TIME ZONE timers._zone(v_zone), 'YYYY-MM-DD HH24:MI:SS'), timers._zone(v_zone)
            USING ERRCODE = '22023';
    END IF;

    v_old := timers._lock_for_change(a.name);
    IF v_old.id IS NOT NULL AND NOT p_locked_ok THEN
        PERFORM timers._refuse_locked(v_old, 'changed');
    END IF;
    -- Planned before it is written, from what _plan reads (a saved timer starts
    -- again: not expired, no runs counted), so the row is written once.
    v_row.enabled := a.enabled;
    v_row.expired := false;
    v_row.max_runs := a.max_runs;
    v_row.scheduled_runs := 0;
    v_row.spec := v_spec;
    v_row.zone := timers._zone(v_zone);
    v_row.start_at := a.start_at;
    v_row.end_at := a.end_at;
    PERFORM timers._check_jitter(nullif(a.jitter, interval '0'), v_row, v_now);
    v_next := timers._plan(v_row, v_now);
    INSERT INTO timers.timers AS t (name, schedule, spec, sql, enabled, timezone, catch_up, start_at,
                                    end_at, max_runs, timeout, locked, test_clock, owner, executor, zone,
                                    next_due_at, expired, retries, retry_delay, pause_after, jitter,
                                    priority, catch_up_window, origin_at, autonomous, deadline, history,
                                    managed_by, run_group)
    VALUES (a.name, v_spec->>'schedule', v_spec, a.sql, a.enabled, v_zone, a.catch_up, a.start_at,
            a.end_at, a.max_runs, a.timeout, a.locked, a.test_clock, p_owner, p_executor,
            v_row.zone, v_next, v_next IS NULL AND a.enabled AND v_spec->>'kind' <> 'after', a.retries, a.retry_delay, a.pause_after,
            nullif(a.jitter, interval '0'), a.priority, a.catch_up_window, v_now, a.autonomous,
            a.deadline, a.history, p_managed_by, a.run_group)
    ON CONFLICT ((lower(name))) DO UPDATE
        SET name = EXCLUDED.name, schedule = EXCLUDED.schedule, spec = EXCLUDED.spec,
            sql = EXCLUDED.sql, enabled = EXCLUDED.enabled, timezone = EXCLUDED.timezone,
            catch_up = EXCLUDED.catch_up, start_at = EXCLUDED.start_at, end_at = EXCLUDED.end_at,
            max_runs = EXCLUDED.max_runs, timeout = EXCLUDED.timeout, locked = EXCLUDED.locked,
            test_clock = EXCLUDED.test_clock, owner = EXCLUDED.owner,
            executor = EXCLUDED.executor, zone = EXCLUDED.zone, updated_at = now(),
            expired = EXCLUDED.expired, scheduled_runs = 0, next_due_at = EXCLUDED.next_due_at,
            retries = EXCLUDED.retries, retry_delay = EXCLUDED.retry_delay,
            pause_after = EXCLUDED.pause_after, jitter = EXCLUDED.jitter, priority = EXCLUDED.priority,
            catch_up_window = EXCLUDED.catch_up_window, autonomous = EXCLUDED.autonomous,
            deadline = EXCLUDED.deadline, history = EXCLUDED.history, managed_by = EXCLUDED.managed_by,
            run_group = EXCLUDED.run_group,
            -- the new definition's due times are its own: none of them is settled yet
            deadline_due_at = NULL,
            -- the timer keeps its origin, unless it moves to another clock
            origin_at = CASE WHEN t.test_clock IS NOT DISTINCT FROM EXCLUDED.test_clock
                             THEN t.origin_at ELSE EXCLUDED.origin_at END,
            -- a new definition starts with a clean slate: no retry of the old one, no streak
            retry_due_at = NULL, retry_attempt = NULL, retry_at = NULL, fail_streak = 0,
            paused_at = NULL
    RETURNING t.* INTO v_row;
    -- what it follows (schedule 'after'): refused, the whole save is undone
    PERFORM timers._set_follows(v_row, a.after);
    IF v_old.retry_at IS NOT NULL THEN
        PERFORM timers._record_skips(v_old, ARRAY[v_old.retry_due_at], 1, v_old.retry_due_at,
            v_old.retry_due_at, 'saved again before its retry', '');
    END IF;

    PERFORM timers._audit(p_owner, 'save', v_row.name, jsonb_build_object(
        'created', v_old.id IS NULL, 'schedule', v_row.schedule, 'sql', a.sql,
        'enabled', a.enabled, 'timezone', v_zone, 'catch_up', a.catch_up, 'start_at', a.start_at,
        'end_at', a.end_at, 'max_runs', a.max_runs, 'timeout', a.timeout, 'locked', a.locked,
        'test_clock', a.test_clock, 'retries', a.retries, 'retry_delay', a.retry_delay,
        'pause_after', a.pause_after, 'jitter', nullif(a.jitter, interval '0'), 'priority', a.priority,
        'catch_up_window', a.catch_up_window, 'autonomous', a.autonomous, 'deadline', a.deadline,
        'history', a.history, 'after', a.after)
        || jsonb_strip_nulls(jsonb_build_object('run_group', a.run_group)));
    RETURN v_row.name;
END
$$;

-- The body of timers.save and timers.save_many. p_owner is the caller's role in
-- effect, proven by its ticket, so calling this function directly (or from a timer's
-- SQL, where session_user is the runner) cannot make a timer run as someone else.
-- p_timers: one timer (an object) or many (an array), saved in order, all or none.
-- Their names.
CREATE OR REPLACE FUNCTION timers._save(p_owner name, p_timers jsonb) RETURNS text[]
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_executor text;
    v_names text[] := '{}';
    v_timer jsonb;
    v_sql text;
    i integer := 0;
    v_state text;
    v_message text;
    v_hint text;
BEGIN
    PERFORM timers._take_ticket(p_owner, 'save a timer that runs');
    IF NOT pg_has_role(p_owner, timers._role('admin'), 'MEMBER') THEN
        RAISE EXCEPTION 'permission denied to save a timer: it needs the role %, and role "%" is not a member', timers._role('admin'), p_owner
            USING ERRCODE = '42501';
    END IF;
    v_executor := timers._ensure_executor(p_owner);
    IF jsonb_typeof(p_timers) = 'array' THEN
        IF jsonb_array_length(p_timers) > 100000 THEN
            RAISE EXCEPTION 'save_many takes at most 100000 timers a call, not %', jsonb_array_length(p_timers)
                USING ERRCODE = '54000';
        END IF;
        -- One block around the loop, not one per timer: the first error ends the call
        -- anyway, and a subtransaction per timer would cost more than the save.
        BEGIN
            FOR v_timer IN SELECT e FROM jsonb_array_elements(p_timers) e LOOP
                i := i + 1;
                v_names := v_names || timers._save_one(p_owner, v_executor, v_timer, v_sql);
                -- saved: its SQL passed, and timers of a bulk save often share one (the
                -- check of an autonomous timer refuses less: its SQL is not taken as passed)
                v_sql := CASE WHEN (v_timer->>'autonomous')::boolean THEN NULL ELSE v_timer->>'sql' END;
            END LOOP;
        EXCEPTION WHEN OTHERS THEN
            -- which one: the message as timers.save gives it, after "timer <i>: "
            GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_message = MESSAGE_TEXT,
                                    v_hint = PG_EXCEPTION_HINT;
            IF v_hint = '' THEN  -- (none: GET DIAGNOSTICS gives '')
                RAISE EXCEPTION USING ERRCODE = v_state, MESSAGE = format('timer %s: %s', i, v_message);
            END IF;
            RAISE EXCEPTION USING ERRCODE = v_state, MESSAGE = format('timer %s: %s', i, v_message),
                                  HINT = v_hint;
        END;
    ELSE
        v_names := ARRAY[timers._save_one(p_owner, v_executor, p_timers)];
    END IF;
    PERFORM timers._notify('save', CASE WHEN cardinality(v_names) = 1 THEN v_names[1] END);
    RETURN v_names;
END
$$;

CREATE OR REPLACE FUNCTION timers.save(
    name text, schedule text, sql text,
    enabled boolean DEFAULT true, timezone text DEFAULT NULL, catch_up text DEFAULT NULL,
    start_at timestamptz DEFAULT NULL, end_at timestamptz DEFAULT NULL, max_runs bigint DEFAULT NULL,
    timeout interval DEFAULT NULL, locked boolean DEFAULT false, test_clock text DEFAULT NULL,
    retries integer DEFAULT 0, retry_delay interval DEFAULT '30 seconds', pause_after integer DEFAULT NULL,
    jitter interval DEFAULT NULL, priority integer DEFAULT 0, catch_up_window interval DEFAULT NULL,
    autonomous boolean DEFAULT false, deadline interval DEFAULT NULL, history text DEFAULT 'all',
    after text[] DEFAULT NULL, run_group text DEFAULT NULL)
    RETURNS timers.status
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_state   text;
    v_message text;
    v_detail  text;
    v_hint    text;
BEGIN
    PERFORM timers._require_admin('save a timer');
    IF save.enabled IS NULL OR save.locked IS NULL THEN
        RAISE EXCEPTION 'enabled and locked must be true or false, not NULL' USING ERRCODE = '22004';
    END IF;
    IF save.autonomous IS NULL THEN
        RAISE EXCEPTION 'autonomous must be true or false, not NULL' USING ERRCODE = '22004';
    END IF;
    -- NULL is not the default for these: say so, as the JSON body's null would not
    PERFORM timers._check_policies(save.retries, save.retry_delay, save.pause_after, save.jitter,
                                   save.priority);
    RETURN timers._status((timers._save(current_user, jsonb_build_object(
        'name', save.name, 'schedule', save.schedule, 'sql', save.sql, 'enabled', save.enabled,
        'timezone', save.timezone, 'catch_up', save.catch_up, 'start_at', save.start_at,
        'end_at', save.end_at, 'max_runs', save.max_runs, 'timeout', save.timeout,
        'locked', save.locked, 'test_clock', save.test_clock, 'retries', save.retries,
        'retry_delay', save.retry_delay, 'pause_after', save.pause_after, 'jitter', save.jitter,
        'priority', save.priority, 'run_group', save.run_group,
        'catch_up_window', save.catch_up_window,
        'autonomous', save.autonomous, 'deadline', save.deadline,
        'history', coalesce(save.history, 'all'), 'after', to_jsonb(save.after))))[1]);
EXCEPTION WHEN OTHERS THEN
    -- the refusal as this call's own: one line, without the CONTEXT lines of the
    -- internal routines that raised it (same SQLSTATE, message, detail and hint)
    GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_message = MESSAGE_TEXT,
                            v_detail = PG_EXCEPTION_DETAIL, v_hint = PG_EXCEPTION_HINT;
    IF v_detail = '' AND v_hint = '' THEN
        RAISE EXCEPTION USING ERRCODE = v_state, MESSAGE = v_message;
    ELSIF v_detail = '' THEN
        RAISE EXCEPTION USING ERRCODE = v_state, MESSAGE = v_message, HINT = v_hint;
    ELSIF v_hint = '' THEN
        RAISE EXCEPTION USING ERRCODE = v_state, MESSAGE = v_message, DETAIL = v_detail;
    END IF;
    RAISE EXCEPTION USING ERRCODE = v_state, MESSAGE = v_message, DETAIL = v_detail, HINT = v_hint;
END
$$;

-- timers.save with the timer as one JSON object, {name, schedule, sql, ...options}: the
-- form save_many takes each timer in, and the one the CLI, the HTTP API and the console
-- save through (their option list: pgtimers/options.py). A key left out or a JSON null
-- takes the option's default (enabled, locked and autonomous: left out only).
CREATE OR REPLACE FUNCTION timers.save_json(timer jsonb) RETURNS timers.status
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_state   text;
    v_message text;
    v_detail  text;
    v_hint    text;
BEGIN
    PERFORM timers._require_admin('save a timer');
    -- one timer: timers._save would take an array as many
    IF jsonb_typeof(save_json.timer) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'a timer is a JSON object with name, schedule and sql, not %',
            coalesce(jsonb_typeof(save_json.timer), 'NULL') USING ERRCODE = '22023';
    END IF;
    RETURN timers._status((timers._save(current_user, save_json.timer))[1]);
EXCEPTION WHEN OTHERS THEN
    -- the refusal as this call's own: one line, without the CONTEXT lines of the
    -- internal routines that raised it (same SQLSTATE, message, detail and hint)
    GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_message = MESSAGE_TEXT,
                            v_detail = PG_EXCEPTION_DETAIL, v_hint = PG_EXCEPTION_HINT;
    IF v_detail = '' AND v_hint = '' THEN
        RAISE EXCEPTION USING ERRCODE = v_state, MESSAGE = v_message;
    ELSIF v_detail = '' THEN
        RAISE EXCEPTION USING ERRCODE = v_state, MESSAGE = v_message, HINT = v_hint;
    ELSIF v_hint = '' THEN
        RAISE EXCEPTION USING ERRCODE = v_state, MESSAGE = v_message, DETAIL = v_detail;
    END IF;
    RAISE EXCEPTION USING ERRCODE = v_state, MESSAGE = v_message, DETAIL = v_detail, HINT = v_hint;
END
$$;

COMMENT ON FUNCTION timers.save_json(jsonb) IS
    'Create or replace a timer given as one JSON object: {name, schedule, sql, ...options of timers.save}; a key left out takes its default. Returns its timers.status row. Needs pgtimers_admin.';

-- Many timers in one call, through the same checks as timers.save: a JSON array of
-- objects with name, schedule, sql and any of save's options. All are saved or none
-- (the first bad one's error says which, "timer 3: ..."). How many were saved.
CREATE OR REPLACE FUNCTION timers.save_many(timers jsonb) RETURNS integer
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_state   text;
    v_message text;
    v_detail  text;
    v_hint    text;
BEGIN
    PERFORM timers._require_admin('save timers');
    IF jsonb_typeof(save_many.timers) IS DISTINCT FROM 'array' THEN
        RAISE EXCEPTION 'save_many takes a JSON array of timers (objects with name, schedule, sql), not %',
            coalesce(jsonb_typeof(save_many.timers), 'NULL') USING ERRCODE = '22023';
    END IF;
    RETURN cardinality(timers._save(current_user, save_many.timers));
EXCEPTION WHEN OTHERS THEN
    -- the refusal as this call's own: one line, without the CONTEXT lines of the
    -- internal routines that raised it (same SQLSTATE, message, detail and hint)
    GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_message = MESSAGE_TEXT,
                            v_detail = PG_EXCEPTION_DETAIL, v_hint = PG_EXCEPTION_HINT;
    IF v_detail = '' AND v_hint = '' THEN
        RAISE EXCEPTION USING ERRCODE = v_state, MESSAGE = v_message;
    ELSIF v_detail = '' THEN
        RAISE EXCEPTION USING ERRCODE = v_state, MESSAGE = v_message, HINT = v_hint;
    ELSIF v_hint = '' THEN
        RAISE EXCEPTION USING ERRCODE = v_state, MESSAGE = v_message, DETAIL = v_detail;
    END IF;
    RAISE EXCEPTION USING ERRCODE = v_state, MESSAGE = v_message, DETAIL = v_detail, HINT = v_hint;
END
$$;

COMMENT ON FUNCTION timers.save_many(jsonb) IS
    'Save many timers in one call, all or none: a JSON array of {name, schedule, sql, ...options of timers.save}. Returns how many. Needs pgtimers_admin.';

COMMENT ON FUNCTION timers.save(text, text, text, boolean, text, text, timestamptz, timestamptz, bigint, interval, boolean, text, integer, interval, integer, interval, integer, interval, boolean, interval, text, text[], text) IS
    'Create or replace a timer; it runs as the role in effect now. Options: retries, retry_delay, pause_after, jitter, priority, catch_up_window, autonomous, deadline, history, after (with schedule ''after'': the timers it waits for), run_group (docs/running.md). Returns its timers.status row. Needs pgtimers_admin.';

-- The body of timers.enable; on a running timer the change waits for its run's end.
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
           next_due_at = timers._plan(t, timers._now(t.test_clock)),
           -- turned on: a pause ends, and failures in a row count from 0 again
           fail_streak = CASE WHEN p_enabled THEN 0 ELSE fail_streak END,
           paused_at = CASE WHEN p_enabled THEN NULL ELSE paused_at END
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

COMMENT ON FUNCTION timers.enable(text, boolean) IS
    'Turn a timer on (true) or off (false); a timer that is off still runs with CALL timers.run. Needs pgtimers_admin.';

-- The body of timers.delete; on a running timer the delete waits for its run's end.
CREATE OR REPLACE FUNCTION timers._delete(p_actor name, p_name text, p_cascade boolean DEFAULT false)
    RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM timers._take_ticket(p_actor, 'delete a timer');
    PERFORM timers._delete_timer(p_actor, p_name, coalesce(p_cascade, false));
END
$$;

-- Delete timer p_name for p_actor (proven by the caller): at once, or at the end of its
-- run; audited, and the runners told. A timer others follow is refused unless
-- p_cascade, which takes it out of their lists and deletes those left following nothing
-- (timers._unfollow).
CREATE OR REPLACE FUNCTION timers._delete_timer(p_actor name, p_name text, p_cascade boolean DEFAULT false)
    RETURNS void
    LANGUAGE plpgsql
    AS $$
DECLARE
    r record;
    t timers.timers;
    v_orphan text;
BEGIN
    r := timers._lock_or_running(p_name);
    t := r.t;
    IF t.id IS NULL THEN
        PERFORM timers._no_such_timer(p_name);
    END IF;
    PERFORM timers._refuse_locked(t, 'deleted');
    FOREACH v_orphan IN ARRAY timers._unfollow(t, p_cascade) LOOP
        PERFORM timers._delete_timer(p_actor, v_orphan, true);
    END LOOP;
    IF r.running THEN
        PERFORM timers._ask_pending(p_actor, t, 'delete');
        RETURN;
    END IF;
    DELETE FROM timers.timers WHERE id = t.id;
    DELETE FROM timers.follow_dues d WHERE d.follower_id = t.id;
    PERFORM timers._end_backfills(t.id, 'the timer was deleted');
    PERFORM timers._audit(p_actor, 'delete', t.name,
                          jsonb_build_object('schedule', t.schedule, 'sql', t.sql, 'owner', t.owner));
    PERFORM timers._notify('delete', t.name);
END
$$;

CREATE OR REPLACE FUNCTION timers.delete(name text, cascade boolean DEFAULT false) RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM timers._require_admin('delete a timer');
    PERFORM timers._delete(current_user, delete.name, delete.cascade);
    RETURN '{"deleted": true}'::jsonb;
END
$$;

COMMENT ON FUNCTION timers.delete(text, boolean) IS
    'Delete a timer; returns {"deleted": true}. Unknown name: SQLSTATE P0002. A timer others follow: SQLSTATE 2BP01 naming them, unless cascade => true (it leaves their lists; one left following nothing is deleted too). Needs pgtimers_admin.';

-- The body of timers.set_timezone: the timers without a zone of their own are planned
-- again.
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
    UPDATE timers.timers SET zone = v_zone WHERE timezone IS NULL AND expired;
    FOR t IN SELECT * FROM timers.timers WHERE timezone IS NULL AND NOT expired FOR UPDATE LOOP
        t.spec := timers._parse_schedule(t.schedule, v_zone, timers._now(t.test_clock));
        t.zone := v_zone;
        UPDATE timers.timers
           SET spec = t.spec, zone = v_zone, next_due_at = timers._plan(t, timers._now(t.test_clock))
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

COMMENT ON FUNCTION timers.set_timezone(text) IS
    'Set the database''s default zone for timers without their own, and plan them again. Needs pgtimers_admin.';

-- Unlock a locked timer; it is then changeable until saved locked again. Only a
-- superuser or the role that installed pgtimers (the owner of schema timers, which a
-- managed service's database owner is) may: the login (session_user) must be a
-- superuser or able to act as that owner, so a timer's SQL (whose login is the runner)
-- cannot. Nobody else is granted EXECUTE. Audited, with which of the two it was.
CREATE OR REPLACE FUNCTION timers.unlock(name text) RETURNS timers.status
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    t timers.timers;
    v_owner name := (SELECT n.nspowner::regrole::text FROM pg_namespace n WHERE n.nspname = 'timers');
    v_as text;
BEGIN
    IF (SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = session_user) THEN
        v_as := 'superuser';
    ELSIF pg_has_role(session_user, v_owner,
                      CASE WHEN current_setting('server_version_num')::int >= 160000
                           THEN 'SET' ELSE 'MEMBER' END) THEN
        v_as := 'owner of schema timers';
    ELSE
        RAISE EXCEPTION 'permission denied to unlock timer ''%'': only a superuser or the role that installed pgtimers (%) may unlock a timer', unlock.name, quote_ident(v_owner)
            USING ERRCODE = '42501';
    END IF;
    t := timers._lock_for_change(unlock.name);
    IF t.id IS NULL THEN
        PERFORM timers._no_such_timer(unlock.name);
    END IF;
    UPDATE timers.timers SET locked = false, updated_at = now() WHERE id = t.id;
    PERFORM timers._audit(session_user, 'unlock', t.name, jsonb_build_object('as', v_as));
    RETURN timers._status(t.name);
END
$$;

COMMENT ON FUNCTION timers.unlock(text) IS
    'Unlock a locked timer so it can be changed or deleted. A superuser or the role that installed pgtimers (the owner of schema timers) only; audited.';

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
        DELETE FROM timers.follow_dues d WHERE d.follower_id = p_id;
        DELETE FROM timers.follows w WHERE w.upstream_id = p_id;
        PERFORM timers._end_backfills(p_id, 'the timer was deleted');
    ELSE
        t.enabled := v_action = 'enable';
        UPDATE timers.timers
           SET enabled = t.enabled, updated_at = now(),
               next_due_at = timers._plan(t, timers._now(t.test_clock)),
               fail_streak = CASE WHEN t.enabled THEN 0 ELSE fail_streak END,
               paused_at = CASE WHEN t.enabled THEN NULL ELSE paused_at END
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
    -- the name (or key) index whatever the statistics say: a table analyzed while empty
    -- would make each look-up a scan, and a bulk save quadratic
    SET enable_seqscan = off SET jit = off
    AS $$
BEGIN
    SELECT * INTO t FROM timers.timers x
     WHERE lower(x.name) = lower(p_name) COLLATE "default" FOR UPDATE SKIP LOCKED;
    -- an autonomous run under way holds no lock on the row: it is running all the same
    IF FOUND AND NOT timers._autonomous_open(t) THEN
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

-- Record a change of a running timer for its run to apply; audited like the change.
CREATE OR REPLACE FUNCTION timers._ask_pending(p_actor name, t timers.timers, p_action text) RETURNS void
    LANGUAGE plpgsql
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

-- The backend running timer p_id now: the holder of its row lock, when that backend
-- is a pgtimers runner's (a member of pgtimers_runner) naming the timer in its
-- application_name; for an autonomous run under way, the owner's session that runs its
-- SQL (timers.autonomous_runs: that backend, of that login, naming the timer). NULL when
-- it is not running.
CREATE OR REPLACE FUNCTION timers._run_backend(p_id bigint) RETURNS integer
    LANGUAGE sql STABLE
    AS $$
        SELECT coalesce(
            (SELECT l.pid
               FROM timers.timers t
               JOIN pg_catalog.pg_locks l ON l.locktype = 'transactionid' AND l.transactionid = t.xmax
                                         AND l.mode = 'ExclusiveLock' AND l.granted
               CROSS JOIN LATERAL pg_catalog.pg_stat_get_activity(l.pid) a
              WHERE t.id = p_id AND t.xmax <> '0'::xid
                AND a.application_name = left('pgtimers: ' || t.name, 63)
                AND pg_has_role(a.usesysid, timers._role('runner'), 'MEMBER')
              LIMIT 1),
            (SELECT o.owner_pid
               FROM timers.autonomous_runs o
               JOIN timers.timers t ON t.id = o.timer_id
               CROSS JOIN LATERAL pg_catalog.pg_stat_get_activity(o.owner_pid) a
              WHERE o.timer_id = p_id AND a.usesysid = o.owner_login
                AND a.application_name = left('pgtimers: ' || t.name, 63)))
    $$;

-- The body of timers.cancel: cancel the backend running the timer, if one is.
CREATE OR REPLACE FUNCTION timers._cancel(p_actor name, p_name text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    -- the name (or key) index whatever the statistics say: a table analyzed while empty
    -- would make each look-up a scan, and a bulk save quadratic
    SET enable_seqscan = off SET jit = off
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
        RAISE EXCEPTION 'cannot cancel the run of timer %: the role that installed pgtimers may not signal the runner''s session', timers._quoted(t.name)
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
-- Rights
-- ---------------------------------------------------------------------------
REVOKE ALL ON FUNCTION
    timers._timer_args(jsonb),
    timers._save_one(name,text,jsonb,text,text,boolean),
    timers.save_many(jsonb),
    timers._plan(timers.timers,timestamp with time zone),
    timers._no_such_timer(text),
    timers._lock_for_change(text),
    timers._refuse_locked(timers.timers,text),
    timers._check_options(text,timestamp with time zone,timestamp with time zone,bigint,interval,text,interval),
    timers._check_policies(integer,interval,integer,interval,integer),
    timers._check_history(text),
    timers._check_jitter(interval,timers.timers,timestamp with time zone),
    timers._require_calendar(jsonb),
    timers._save(name,jsonb),
    timers.save(text,text,text,boolean,text,text,timestamp with time zone,timestamp with time zone,bigint,interval,boolean,text,integer,interval,integer,interval,integer,interval,boolean,interval,text,text[],text),
    timers.save_json(jsonb),
    timers._set_enabled(name,text,boolean),
    timers.enable(text,boolean),
    timers._delete(name,text,boolean),
    timers._delete_timer(name,text,boolean),
    timers.delete(text,boolean),
    timers._set_timezone(name,text),
    timers.set_timezone(text),
    timers.unlock(text),
    timers._apply_pending(bigint),
    timers._lock_or_running(text),
    timers._ask_pending(name,timers.timers,text),
    timers._run_backend(bigint),
    timers._cancel(name,text),
    timers.cancel(text)
    FROM PUBLIC, pgtimers_reader, pgtimers_admin, pgtimers_runner;
GRANT EXECUTE ON FUNCTION
    timers._plan(timers.timers,timestamp with time zone),
    timers._no_such_timer(text),
    timers._lock_for_change(text),
    timers._refuse_locked(timers.timers,text),
    timers._check_options(text,timestamp with time zone,timestamp with time zone,bigint,interval,text,interval),
    timers._check_policies(integer,interval,integer,interval,integer),
    timers._check_history(text),
    timers._check_jitter(interval,timers.timers,timestamp with time zone),
    timers._require_calendar(jsonb),
    timers.save(text,text,text,boolean,text,text,timestamp with time zone,timestamp with time zone,bigint,interval,boolean,text,integer,interval,integer,interval,integer,interval,boolean,interval,text,text[],text),
    timers.save_json(jsonb),
    timers.save_many(jsonb),
    timers.enable(text,boolean),
    timers.delete(text,boolean),
    timers.set_timezone(text)
    TO PUBLIC;
GRANT EXECUTE ON FUNCTION
    timers._save(name,jsonb),
    timers._set_enabled(name,text,boolean),
    timers._delete(name,text,boolean),
    timers._set_timezone(name,text),
    timers._cancel(name,text),
    timers.cancel(text)
    TO pgtimers_admin;
GRANT EXECUTE ON FUNCTION
    timers._apply_pending(bigint)
    TO pgtimers_runner;
