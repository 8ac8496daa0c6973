-- pgtimers code: keyed re-arms by calendars and silence-span policies.
--
-- Repeatable: applied whole on every install and upgrade, after the versioned
-- migrations (docs/design.md). Each object here is defined in this file only.

-- p_at rolled onto an open day of the calendar: the same wall time (in p_zone)
-- on the first open day on or after its day ('following') or the last one on
-- or before it ('preceding'). A day outside the calendar's known range, or a
-- missing calendar, is an error, never a guess.
CREATE OR REPLACE FUNCTION timers._keyed_roll(p_calendar text, p_roll text, p_zone text, p_at timestamptz)
    RETURNS timestamptz
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    v_name text;
    v_local timestamp;
    v_day date;
BEGIN
    IF p_calendar IS NULL OR p_at IS NULL THEN
        RETURN p_at;
    END IF;
    v_name := timers._calendar(p_calendar);
    v_local := p_at AT TIME ZONE p_zone;
    PERFORM timers._calendar_known(v_name, v_local::date);
    v_day := CASE p_roll WHEN 'preceding' THEN timers._prev_trading_day(v_name, v_local::date)
                         ELSE timers._next_trading_day(v_name, v_local::date) END;
    IF v_day IS NULL THEN
        RAISE EXCEPTION 'calendar ''%'' has no open day within 400 days % %', v_name,
            CASE p_roll WHEN 'preceding' THEN 'before' ELSE 'after' END, v_local::date
            USING ERRCODE = '22023',
                  HINT = 'Add trading days or a week with open days: timers.add_trading_day, timers.set_calendar_week.';
    END IF;
    PERFORM timers._calendar_known(v_name, v_day);
    RETURN (v_day + v_local::time) AT TIME ZONE p_zone;
END
$$;

-- since + span, added in the zone (so '7 days' is seven calendar days there, across DST).
CREATE OR REPLACE FUNCTION timers._keyed_span_end(p_since timestamptz, p_span interval, p_zone text)
    RETURNS timestamptz
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT ((p_since AT TIME ZONE p_zone) + p_span) AT TIME ZONE p_zone $$;

-- The last activity implied by a time owed under a span (a move of a policy timer).
CREATE OR REPLACE FUNCTION timers._keyed_span_start(p_owed timestamptz, p_span interval, p_zone text)
    RETURNS timestamptz
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT ((p_owed AT TIME ZONE p_zone) - p_span) AT TIME ZONE p_zone $$;

-- A policy name by the name rules, else 22023.
CREATE OR REPLACE FUNCTION timers._keyed_check_policy_name(p_name text) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF p_name IS NULL OR p_name !~ '^[A-Za-z0-9_.-]{1,64}$' THEN
        RAISE EXCEPTION 'bad policy name %: use 1 to 64 letters, digits, "_", "." and "-"', timers._quoted(p_name)
            USING ERRCODE = '22023';
    END IF;
    RETURN p_name;
END
$$;

-- A policy by name (names compare case-insensitively); raises when missing.
CREATE OR REPLACE FUNCTION timers._keyed_policy(p_name text) RETURNS timers.keyed_policies
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    p timers.keyed_policies;
BEGIN
    SELECT * INTO p FROM timers.keyed_policies x WHERE lower(x.name) = lower(p_name) COLLATE "default";
    IF NOT FOUND THEN
        RAISE EXCEPTION 'there is no policy % in database %', timers._quoted(p_name), current_database()
            USING ERRCODE = 'P0002',
                  HINT = format('Set its span first: SELECT timers.set_policy(%s, ''14 days'');', timers._quoted(p_name));
    END IF;
    RETURN p;
END
$$;

-- The checks of a calendar and roll given to arm; the calendar's stored name.
CREATE OR REPLACE FUNCTION timers._keyed_check_roll(p_calendar text, p_roll text) RETURNS text
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    IF p_calendar IS NULL AND p_roll IS NULL THEN
        RETURN NULL;
    END IF;
    IF p_roll IS NULL OR p_roll NOT IN ('following', 'preceding') THEN
        RAISE EXCEPTION 'bad roll %: a date on a closed day rolls to the ''following'' or the ''preceding'' open day',
            quote_literal(coalesce(p_roll, 'NULL')) USING ERRCODE = '22023';
    END IF;
    IF p_calendar IS NULL THEN
        RETURN NULL;
    END IF;
    RETURN timers._calendar(p_calendar);
END
$$;

-- Re-arm an armed timer at a new nominal time (rolled onto its calendar).
-- Returns the timer's id (its successor's after a supersede), or NULL when the
-- owed time stays (the new nominal time and activity are kept for later re-rolls).
CREATE OR REPLACE FUNCTION timers._keyed_rearm_at(k timers.keyed_timers, p_actor name, p_cause text,
    p_nominal timestamptz, p_since timestamptz) RETURNS bigint
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_owed timestamptz := timers._keyed_roll(k.calendar, k.roll, k.zone, p_nominal);
BEGIN
    IF v_owed = k.owed_at THEN
        UPDATE timers.keyed_timers SET nominal_at = p_nominal, since = p_since WHERE id = k.id;
        RETURN NULL;
    END IF;
    RETURN timers._keyed_rearm(k, p_actor, p_cause, 'moved', v_owed, p_nominal, p_since, k.sql, k.owner,
                               k.version, k.executor);
END
$$;

-- Re-roll the armed keyed timers that follow a calendar, in the caller's
-- transaction; each one whose owed time changes is re-armed with cause
-- 'calendar'. A timer being fired right now is left to its fire. One whose
-- day the calendar no longer knows keeps its time, and its fire fails with
-- the reason (timers._calendar_ready). Returns how many re-armed.
CREATE OR REPLACE FUNCTION timers._keyed_reroll(p_actor name, p_calendar text) RETURNS integer
    LANGUAGE plpgsql
    AS $$
DECLARE
    k timers.keyed_timers;
    v_owed timestamptz;
    v_count integer := 0;
BEGIN
    FOR k IN
        SELECT * FROM timers.keyed_timers x
         WHERE x.status = 'armed' AND x.calendar IS NOT NULL AND lower(x.calendar) = lower(p_calendar)
         ORDER BY x.owed_at, x.place, x.key
           FOR UPDATE SKIP LOCKED
    LOOP
        BEGIN
            v_owed := timers._keyed_roll(k.calendar, k.roll, k.zone, coalesce(k.nominal_at, k.owed_at));
        EXCEPTION WHEN SQLSTATE '22023' OR SQLSTATE 'P0002' THEN
            CONTINUE;
        END;
        CONTINUE WHEN v_owed = k.owed_at;
        PERFORM timers._keyed_rearm(k, p_actor, 'calendar', 'moved', v_owed,
                                    coalesce(k.nominal_at, k.owed_at), k.since, k.sql, k.owner, k.version,
                                    k.executor);
        v_count := v_count + 1;
    END LOOP;
    IF v_count > 0 THEN
        PERFORM timers._notify('calendar', p_calendar);
    END IF;
    RETURN v_count;
END
$$;

-- The body of timers.set_policy: its armed keyed timers are re-armed from their last
-- activity.
CREATE OR REPLACE FUNCTION timers._keyed_set_policy(p_actor name, p_name text, p_span interval, p_note text)
    RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    p timers.keyed_policies;
    v_old interval;
    v_created boolean;
    k timers.keyed_timers;
    v_rearmed integer := 0;
    v_seen integer := 0;
    v_armed integer;
    v_held integer;
BEGIN
    PERFORM timers._keyed_check_actor(p_actor, 'set a policy');
    PERFORM timers._keyed_check_policy_name(p_name);
    IF p_span IS NULL OR p_span <= interval '0' OR p_span > interval '100 years' THEN
        RAISE EXCEPTION 'bad span %: a policy''s span is longer than 0 and at most 100 years, like ''14 days''',
            coalesce(p_span::text, 'NULL') USING ERRCODE = '22023';
    END IF;
    SELECT * INTO p FROM timers.keyed_policies x WHERE lower(x.name) = lower(p_name) COLLATE "default" FOR UPDATE;
    v_created := NOT FOUND;
    v_old := p.span;
    IF v_created THEN
        INSERT INTO timers.keyed_policies (name, span, note) VALUES (p_name, p_span, coalesce(p_note, ''))
        RETURNING * INTO p;
    ELSE
        UPDATE timers.keyed_policies SET span = p_span, note = coalesce(p_note, note), updated_at = now()
         WHERE name = p.name RETURNING * INTO p;
    END IF;
    SELECT count(*) FILTER (WHERE x.status = 'armed'), count(*) FILTER (WHERE x.status = 'held')
      INTO v_armed, v_held
      FROM timers.keyed_timers x WHERE x.policy = p.name AND x.status IN ('armed', 'held');
    IF v_old IS DISTINCT FROM p_span THEN
        -- a timer being fired right now is skipped (its fire wins); a held one keeps its remaining time
        FOR k IN
            SELECT * FROM timers.keyed_timers x
             WHERE x.status = 'armed' AND x.policy = p.name
             ORDER BY x.owed_at, x.place, x.key
               FOR UPDATE SKIP LOCKED
        LOOP
            v_seen := v_seen + 1;
            IF timers._keyed_rearm_at(k, p_actor, 'policy', timers._keyed_span_end(k.since, p_span, k.zone),
                                      k.since) IS NOT NULL THEN
                v_rearmed := v_rearmed + 1;
            END IF;
        END LOOP;
    ELSE
        v_seen := v_armed;
    END IF;
    PERFORM timers._audit(p_actor, 'set_policy', p.name, jsonb_build_object(
        'span', p_span, 'from', v_old, 'created', v_created, 'rearmed', v_rearmed));
    IF v_rearmed > 0 THEN
        PERFORM timers._notify('policy', p.name);
    END IF;
    RETURN jsonb_build_object('name', p.name, 'span', p.span::text, 'from', v_old::text,
        'created', v_created, 'rearmed', v_rearmed, 'held', v_held, 'busy', v_armed - v_seen);
END
$$;

CREATE OR REPLACE FUNCTION timers.set_policy(name text, span interval, note text DEFAULT NULL) RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM timers._require_admin('set a policy');
    RETURN timers._keyed_set_policy(current_user, set_policy.name, set_policy.span, set_policy.note);
END
$$;

COMMENT ON FUNCTION timers.set_policy(text, interval, text) IS
    'Create a silence policy or change its span; each armed keyed timer of the policy is re-armed at its last activity + the new span (cause policy). Needs pgtimers_admin.';

-- The body of timers.drop_policy.
CREATE OR REPLACE FUNCTION timers._keyed_drop_policy(p_actor name, p_name text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    p timers.keyed_policies;
    v_using bigint;
BEGIN
    PERFORM timers._keyed_check_actor(p_actor, 'drop a policy');
    p := timers._keyed_policy(p_name);
    PERFORM 1 FROM timers.keyed_policies WHERE name = p.name FOR UPDATE;
    SELECT count(*) INTO v_using FROM timers.keyed_timers x
     WHERE x.policy = p.name AND x.status IN ('armed', 'held');
    IF v_using > 0 THEN
        RAISE EXCEPTION 'cannot drop policy %: % armed or held keyed timers count their span from it', quote_literal(p.name), v_using
            USING ERRCODE = '55000',
                  HINT = format('See them with SELECT key FROM timers.keyed WHERE policy = %L AND status IN (''armed'', ''held'');', p.name);
    END IF;
    DELETE FROM timers.keyed_policies WHERE name = p.name;
    PERFORM timers._audit(p_actor, 'drop_policy', p.name, jsonb_build_object('span', p.span));
    RETURN jsonb_build_object('dropped', true, 'name', p.name);
END
$$;

CREATE OR REPLACE FUNCTION timers.drop_policy(name text) RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM timers._require_admin('drop a policy');
    RETURN timers._keyed_drop_policy(current_user, drop_policy.name);
END
$$;

COMMENT ON FUNCTION timers.drop_policy(text) IS
    'Drop a silence policy no armed or held keyed timer uses. Needs pgtimers_admin.';

-- ---------------------------------------------------------------------------
-- Rights
-- ---------------------------------------------------------------------------
REVOKE ALL ON FUNCTION
    timers._keyed_roll(text,text,text,timestamp with time zone),
    timers._keyed_span_end(timestamp with time zone,interval,text),
    timers._keyed_span_start(timestamp with time zone,interval,text),
    timers._keyed_check_policy_name(text),
    timers._keyed_policy(text),
    timers._keyed_check_roll(text,text),
    timers._keyed_rearm_at(timers.keyed_timers,name,text,timestamp with time zone,timestamp with time zone),
    timers._keyed_reroll(name,text),
    timers._keyed_set_policy(name,text,interval,text),
    timers.set_policy(text,interval,text),
    timers._keyed_drop_policy(name,text),
    timers.drop_policy(text)
    FROM PUBLIC, pgtimers_reader, pgtimers_admin, pgtimers_runner;
GRANT EXECUTE ON FUNCTION
    timers._keyed_set_policy(name,text,interval,text),
    timers.set_policy(text,interval,text),
    timers._keyed_drop_policy(name,text),
    timers.drop_policy(text)
    TO pgtimers_admin;
