-- pgtimers code: timers as code. timers.apply(spec) makes the database's timers what a
-- declared set says (a plan: create, update, delete, unchanged), and timers.export writes
-- the current timers as such a set (docs/timers-as-code.md).
--
-- Repeatable: applied whole on every install and upgrade, after the versioned
-- migrations (docs/design.md). Each object here is defined in this file only.

-- A timer's definition as the keys of a declared set: name, schedule and sql, and every
-- option of timers.save with its value (a default as its default), as JSON.
CREATE OR REPLACE FUNCTION timers._timer_options(t timers.timers) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    RETURN jsonb_build_object(
        'name', t.name, 'schedule', t.schedule, 'sql', t.sql, 'enabled', t.enabled,
        'timezone', t.timezone, 'catch_up', coalesce(t.catch_up, 'skip'),
        'start_at', timers._iso(t.start_at), 'end_at', timers._iso(t.end_at),
        'max_runs', t.max_runs, 'timeout', t.timeout::text, 'locked', t.locked,
        'test_clock', t.test_clock, 'retries', t.retries, 'retry_delay', t.retry_delay::text,
        'pause_after', t.pause_after, 'jitter', t.jitter::text, 'priority', t.priority::integer,
        'catch_up_window', t.catch_up_window::text, 'autonomous', t.autonomous,
        'deadline', t.deadline::text, 'history', t.history, 'after', timers._follow_names(t.id),
        'run_group', t.run_group);
END
$$;

-- A timer's definition with its defaults left out: what timers.export writes of it.
CREATE OR REPLACE FUNCTION timers._timer_definition(t timers.timers) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    c_defaults constant jsonb := jsonb_build_object(
        'enabled', true, 'catch_up', 'skip', 'locked', false, 'retries', 0,
        'retry_delay', '00:00:30', 'priority', 0, 'autonomous', false, 'history', 'all');
BEGIN
    RETURN (SELECT jsonb_object_agg(o.key, o.value)
              FROM jsonb_each(timers._timer_options(t)) o
             WHERE o.value <> 'null' AND o.value IS DISTINCT FROM c_defaults->o.key);
END
$$;

-- What changed from timer row o to row n: {option: {from, to}} for each option of the
-- definition that differs, and for the role it runs as (owner). {} when nothing did. (The
-- set that declares it, managed_by, is no change by itself: it follows a change.)
CREATE OR REPLACE FUNCTION timers._timer_changes(o timers.timers, n timers.timers) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    v_old jsonb := timers._timer_options(o) || jsonb_build_object('owner', o.owner);
    v_new jsonb := timers._timer_options(n) || jsonb_build_object('owner', n.owner);
BEGIN
    RETURN coalesce((SELECT jsonb_object_agg(k.key, jsonb_build_object('from', v_old->k.key, 'to', k.value))
                       FROM jsonb_each(v_new) k
                      WHERE k.value IS DISTINCT FROM v_old->k.key), '{}');
END
$$;

-- Whether timer p_timer of a declared set (JSON, as timers.save takes it) is what row o
-- already is, for role p_owner: the same definition, read as timers.save reads it
-- (defaults, zone, schedule in its own words), and the same owner. Lets an apply leave an
-- unchanged timer alone without saving it and rolling the save back.
CREATE OR REPLACE FUNCTION timers._timer_unchanged(o timers.timers, p_timer jsonb, p_owner name)
    RETURNS boolean
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    a record := timers._timer_args(p_timer);
    n timers.timers := o;
    v_zone text;
BEGIN
    IF o.owner IS DISTINCT FROM p_owner OR a.name IS DISTINCT FROM o.name
       OR a.test_clock IS DISTINCT FROM o.test_clock THEN
        RETURN false;
    END IF;
    v_zone := CASE WHEN a.timezone IS NULL THEN NULL ELSE timers._check_zone(a.timezone) END;
    n.schedule := timers._parse_schedule(a.schedule, timers._zone(v_zone), timers._now(a.test_clock))->>'schedule';
    n.sql := a.sql;
    n.enabled := a.enabled;
    n.timezone := v_zone;
    n.catch_up := a.catch_up;
    n.start_at := a.start_at;
    n.end_at := a.end_at;
    n.max_runs := a.max_runs;
    n.timeout := a.timeout;
    n.locked := a.locked;
    n.retries := a.retries;
    n.retry_delay := a.retry_delay;
    n.pause_after := a.pause_after;
    n.jitter := nullif(a.jitter, interval '0');
    n.priority := a.priority;
    n.run_group := a.run_group;
    n.catch_up_window := a.catch_up_window;
    n.autonomous := a.autonomous;
    n.deadline := a.deadline;
    n.history := a.history;
    RETURN timers._timer_options(n) - 'after' = timers._timer_options(o) - 'after'
       AND lower(coalesce(a.after, '{}')::text) = lower(coalesce(timers._follow_names(o.id), '{}')::text);
END
$$;

-- The shape of a declared set: an object with a "timer" array (objects), an optional
-- "calendar" array and an optional "managed_by" label; 22023 naming what is wrong.
-- Returns the label (default 'apply').
CREATE OR REPLACE FUNCTION timers._apply_label(p_spec jsonb) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    v_key text;
    v_label text;
    v_dup text;
BEGIN
    IF jsonb_typeof(p_spec) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'a spec is a JSON object {"timer": [...], "calendar": [...], "managed_by": "..."}, not %',
            coalesce(jsonb_typeof(p_spec), 'NULL') USING ERRCODE = '22023';
    END IF;
    FOR v_key IN SELECT k FROM jsonb_object_keys(p_spec) k LOOP
        IF v_key NOT IN ('timer', 'calendar', 'managed_by') THEN
            RAISE EXCEPTION 'unknown key % of a spec: use timer, calendar and managed_by', timers._quoted(v_key)
                USING ERRCODE = '22023';
        END IF;
    END LOOP;
    IF p_spec ? 'timer' AND jsonb_typeof(p_spec->'timer') <> 'array' THEN
        RAISE EXCEPTION 'the spec''s "timer" must be an array of timers' USING ERRCODE = '22023';
    END IF;
    IF p_spec ? 'calendar' AND jsonb_typeof(p_spec->'calendar') <> 'array' THEN
        RAISE EXCEPTION 'the spec''s "calendar" must be an array of calendars' USING ERRCODE = '22023';
    END IF;
    v_label := coalesce(p_spec->>'managed_by', 'apply');
    IF (p_spec ? 'managed_by' AND jsonb_typeof(p_spec->'managed_by') <> 'string')
       OR v_label !~ '^[A-Za-z0-9_.:/@ -]{1,200}$' THEN
        RAISE EXCEPTION 'bad managed_by %: use 1 to 200 letters, digits and _ . : / @ - or space',
            timers._quoted(p_spec->>'managed_by') USING ERRCODE = '22023';
    END IF;
    SELECT lower(e->>'name') INTO v_dup
      FROM jsonb_array_elements(coalesce(p_spec->'timer', '[]')) e
     WHERE jsonb_typeof(e) = 'object' AND e ? 'name'
     GROUP BY lower(e->>'name') HAVING count(*) > 1 LIMIT 1;
    IF v_dup IS NOT NULL THEN
        RAISE EXCEPTION 'timer "%": named twice in the spec', v_dup USING ERRCODE = '22023';
    END IF;
    RETURN v_label;
END
$$;

-- A calendar's definition as the keys of a declared set: name, week (its base week),
-- valid_from, valid_until, weeks (dated eras: from_day, week), holidays and trading_days
-- (day, and note when it has one), each list by day. NULL: no such calendar.
CREATE OR REPLACE FUNCTION timers._calendar_definition(p_name text) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    c timers.calendars;
BEGIN
    SELECT * INTO c FROM timers.calendars x WHERE lower(x.name) = lower(p_name) COLLATE "default";
    IF c.name IS NULL THEN
        RETURN NULL;
    END IF;
    RETURN jsonb_strip_nulls(jsonb_build_object(
        'name', c.name,
        'week', (SELECT timers._week_text(w.days) FROM timers.calendar_weeks w
                  WHERE w.calendar = c.name AND w.from_day = '-infinity'),
        'valid_from', c.valid_from::text, 'valid_until', c.valid_until::text,
        'weeks', (SELECT jsonb_agg(jsonb_build_object('from_day', w.from_day::text,
                                                      'week', timers._week_text(w.days)) ORDER BY w.from_day)
                    FROM timers.calendar_weeks w WHERE w.calendar = c.name AND w.from_day <> '-infinity'),
        'holidays', (SELECT jsonb_agg(jsonb_strip_nulls(jsonb_build_object('day', d.day::text, 'note', nullif(d.note, '')))
                                      ORDER BY d.day)
                       FROM timers.calendar_days d WHERE d.calendar = c.name AND NOT d.trading),
        'trading_days', (SELECT jsonb_agg(jsonb_strip_nulls(jsonb_build_object('day', d.day::text, 'note', nullif(d.note, '')))
                                          ORDER BY d.day)
                           FROM timers.calendar_days d WHERE d.calendar = c.name AND d.trading)));
END
$$;

-- Make calendar p_cal of a declared set (p_actor proven by the caller) what it says: its
-- row, base week, eras and days written whole, its timers planned again, audited as
-- 'apply_calendar'. Unchanged (its definition is the same): not touched. 22023 naming a
-- bad key.
CREATE OR REPLACE FUNCTION timers._apply_calendar(
    p_actor name, p_cal jsonb, OUT action text, OUT name text, OUT changes jsonb)
    LANGUAGE plpgsql
    AS $$
#variable_conflict use_column
DECLARE
    v_key text;
    v_old jsonb;
    v_new jsonb;
    v_name text;
    e jsonb;
BEGIN
    IF jsonb_typeof(p_cal) IS DISTINCT FROM 'object' OR NOT p_cal ? 'name' THEN
        RAISE EXCEPTION 'a calendar is a JSON object with a name' USING ERRCODE = '22023';
    END IF;
    FOR v_key IN SELECT k FROM jsonb_object_keys(p_cal) k LOOP
        IF v_key NOT IN ('name', 'week', 'valid_from', 'valid_until', 'weeks', 'holidays', 'trading_days') THEN
            RAISE EXCEPTION 'unknown key %: use name, week, valid_from, valid_until, weeks, holidays, trading_days',
                timers._quoted(v_key) USING ERRCODE = '22023';
        END IF;
    END LOOP;
    v_name := timers._check_calendar_name(p_cal->>'name');
    IF coalesce(p_cal->'valid_until' <> 'null' AND p_cal->'valid_from' <> 'null'
                AND (p_cal->>'valid_until')::date < (p_cal->>'valid_from')::date, false) THEN
        RAISE EXCEPTION 'valid_until % is before valid_from %', p_cal->>'valid_until', p_cal->>'valid_from'
            USING ERRCODE = '22023';
    END IF;
    -- the definition it asks for, in the form _calendar_definition gives
    v_new := jsonb_strip_nulls(jsonb_build_object(
        'name', v_name,
        'week', timers._week_text(timers._week_mask(coalesce(p_cal->>'week', 'mon-fri'))),
        'valid_from', (p_cal->>'valid_from')::date::text, 'valid_until', (p_cal->>'valid_until')::date::text,
        'weeks', (SELECT jsonb_agg(jsonb_build_object('from_day', (w->>'from_day')::date::text,
                                                      'week', timers._week_text(timers._week_mask(w->>'week')))
                                   ORDER BY (w->>'from_day')::date)
                    FROM jsonb_array_elements(coalesce(p_cal->'weeks', '[]')) w),
        'holidays', (SELECT jsonb_agg(jsonb_strip_nulls(jsonb_build_object('day', (d->>'day')::date::text,
                                                                           'note', nullif(d->>'note', '')))
                                      ORDER BY (d->>'day')::date)
                       FROM jsonb_array_elements(coalesce(p_cal->'holidays', '[]')) d),
        'trading_days', (SELECT jsonb_agg(jsonb_strip_nulls(jsonb_build_object('day', (d->>'day')::date::text,
                                                                               'note', nullif(d->>'note', '')))
                                          ORDER BY (d->>'day')::date)
                           FROM jsonb_array_elements(coalesce(p_cal->'trading_days', '[]')) d)));
    v_old := timers._calendar_definition(v_name);
    name := 'calendar:' || coalesce(v_old->>'name', v_name);
    IF v_old = v_new THEN
        action := 'unchanged';
        changes := '{}';
        RETURN;
    END IF;
    action := CASE WHEN v_old IS NULL THEN 'create' ELSE 'update' END;
    changes := CASE WHEN v_old IS NULL THEN v_new ELSE
        (SELECT jsonb_object_agg(k.key, jsonb_build_object('from', v_old->k.key, 'to', v_new->k.key))
           FROM (SELECT jsonb_object_keys(v_old) AS key UNION SELECT jsonb_object_keys(v_new)) k
          WHERE v_old->k.key IS DISTINCT FROM v_new->k.key) END;
    v_name := coalesce(v_old->>'name', v_name);
    INSERT INTO timers.calendars AS c (name, valid_from, valid_until)
    VALUES (v_name, (v_new->>'valid_from')::date, (v_new->>'valid_until')::date)
    ON CONFLICT (name) DO UPDATE SET valid_from = EXCLUDED.valid_from, valid_until = EXCLUDED.valid_until;
    DELETE FROM timers.calendar_weeks w WHERE w.calendar = v_name;
    DELETE FROM timers.calendar_days d WHERE d.calendar = v_name;
    INSERT INTO timers.calendar_weeks (calendar, from_day, days)
    VALUES (v_name, '-infinity', timers._week_mask(v_new->>'week'));
    FOR e IN SELECT x FROM jsonb_array_elements(coalesce(v_new->'weeks', '[]')) x LOOP
        INSERT INTO timers.calendar_weeks (calendar, from_day, days)
        VALUES (v_name, (e->>'from_day')::date, timers._week_mask(e->>'week'));
    END LOOP;
    INSERT INTO timers.calendar_days (calendar, day, trading, note)
    SELECT v_name, (d->>'day')::date, false, coalesce(d->>'note', '')
      FROM jsonb_array_elements(coalesce(v_new->'holidays', '[]')) d;
    INSERT INTO timers.calendar_days (calendar, day, trading, note)
    SELECT v_name, (d->>'day')::date, true, coalesce(d->>'note', '')
      FROM jsonb_array_elements(coalesce(v_new->'trading_days', '[]')) d;
    PERFORM timers._calendar_changed(p_actor, 'apply_calendar', v_name, changes);
END
$$;

-- Raise again an error of the item p_what ('timer "x"', 'calendar "x"') of a declared set:
-- its SQLSTATE, its message after the item's name, its hint (if any).
CREATE OR REPLACE FUNCTION timers._apply_error(p_what text, p_state text, p_message text, p_hint text)
    RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF coalesce(p_hint, '') = '' THEN
        RAISE EXCEPTION USING ERRCODE = p_state, MESSAGE = format('%s: %s', p_what, p_message);
    END IF;
    RAISE EXCEPTION USING ERRCODE = p_state, MESSAGE = format('%s: %s', p_what, p_message), HINT = p_hint;
END
$$;

-- The body of timers.apply, for p_actor (proven by the caller): each calendar of the spec
-- is written, then each timer saved as timers.save would, in a subtransaction that is
-- rolled back when nothing of its definition changed (no audit row, no change to
-- updated_ms); a dry run makes it all and then rolls it back, keeping the plan; with
-- p_prune, the timers of the same set that the spec no longer names are deleted. A
-- timer's error names it ('timer "name": ...'). A locked timer stops the apply unless
-- nothing of it changes.
CREATE OR REPLACE FUNCTION timers._apply(p_actor name, p_spec jsonb, p_prune boolean, p_dry_run boolean)
    RETURNS TABLE(action text, name text, changes jsonb)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_label text;
    v_executor text;
    v_timer jsonb;
    v_name text;
    v_names text[] := '{}';
    o timers.timers;
    n timers.timers;
    v_changes jsonb;
    v_action text;
    v_counts jsonb := '{"create": 0, "update": 0, "delete": 0, "unchanged": 0}';
    v_state text;
    v_message text;
    v_hint text;
    v_cal jsonb;
    c record;
    v_after text[];
BEGIN
    PERFORM timers._take_ticket(p_actor, 'apply timers');
    IF NOT pg_has_role(p_actor, timers._role('admin'), 'MEMBER') THEN
        RAISE EXCEPTION 'permission denied to apply timers: it needs the role %, and role "%" is not a member',
            timers._role('admin'), p_actor USING ERRCODE = '42501';
    END IF;
    v_label := timers._apply_label(p_spec);
    -- one apply at a time: a second one waits here for the first to commit
    PERFORM 1 FROM timers.locks k WHERE k.name = 'apply' FOR UPDATE;
    -- the whole apply, in one block: a dry run makes it all and then rolls it back
    BEGIN
        -- calendars first: the timers of the set may trade on them
        FOR v_cal IN SELECT e FROM jsonb_array_elements(coalesce(p_spec->'calendar', '[]')) e LOOP
            BEGIN
                c := timers._apply_calendar(p_actor, v_cal);
            EXCEPTION WHEN OTHERS THEN
                GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_message = MESSAGE_TEXT,
                                        v_hint = PG_EXCEPTION_HINT;
                PERFORM timers._apply_error(format('calendar "%s"', coalesce(v_cal->>'name', '(no name)')),
                                            v_state, v_message, v_hint);
            END;
            action := c.action;
            name := c.name;
            changes := c.changes;
            RETURN NEXT;
        END LOOP;
        v_executor := timers._ensure_executor(p_actor);
        -- in the order of the set, except that a timer comes after those it follows
        FOR v_timer IN SELECT e FROM timers._follow_order(coalesce(p_spec->'timer', '[]')) e LOOP
            v_name := v_timer->>'name';
            SELECT * INTO o FROM timers.timers x WHERE lower(x.name) = lower(v_name);
            v_changes := NULL;
            BEGIN
                IF o.id IS NOT NULL AND timers._timer_unchanged(o, v_timer, p_actor) THEN
                    n := o;
                    v_changes := '{}';
                    v_action := 'unchanged';
                ELSE
                    -- (what it followed, before the save changes it: _timer_changes reads it after)
                    v_after := timers._follow_names(o.id);
                    PERFORM timers._save_one(p_actor, v_executor, v_timer, NULL, v_label, true);
                    SELECT * INTO n FROM timers.timers x WHERE lower(x.name) = lower(v_name);
                    v_changes := CASE WHEN o.id IS NULL THEN timers._timer_definition(n)
                                      ELSE timers._timer_changes(o, n) END;
                    IF o.id IS NOT NULL AND v_after IS DISTINCT FROM timers._follow_names(n.id) THEN
                        v_changes := v_changes || jsonb_build_object('after', jsonb_build_object(
                            'from', v_after, 'to', timers._follow_names(n.id)));
                    END IF;
                    v_action := CASE WHEN o.id IS NULL THEN 'create' WHEN v_changes = '{}' THEN 'unchanged'
                                     ELSE 'update' END;
                    IF o.locked AND v_action = 'update' THEN
                        PERFORM timers._refuse_locked(o, 'changed by an apply');
                    END IF;
                    IF v_action = 'unchanged' THEN
                        -- roll the save back: an unchanged timer is not touched
                        RAISE EXCEPTION USING ERRCODE = 'PTA01';
                    END IF;
                END IF;
            EXCEPTION
                WHEN SQLSTATE 'PTA01' THEN
                    NULL;
                WHEN OTHERS THEN
                    GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_message = MESSAGE_TEXT,
                                            v_hint = PG_EXCEPTION_HINT;
                    PERFORM timers._apply_error(format('timer "%s"', coalesce(v_name, '(no name)')),
                                                v_state, v_message, v_hint);
            END;
            v_names := v_names || lower(n.name);
            v_counts := jsonb_set(v_counts, ARRAY[v_action], to_jsonb((v_counts->>v_action)::integer + 1));
            action := v_action;
            name := n.name;
            changes := v_changes;
            RETURN NEXT;
        END LOOP;
        IF p_prune THEN
            -- a timer before those it follows (their delete would be refused while it does)
            FOR o IN SELECT * FROM timers.timers x
                      WHERE x.managed_by = v_label AND NOT lower(x.name) = ANY (v_names)
                      ORDER BY timers._follow_depth(x.id) DESC, lower(x.name) LOOP
                BEGIN
                    PERFORM timers._delete_timer(p_actor, o.name);
                EXCEPTION WHEN OTHERS THEN
                    GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_message = MESSAGE_TEXT,
                                            v_hint = PG_EXCEPTION_HINT;
                    PERFORM timers._apply_error(format('timer "%s"', o.name), v_state, v_message, v_hint);
                END;
                v_counts := jsonb_set(v_counts, '{delete}', to_jsonb((v_counts->>'delete')::integer + 1));
                action := 'delete';
                name := o.name;
                changes := '{}';
                RETURN NEXT;
            END LOOP;
        END IF;
        IF p_dry_run THEN
            RAISE EXCEPTION USING ERRCODE = 'PTA02';  -- the plan stands; nothing of it stays
        END IF;
        PERFORM timers._audit(p_actor, 'apply', v_label, v_counts || jsonb_build_object('prune', p_prune));
        IF (v_counts->>'create')::integer + (v_counts->>'update')::integer > 0 THEN
            PERFORM timers._notify('save', NULL);
        END IF;
    EXCEPTION WHEN SQLSTATE 'PTA02' THEN
        NULL;
    END;
END
$$;

CREATE OR REPLACE FUNCTION timers.apply(spec jsonb, prune boolean DEFAULT false, dry_run boolean DEFAULT true)
    RETURNS TABLE(action text, name text, changes jsonb)
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM timers._require_admin('apply timers');
    IF apply.prune IS NULL OR apply.dry_run IS NULL THEN
        RAISE EXCEPTION 'prune and dry_run must be true or false, not NULL' USING ERRCODE = '22004';
    END IF;
    RETURN QUERY SELECT a.action, a.name, a.changes
                   FROM timers._apply(current_user, apply.spec, apply.prune, apply.dry_run) a;
END
$$;

COMMENT ON FUNCTION timers.apply(jsonb, boolean, boolean) IS
    'Make the timers what a declared set says: spec {"timer": [{name, schedule, sql, ...options of timers.save}], "managed_by": label}; a plan of create, update (changes: {option: {from, to}}), delete (prune: the set''s timers it no longer names) and unchanged. dry_run (the default) changes nothing. Needs pgtimers_admin; audited as one apply row.';

-- The body of timers.export: the timers whose name matches p_pattern (a glob: * any
-- characters, ? one; NULL: all) and the calendars (all of them, or those the matched
-- timers trade on) as a declared set, {"calendar": [...], "timer": [...]}, by name.
CREATE OR REPLACE FUNCTION timers._export(p_actor name, p_pattern text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_like text := replace(replace(replace(replace(replace(coalesce(p_pattern, '*'), '\', '\\'), '%', '\%'),
                                           '_', '\_'), '*', '%'), '?', '_');
BEGIN
    PERFORM timers._take_ticket(p_actor, 'export timers');
    RETURN jsonb_build_object('calendar', coalesce(
        (SELECT jsonb_agg(timers._calendar_definition(c.name) ORDER BY lower(c.name))
           FROM timers.calendars c
          WHERE p_pattern IS NULL OR EXISTS (
              SELECT 1 FROM timers.timers t
               WHERE t.name ILIKE v_like AND t.spec->>'kind' = 'trading'
                 AND lower(t.spec->>'calendar') = lower(c.name))), '[]'),
        'timer', coalesce(
        (SELECT jsonb_agg(timers._timer_definition(t) ORDER BY lower(t.name))
           FROM timers.timers t
          WHERE t.name ILIKE v_like
            AND NOT EXISTS (SELECT 1 FROM timers.pending_changes c
                             WHERE c.timer_id = t.id AND c.action = 'delete')), '[]'));
END
$$;

CREATE OR REPLACE FUNCTION timers.export(timers text DEFAULT NULL) RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM timers._require_admin('export timers');
    RETURN timers._export(current_user, export.timers);
END
$$;

COMMENT ON FUNCTION timers.export(text) IS
    'The timers (name pattern: * and ? globs; NULL: all) as a declared set for timers.apply and pgtimers apply: {"timer": [{name, schedule, sql, options that are not their default}]}. Applying it changes nothing. Needs pgtimers_admin.';

REVOKE ALL ON FUNCTION
    timers._timer_options(timers.timers),
    timers._timer_definition(timers.timers),
    timers._timer_changes(timers.timers,timers.timers),
    timers._timer_unchanged(timers.timers,jsonb,name),
    timers._apply_label(jsonb),
    timers._calendar_definition(text),
    timers._apply_calendar(name,jsonb),
    timers._apply_error(text,text,text,text),
    timers._apply(name,jsonb,boolean,boolean),
    timers.apply(jsonb,boolean,boolean),
    timers._export(name,text),
    timers.export(text)
    FROM PUBLIC, pgtimers_reader, pgtimers_admin, pgtimers_runner;
GRANT EXECUTE ON FUNCTION
    timers.apply(jsonb,boolean,boolean),
    timers.export(text)
    TO PUBLIC;
GRANT EXECUTE ON FUNCTION
    timers._apply(name,jsonb,boolean,boolean),
    timers._export(name,text)
    TO pgtimers_admin;
