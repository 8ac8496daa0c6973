-- pgtimers 0010: the last two re-arm events of keyed timers (seed 000, "What
-- re-arms a timer"): a calendar edit re-rolls every date it touches, and a
-- policy change of a silence span re-arms from the last activity.
--
-- A keyed timer may now follow a calendar (arm(..., calendar => 'irs',
-- roll => 'following')): its nominal time (the date the world sets) is rolled
-- onto an open day of the calendar, and every edit of that calendar re-rolls
-- it in the same transaction, recorded with cause 'calendar'. A timer may
-- also count a named span from a last activity (arm(..., policy =>
-- 'stall_days', since => ...)): timers.set_policy re-arms each armed timer of
-- the policy at since + the new span, with cause 'policy'.
-- docs/keyed.md, "Calendars and policies", has the long form.

-- ---------------------------------------------------------------------------
-- Tables
-- ---------------------------------------------------------------------------

-- A named span of silence ("stall_days" = 14 days): a timer armed with the
-- policy is owed at its last activity plus the span.
CREATE TABLE timers.keyed_policies (
    name       text PRIMARY KEY,
    span       interval NOT NULL CHECK (span > interval '0'),
    note       text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX keyed_policies_name_ci ON timers.keyed_policies (lower(name));

COMMENT ON TABLE timers.keyed_policies IS
    'Named silence spans of keyed timers; change one with timers.set_policy, which re-arms its timers.';

ALTER TABLE timers.keyed_timers
    -- the date the world sets, before the calendar rolls it (NULL: held, or armed before 0010)
    ADD COLUMN nominal_at timestamptz,
    ADD COLUMN calendar   text,
    ADD COLUMN roll       text CHECK (roll IN ('following', 'preceding')),
    -- the zone that decides a calendar day, and in which a policy's span is added
    ADD COLUMN zone       text NOT NULL DEFAULT 'UTC',
    ADD COLUMN policy     text,
    -- the last activity a policy's span counts from
    ADD COLUMN since      timestamptz,
    ADD CONSTRAINT keyed_calendar_rolls CHECK ((calendar IS NULL) = (roll IS NULL)),
    ADD CONSTRAINT keyed_policy_since CHECK (policy IS NULL OR since IS NOT NULL);
UPDATE timers.keyed_timers SET nominal_at = owed_at WHERE status = 'armed';
CREATE INDEX keyed_calendar ON timers.keyed_timers (lower(calendar))
    WHERE status = 'armed' AND calendar IS NOT NULL;
CREATE INDEX keyed_policy ON timers.keyed_timers (policy)
    WHERE status = 'armed' AND policy IS NOT NULL;

REVOKE ALL ON timers.keyed_policies FROM PUBLIC;
GRANT SELECT ON timers.keyed_policies TO pgtimers_reader, pgtimers_runner;

-- The view gains the new columns at its end (CREATE OR REPLACE VIEW may only append).
CREATE OR REPLACE VIEW timers.keyed AS
SELECT k.key,
       k.id,
       k.subject AS "on",
       k.kind,
       k.name,
       k.occurrence,
       k.n,
       k.place,
       k.status,
       k.version,
       k.owed_at,
       k.armed_at,
       k.fired_at,
       k.late_by,
       k.attempt,
       k.wakes,
       k.commit::text AS commit,
       k.superseded_by,
       k.cause AS "by",
       k.held_since,
       k.held_by,
       k.remaining,
       k.resumed_at,
       k.late_at,
       k.test_clock,
       k.owner::text AS owner,
       -- a timer's SQL may hold secrets: readers see it for their own timers only (as timers.status)
       CASE WHEN pg_has_role(current_user, 'pgtimers_admin', 'MEMBER')
              OR pg_has_role(current_user, (SELECT r.oid FROM pg_roles r WHERE r.rolname = k.owner), 'MEMBER')
            THEN k.sql END AS sql,
       k.ok,
       k.error,
       k.rows,
       k.took_ms,
       k.updated_at,
       k.nominal_at,
       k.calendar,
       k.roll,
       k.zone,
       k.policy,
       k.since
  FROM timers.keyed_timers k;

COMMENT ON VIEW timers.keyed IS
    'One row per keyed timer with the seed''s fields: key, on, status (armed/fired/superseded/held/void), place, owed_at, armed_at, fired_at, late_by, attempt, wakes, commit, superseded_by, by, held_since, held_by, remaining, resumed_at, late_at, version; and nominal_at, calendar, roll, zone, policy, since.';

-- A name (or any short text) given by a caller, as a message shows it: quoted as
-- a literal, control characters (C0, DEL, C1) made visible as '?', cut short after
-- p_max characters ('…'). NULL shows as NULL.
CREATE OR REPLACE FUNCTION timers._shown(p_text text, p_max integer DEFAULT 80) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    AS $$
        SELECT pg_catalog.quote_nullable(pg_catalog.regexp_replace(
                   CASE WHEN pg_catalog.length(p_text) > p_max
                        THEN pg_catalog.left(p_text, p_max) || '…' ELSE p_text END,
                   '[\x01-\x1f\x7f-\x9f]', '?', 'g'))
    $$;


-- ---------------------------------------------------------------------------
-- Rolling a date onto a calendar, and a policy's span
-- ---------------------------------------------------------------------------

-- The last open day of a calendar on or before p_day (NULL when none within 400 days).
CREATE OR REPLACE FUNCTION timers._prev_trading_day(p_calendar text, p_day date) RETURNS date
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_day date := p_day;
BEGIN
    FOR i IN 1..400 LOOP
        IF timers._trading_day(p_calendar, v_day) THEN
            RETURN v_day;
        END IF;
        v_day := v_day - 1;
    END LOOP;
    RETURN NULL;
END
$$;

-- p_at rolled onto an open day of the calendar: the same wall time (in p_zone)
-- on the first open day on or after its day ('following') or the last one on
-- or before it ('preceding'). A day outside the calendar's known range, or a
-- missing calendar, is an error, never a guess.
CREATE OR REPLACE FUNCTION timers._keyed_roll(p_calendar text, p_roll text, p_zone text, p_at timestamptz)
    RETURNS timestamptz
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
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
    SET search_path = pg_catalog, pg_temp
    AS $$ SELECT ((p_since AT TIME ZONE p_zone) + p_span) AT TIME ZONE p_zone $$;

-- The last activity implied by a time owed under a span (a move of a policy timer).
CREATE OR REPLACE FUNCTION timers._keyed_span_start(p_owed timestamptz, p_span interval, p_zone text)
    RETURNS timestamptz
    LANGUAGE sql IMMUTABLE
    SET search_path = pg_catalog, pg_temp
    AS $$ SELECT ((p_owed AT TIME ZONE p_zone) - p_span) AT TIME ZONE p_zone $$;

CREATE OR REPLACE FUNCTION timers._check_policy_name(p_name text) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    IF p_name IS NULL OR p_name !~ '^[A-Za-z0-9_.-]{1,64}$' THEN
        RAISE EXCEPTION 'bad policy name %: use 1 to 64 letters, digits, "_", "." and "-"', timers._shown(p_name)
            USING ERRCODE = '22023';
    END IF;
    RETURN p_name;
END
$$;

-- A policy by name (names compare case-insensitively); raises when missing.
CREATE OR REPLACE FUNCTION timers._keyed_policy(p_name text) RETURNS timers.keyed_policies
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    p timers.keyed_policies;
BEGIN
    SELECT * INTO p FROM timers.keyed_policies x WHERE lower(x.name) = lower(p_name) COLLATE "default";
    IF NOT FOUND THEN
        RAISE EXCEPTION 'there is no policy % in database %', timers._shown(p_name), current_database()
            USING ERRCODE = 'P0002',
                  HINT = format('Set its span first: SELECT timers.set_policy(%s, ''14 days'');', timers._shown(p_name));
    END IF;
    RETURN p;
END
$$;

-- The checks of a calendar and roll given to arm; the calendar's stored name.
CREATE OR REPLACE FUNCTION timers._keyed_check_roll(p_calendar text, p_roll text) RETURNS text
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
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

-- ---------------------------------------------------------------------------
-- Re-arming (replaces 0009's _keyed_rearm: the successor also carries the
-- nominal time and the last activity)
-- ---------------------------------------------------------------------------

DROP FUNCTION timers._keyed_rearm(timers.keyed_timers, name, text, text, timestamptz, text, name, text);

-- Re-arm a locked timer for one of the closed list of causes. With @n in its
-- key it is superseded and its successor @n+1 is armed (returned); without
-- @n it keeps its key and changes in place (armed again now). p_owed: the new
-- owed time (a held timer stays held); p_nominal/p_since: the date before the
-- roll and the last activity; p_sql/p_owner/p_version: the new SQL (repin).
CREATE OR REPLACE FUNCTION timers._keyed_rearm(
    k timers.keyed_timers, p_actor name, p_cause text, p_event text, p_owed timestamptz,
    p_nominal timestamptz, p_since timestamptz, p_sql text, p_owner name, p_version text) RETURNS bigint
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_now timestamptz := coalesce(timers._now(k.test_clock), now());
    v_key text;
    v_id bigint;
    s timers.keyed_timers;
BEGIN
    IF k.n IS NULL THEN
        UPDATE timers.keyed_timers
           SET owed_at = CASE WHEN status = 'held' THEN NULL ELSE p_owed END,
               nominal_at = CASE WHEN status = 'held' THEN NULL ELSE p_nominal END,
               since = p_since,
               armed_at = CASE WHEN p_owed IS DISTINCT FROM k.owed_at THEN v_now ELSE armed_at END,
               sql = p_sql, owner = p_owner, version = p_version, updated_at = now()
         WHERE id = k.id;
        PERFORM timers._keyed_event(k, p_event, p_cause, p_actor, jsonb_build_object(
            'from', timers._iso(k.owed_at), 'to', timers._iso(p_owed),
            'version', p_version, 'from_version', k.version));
        RETURN k.id;
    END IF;
    v_key := format('%s:%s:%s:%s@%s', k.subject, k.kind, k.name, k.occurrence, k.n + 1);
    IF EXISTS (SELECT 1 FROM timers.keyed_timers x WHERE x.key = v_key) THEN
        RAISE EXCEPTION 'cannot re-arm keyed timer ''%'': its successor ''%'' exists already', k.key, v_key
            USING ERRCODE = '55000';
    END IF;
    INSERT INTO timers.keyed_timers (key, subject, kind, name, occurrence, n, status, place, owed_at,
        armed_at, late_at, held_since, held_by, remaining, resumed_at, sql, owner, version, test_clock,
        nominal_at, calendar, roll, zone, policy, since)
    VALUES (v_key, k.subject, k.kind, k.name, k.occurrence, k.n + 1, k.status, k.place,
            CASE WHEN k.status = 'held' THEN NULL ELSE p_owed END, v_now, k.late_at,
            k.held_since, k.held_by, k.remaining, k.resumed_at, p_sql, p_owner, p_version, k.test_clock,
            CASE WHEN k.status = 'held' THEN NULL ELSE p_nominal END, k.calendar, k.roll, k.zone,
            k.policy, p_since)
    RETURNING * INTO s;
    v_id := s.id;
    UPDATE timers.keyed_timers
       SET status = 'superseded', superseded_by = v_key, superseded_at = v_now, cause = p_cause,
           updated_at = now()
     WHERE id = k.id;
    PERFORM timers._keyed_event(k, 'superseded', p_cause, p_actor, jsonb_build_object('superseded_by', v_key));
    PERFORM timers._keyed_event(s, 'armed', p_cause, p_actor, jsonb_build_object(
        'supersedes', k.key, 'from', timers._iso(k.owed_at), 'to', timers._iso(s.owed_at),
        'version', p_version, 'from_version', k.version));
    RETURN v_id;
END
$$;

-- Re-arm an armed timer at a new nominal time (rolled onto its calendar).
-- Returns the timer's id (its successor's after a supersede), or NULL when the
-- owed time stays (the new nominal time and activity are kept for later re-rolls).
CREATE OR REPLACE FUNCTION timers._keyed_rearm_at(k timers.keyed_timers, p_actor name, p_cause text,
    p_nominal timestamptz, p_since timestamptz) RETURNS bigint
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_owed timestamptz := timers._keyed_roll(k.calendar, k.roll, k.zone, p_nominal);
BEGIN
    IF v_owed = k.owed_at THEN
        UPDATE timers.keyed_timers SET nominal_at = p_nominal, since = p_since WHERE id = k.id;
        RETURN NULL;
    END IF;
    RETURN timers._keyed_rearm(k, p_actor, p_cause, 'moved', v_owed, p_nominal, p_since, k.sql, k.owner, k.version);
END
$$;

-- ---------------------------------------------------------------------------
-- arm, move, resume, repin with calendars and policies
-- ---------------------------------------------------------------------------

DROP FUNCTION timers.arm(text, timestamptz, text, integer, timestamptz, text, text);
DROP FUNCTION timers._arm(name, text, timestamptz, text, integer, timestamptz, text, text);

CREATE OR REPLACE FUNCTION timers._arm(
    p_actor name, p_key text, p_owed_at timestamptz, p_sql text, p_place integer,
    p_late_at timestamptz, p_test_clock text, p_version text, p_calendar text, p_roll text,
    p_policy text, p_since timestamptz, p_zone text) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    kp record;
    v_id bigint;
    v_now timestamptz;
    v_version text;
    v_zone text;
    v_calendar text;
    v_policy timers.keyed_policies;
    v_nominal timestamptz := p_owed_at;
    v_owed timestamptz;
    k timers.keyed_timers;
BEGIN
    PERFORM timers._keyed_check_actor(p_actor, 'arm a keyed timer');
    SELECT * INTO kp FROM timers._parse_key(p_key);
    -- A replay arms the same keys: an existing key answers unchanged.
    SELECT x.id INTO v_id FROM timers.keyed_timers x WHERE x.key = p_key;
    IF FOUND THEN
        RETURN v_id;
    END IF;
    v_zone := timers._check_zone(coalesce(p_zone, 'UTC'));
    v_calendar := timers._keyed_check_roll(p_calendar, p_roll);
    IF p_policy IS NOT NULL THEN
        v_policy := timers._keyed_policy(timers._check_policy_name(p_policy));
        IF p_since IS NULL THEN
            RAISE EXCEPTION 'since must be the time of the last activity, which policy % counts its span from',
                quote_literal(v_policy.name) USING ERRCODE = '22004';
        END IF;
        IF p_owed_at IS NOT NULL THEN
            RAISE EXCEPTION 'give owed_at or a policy, not both: with policy % the timer is owed at since + %',
                quote_literal(v_policy.name), v_policy.span USING ERRCODE = '22023';
        END IF;
        v_nominal := timers._keyed_span_end(p_since, v_policy.span, v_zone);
    ELSIF p_since IS NOT NULL THEN
        RAISE EXCEPTION 'since is the last activity of a policy timer: give policy too, or leave since out'
            USING ERRCODE = '22023';
    END IF;
    IF v_nominal IS NULL THEN
        RAISE EXCEPTION 'owed_at must be a time, not NULL' USING ERRCODE = '22004';
    END IF;
    IF NOT isfinite(v_nominal) THEN
        RAISE EXCEPTION 'owed_at must be a finite time, not %', v_nominal USING ERRCODE = '22023';
    END IF;
    IF p_place IS NULL OR p_place NOT BETWEEN 1 AND 8 THEN
        RAISE EXCEPTION 'bad place %: a place in the tick is 1 to 8 (default 5)', coalesce(p_place::text, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    IF p_test_clock IS NOT NULL AND NOT EXISTS (SELECT 1 FROM timers.test_clocks c WHERE c.name = p_test_clock) THEN
        RAISE EXCEPTION 'there is no test clock %; make one with SELECT timers.create_test_clock(%, now())',
            timers._shown(p_test_clock), timers._shown(p_test_clock)
            USING ERRCODE = '22023';
    END IF;
    v_owed := timers._keyed_roll(v_calendar, p_roll, v_zone, v_nominal);
    IF p_late_at IS NOT NULL AND p_late_at < v_owed THEN
        RAISE EXCEPTION 'late_at % is before owed_at %: the late time of a deadline comes at or after it',
            timers._iso(p_late_at), timers._iso(v_owed)
            USING ERRCODE = '22023';
    END IF;
    PERFORM timers._keyed_check_sql(p_sql);
    v_version := timers._keyed_version(p_sql, p_version);
    v_now := timers._now(p_test_clock);
    PERFORM timers._ensure_executor(p_actor);
    INSERT INTO timers.keyed_timers AS x (key, subject, kind, name, occurrence, n, place, owed_at,
        armed_at, late_at, sql, owner, version, test_clock, nominal_at, calendar, roll, zone, policy, since)
    VALUES (p_key, kp.subject, kp.kind, kp.name, kp.occurrence, kp.n, p_place, v_owed, v_now,
            p_late_at, p_sql, p_actor, v_version, p_test_clock, v_nominal, v_calendar,
            CASE WHEN v_calendar IS NOT NULL THEN p_roll END, v_zone, v_policy.name,
            CASE WHEN v_policy.name IS NOT NULL THEN p_since END)
    ON CONFLICT (key) DO NOTHING
    RETURNING x.* INTO k;
    IF k.id IS NULL THEN
        -- armed by a concurrent call between our look and our insert
        SELECT x.id INTO v_id FROM timers.keyed_timers x WHERE x.key = p_key;
        RETURN v_id;
    END IF;
    PERFORM timers._keyed_event(k, 'armed', 'arm', p_actor, jsonb_strip_nulls(jsonb_build_object(
        'owed_at', timers._iso(v_owed), 'place', p_place, 'version', v_version,
        'nominal_at', CASE WHEN v_nominal <> v_owed THEN timers._iso(v_nominal) END,
        'calendar', v_calendar, 'policy', v_policy.name)));
    PERFORM timers._audit(p_actor, 'arm', p_key, jsonb_strip_nulls(jsonb_build_object(
        'owed_at', v_owed, 'sql', p_sql, 'place', p_place, 'late_at', p_late_at,
        'test_clock', p_test_clock, 'version', v_version, 'calendar', v_calendar,
        'roll', CASE WHEN v_calendar IS NOT NULL THEN p_roll END,
        'policy', v_policy.name, 'since', p_since, 'zone', v_zone)));
    PERFORM timers._notify('arm', p_key);
    RETURN k.id;
END
$$;

CREATE OR REPLACE FUNCTION timers.arm(
    key text, owed_at timestamptz, sql text, place integer DEFAULT 5,
    late_at timestamptz DEFAULT NULL, test_clock text DEFAULT NULL, version text DEFAULT NULL,
    calendar text DEFAULT NULL, roll text DEFAULT 'following', policy text DEFAULT NULL,
    since timestamptz DEFAULT NULL, zone text DEFAULT 'UTC')
    RETURNS timers.keyed
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM timers._require_admin('arm a keyed timer');
    RETURN timers._keyed_row(timers._arm(current_user, arm.key, arm.owed_at, arm.sql, arm.place,
                                         arm.late_at, arm.test_clock, arm.version, arm.calendar,
                                         arm.roll, arm.policy, arm.since, arm.zone));
END
$$;

COMMENT ON FUNCTION timers.arm(text, timestamptz, text, integer, timestamptz, text, text, text, text, text, timestamptz, text) IS
    'Arm a keyed timer (key owner:kind:name:occurrence[@n]) owed at owed_at (rolled onto calendar''s open days; or since + policy''s span); it runs sql once, as the role in effect now. An existing key answers unchanged. Needs pgtimers_admin.';

-- A move sets the nominal time; a calendar rolls it, and a policy timer's last
-- activity moves with it (owed_at - span).
CREATE OR REPLACE FUNCTION timers._move(p_actor name, p_key text, p_owed_at timestamptz, p_by text)
    RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    k timers.keyed_timers;
    v_since timestamptz;
    v_id bigint;
BEGIN
    PERFORM timers._keyed_check_actor(p_actor, 'move a keyed timer');
    IF p_by IS NULL OR NOT p_by = ANY (timers._keyed_move_causes()) THEN
        RAISE EXCEPTION 'bad cause %: a move is recorded as one of % (hold, resume and repin have their own calls)',
            timers._shown(p_by), array_to_string(timers._keyed_move_causes(), ', ')
            USING ERRCODE = '22023';
    END IF;
    IF p_owed_at IS NULL OR NOT isfinite(p_owed_at) THEN
        RAISE EXCEPTION 'owed_at must be a finite time, not %', coalesce(p_owed_at::text, 'NULL') USING ERRCODE = '22004';
    END IF;
    k := timers._keyed_lock(p_key);
    PERFORM timers._keyed_require(k, ARRAY['armed'], 'move');
    v_since := k.since;
    IF k.policy IS NOT NULL THEN
        v_since := timers._keyed_span_start(p_owed_at, (timers._keyed_policy(k.policy)).span, k.zone);
    END IF;
    v_id := timers._keyed_rearm_at(k, p_actor, p_by, p_owed_at, v_since);
    IF v_id IS NULL THEN
        RETURN k.id;  -- the same owed time: nothing moved
    END IF;
    PERFORM timers._audit(p_actor, 'move', k.key, jsonb_build_object(
        'from', k.owed_at, 'to', p_owed_at, 'by', p_by, 'id', v_id));
    PERFORM timers._notify('move', k.key);
    RETURN v_id;
END
$$;

CREATE OR REPLACE FUNCTION timers._resume(p_actor name, p_key text) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    k timers.keyed_timers;
    v_now timestamptz;
    v_nominal timestamptz;
    v_owed timestamptz;
BEGIN
    PERFORM timers._keyed_check_actor(p_actor, 'resume a keyed timer');
    k := timers._keyed_lock(p_key);
    PERFORM timers._keyed_require(k, ARRAY['held'], 'resume');
    v_now := coalesce(timers._now(k.test_clock), now());
    -- the time left is kept, not spent; rolled onto the calendar's open days;
    -- and a deadline never re-arms after its late time
    v_nominal := v_now + k.remaining;
    v_owed := timers._keyed_roll(k.calendar, k.roll, k.zone, v_nominal);
    IF k.late_at IS NOT NULL AND k.late_at < v_owed THEN
        v_owed := k.late_at;
    END IF;
    UPDATE timers.keyed_timers
       SET status = 'armed', owed_at = v_owed, nominal_at = v_nominal, resumed_at = v_now, updated_at = now()
     WHERE id = k.id;
    PERFORM timers._keyed_event(k, 'resumed', 'resume', p_actor, jsonb_build_object(
        'owed_at', timers._iso(v_owed), 'remaining', k.remaining::text, 'held_by', k.held_by));
    PERFORM timers._audit(p_actor, 'resume', k.key, jsonb_build_object('owed_at', v_owed));
    PERFORM timers._notify('resume', k.key);
    RETURN k.id;
END
$$;

CREATE OR REPLACE FUNCTION timers._repin(p_actor name, p_key text, p_sql text, p_version text) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    k timers.keyed_timers;
    v_version text;
    v_id bigint;
BEGIN
    PERFORM timers._keyed_check_actor(p_actor, 'repin a keyed timer');
    PERFORM timers._keyed_check_sql(p_sql);
    v_version := timers._keyed_version(p_sql, p_version);
    k := timers._keyed_lock(p_key);
    PERFORM timers._keyed_require(k, ARRAY['armed', 'held'], 'repin');
    IF k.sql = p_sql AND k.version = v_version AND k.owner = p_actor THEN
        RETURN k.id;
    END IF;
    PERFORM timers._ensure_executor(p_actor);
    v_id := timers._keyed_rearm(k, p_actor, 'repin', 'repinned', k.owed_at, k.nominal_at, k.since,
                                p_sql, p_actor, v_version);
    PERFORM timers._audit(p_actor, 'repin', k.key, jsonb_build_object(
        'sql', p_sql, 'version', v_version, 'from_version', k.version, 'id', v_id));
    PERFORM timers._notify('repin', k.key);
    RETURN v_id;
END
$$;

-- ---------------------------------------------------------------------------
-- The calendar re-arm: every edit re-rolls the armed keyed timers it touches
-- ---------------------------------------------------------------------------

-- Re-roll the armed keyed timers that follow a calendar, in the caller's
-- transaction; each one whose owed time changes is re-armed with cause
-- 'calendar'. A timer being fired right now is left to its fire. One whose
-- day the calendar no longer knows keeps its time, and its fire fails with
-- the reason (timers._keyed_calendar_ready). Returns how many re-armed.
CREATE OR REPLACE FUNCTION timers._reroll_keyed(p_actor name, p_calendar text) RETURNS integer
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
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
                                    coalesce(k.nominal_at, k.owed_at), k.since, k.sql, k.owner, k.version);
        v_count := v_count + 1;
    END LOOP;
    IF v_count > 0 THEN
        PERFORM timers._notify('calendar', p_calendar);
    END IF;
    RETURN v_count;
END
$$;

-- 0006's hook of every calendar edit, now re-rolling keyed timers too.
CREATE OR REPLACE FUNCTION timers._calendar_changed(p_actor name, p_action text, p_name text, p_detail jsonb)
    RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_keyed integer;
BEGIN
    UPDATE timers.calendars SET updated_at = now() WHERE lower(name) = lower(p_name) COLLATE "default";
    PERFORM timers._replan_calendar(p_name);
    v_keyed := timers._reroll_keyed(p_actor, p_name);
    PERFORM timers._audit(p_actor, p_action, p_name,
        p_detail || CASE WHEN v_keyed > 0 THEN jsonb_build_object('keyed_rerolled', v_keyed) ELSE '{}' END);
END
$$;

-- Raised inside a keyed fire that follows a calendar which is gone or does not
-- know the day: the fire fails with the reason instead of guessing.
CREATE OR REPLACE FUNCTION timers._keyed_calendar_ready(k timers.keyed_timers) RETURNS void
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    IF k.calendar IS NULL THEN
        RETURN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM timers.calendars WHERE lower(name) = lower(k.calendar) COLLATE "default") THEN
        RAISE EXCEPTION 'calendar ''%'' does not exist', k.calendar
            USING ERRCODE = 'P0002',
                  HINT = 'Make the calendar again with timers.save_calendar (its edit re-rolls the timer), or move the timer.';
    END IF;
    PERFORM timers._calendar_known(k.calendar, (k.owed_at AT TIME ZONE k.zone)::date);
END
$$;

-- 0009's fire body, now failing a fire whose calendar is gone or unknown there.
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
    EXCEPTION
        WHEN query_canceled THEN
            v_ok := false;
            v_state := SQLSTATE;
            v_error := CASE WHEN SQLERRM LIKE '%statement timeout%'
                            THEN 'timed out: the run took longer than its timeout of 10 minutes'
                            ELSE SQLERRM END;
        WHEN OTHERS THEN
            v_ok := false;
            v_state := SQLSTATE;
            v_error := SQLERRM;
    END;
    RETURN jsonb_build_object('ok', v_ok, 'error', v_error, 'sqlstate', v_state,
        'rows', coalesce(v_rows, 0), 'started_at', v_start,
        'took_ms', timers._ms(clock_timestamp() - v_start));
END
$$;

-- ---------------------------------------------------------------------------
-- The policy re-arm: a changed span re-arms each armed timer from its last activity
-- ---------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION timers._set_policy(p_actor name, p_name text, p_span interval, p_note text)
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
    PERFORM timers._check_policy_name(p_name);
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
    RETURN timers._set_policy(current_user, set_policy.name, set_policy.span, set_policy.note);
END
$$;

CREATE OR REPLACE FUNCTION timers._drop_policy(p_actor name, p_name text) RETURNS jsonb
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
    RETURN timers._drop_policy(current_user, drop_policy.name);
END
$$;

COMMENT ON FUNCTION timers.set_policy(text, interval, text) IS
    'Create a silence policy or change its span; each armed keyed timer of the policy is re-armed at its last activity + the new span (cause policy). Needs pgtimers_admin.';
COMMENT ON FUNCTION timers.drop_policy(text) IS
    'Drop a silence policy no armed or held keyed timer uses. Needs pgtimers_admin.';

-- ---------------------------------------------------------------------------
-- Rights
-- ---------------------------------------------------------------------------
REVOKE ALL ON FUNCTION
    timers._prev_trading_day(text, date), timers._keyed_roll(text, text, text, timestamptz),
    timers._keyed_span_end(timestamptz, interval, text), timers._keyed_span_start(timestamptz, interval, text),
    timers._check_policy_name(text), timers._keyed_policy(text), timers._keyed_check_roll(text, text),
    timers._keyed_rearm(timers.keyed_timers, name, text, text, timestamptz, timestamptz, timestamptz, text, name, text),
    timers._keyed_rearm_at(timers.keyed_timers, name, text, timestamptz, timestamptz),
    timers._arm(name, text, timestamptz, text, integer, timestamptz, text, text, text, text, text, timestamptz, text),
    timers.arm(text, timestamptz, text, integer, timestamptz, text, text, text, text, text, timestamptz, text),
    timers._reroll_keyed(name, text), timers._keyed_calendar_ready(timers.keyed_timers),
    timers._set_policy(name, text, interval, text), timers.set_policy(text, interval, text),
    timers._drop_policy(name, text), timers.drop_policy(text)
    FROM PUBLIC;

GRANT EXECUTE ON FUNCTION
    timers._arm(name, text, timestamptz, text, integer, timestamptz, text, text, text, text, text, timestamptz, text),
    timers.arm(text, timestamptz, text, integer, timestamptz, text, text, text, text, text, timestamptz, text),
    timers._set_policy(name, text, interval, text), timers.set_policy(text, interval, text),
    timers._drop_policy(name, text), timers.drop_policy(text)
    TO pgtimers_admin;
-- the runner's fire checks the calendar (timers._keyed_execute)
GRANT EXECUTE ON FUNCTION timers._keyed_calendar_ready(timers.keyed_timers) TO pgtimers_runner;
