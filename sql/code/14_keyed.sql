-- pgtimers code: keyed occurrence timers: keys, arm, move, hold, resume, repin, fire.
--
-- Repeatable: applied whole on every install and upgrade, after the versioned
-- migrations (docs/design.md). Each object here is defined in this file only.

-- The kinds a key may name (its second part).
CREATE OR REPLACE FUNCTION timers._keyed_kinds() RETURNS text[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT ARRAY['cycle', 'schedule', 'ask', 'task', 'deadline', 'rung', 'due', 'window', 'money'] $$;

-- The causes move may give (the closed list of date re-arms; hold, resume and
-- repin have their own calls).
CREATE OR REPLACE FUNCTION timers._keyed_move_causes() RETURNS text[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT ARRAY['move', 'policy', 'calendar', 'due'] $$;

-- Parse and check a key: owner:kind:name:occurrence[@n]. Raises 22023 naming
-- the bad part. base is the key without @n.
CREATE OR REPLACE FUNCTION timers._keyed_parse_key(
    p_key text, OUT subject text, OUT kind text, OUT name text, OUT occurrence text,
    OUT n integer, OUT base text)
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    v_form constant text := 'a key is owner:kind:name:occurrence[@n], e.g. job_4Tx9:deadline:at_risk:2027 or clk_8Tx1#US:rung:notice 90d:2027@0';
    v_parts text[];
    v_part text;
    v_label text;
    i integer;
BEGIN
    IF p_key IS NULL OR p_key = '' THEN
        RAISE EXCEPTION 'bad key: it is empty; %', v_form USING ERRCODE = '22023';
    END IF;
    IF octet_length(p_key) > 400 THEN
        RAISE EXCEPTION 'bad key %: it is % bytes long, and a key is at most 400', timers._quoted(p_key, 40), octet_length(p_key)
            USING ERRCODE = '22023';
    END IF;
    IF p_key ~ '[[:cntrl:]]' THEN
        RAISE EXCEPTION 'bad key %: it holds a control character (a tab or a line break); %', timers._quoted(p_key), v_form
            USING ERRCODE = '22023';
    END IF;
    v_parts := string_to_array(p_key, ':');
    IF cardinality(v_parts) <> 4 THEN
        RAISE EXCEPTION 'bad key ''%'': it has % parts separated by '':'', not 4; %', p_key, cardinality(v_parts), v_form
            USING ERRCODE = '22023';
    END IF;
    -- the move count, on the last part only
    IF v_parts[4] ~ '@' THEN
        v_part := substring(v_parts[4] FROM '@([^@]*)$');
        IF v_part !~ '^(0|[1-9][0-9]{0,8})$' THEN
            RAISE EXCEPTION 'bad key ''%'': the move count ''@%'' is not a number of moves (@0, @1, ...); %', p_key, v_part, v_form
                USING ERRCODE = '22023';
        END IF;
        n := v_part::integer;
        v_parts[4] := left(v_parts[4], length(v_parts[4]) - length(v_part) - 1);
    END IF;
    FOR i IN 1..4 LOOP
        v_label := (ARRAY['owner', 'kind', 'name', 'occurrence'])[i];
        v_part := v_parts[i];
        IF v_part = '' THEN
            RAISE EXCEPTION 'bad key ''%'': the % is empty; %', p_key, v_label, v_form USING ERRCODE = '22023';
        END IF;
        IF v_part <> btrim(v_part) THEN
            RAISE EXCEPTION 'bad key ''%'': the % ''%'' starts or ends with a space', p_key, v_label, v_part
                USING ERRCODE = '22023';
        END IF;
        IF v_part ~ '@' THEN
            RAISE EXCEPTION 'bad key ''%'': the % ''%'' holds ''@'', which only ends a key (@n, the move count)', p_key, v_label, v_part
                USING ERRCODE = '22023';
        END IF;
    END LOOP;
    IF NOT v_parts[2] = ANY (timers._keyed_kinds()) THEN
        RAISE EXCEPTION 'bad key ''%'': the kind ''%'' is not one of %', p_key, v_parts[2],
            array_to_string(timers._keyed_kinds(), ', ')
            USING ERRCODE = '22023';
    END IF;
    subject := v_parts[1];
    kind := v_parts[2];
    name := v_parts[3];
    occurrence := v_parts[4];
    base := array_to_string(v_parts, ':');
END
$$;

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
       coalesce(pg_get_userbyid((SELECT p.proowner FROM pg_proc p WHERE p.pronamespace = 'timers_exec'::regnamespace AND p.proname = k.executor)), k.owner)::text AS owner,
       -- a timer's SQL may hold secrets: readers see it for their own timers only (as timers.status)
       CASE WHEN pg_has_role(current_user, timers._role('admin'), 'MEMBER')
              OR pg_has_role(current_user, (SELECT p.proowner FROM pg_proc p WHERE p.pronamespace = 'timers_exec'::regnamespace AND p.proname = k.executor), 'MEMBER')
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

-- Each owner ("on") with its counts and its next timer in tick order.
CREATE OR REPLACE VIEW timers.keyed_owners AS
SELECT k.subject AS "on",
       count(*) FILTER (WHERE k.status = 'armed') AS armed,
       count(*) FILTER (WHERE k.status = 'held') AS held,
       count(*) FILTER (WHERE k.status = 'fired') AS fired,
       count(*) FILTER (WHERE k.status = 'superseded') AS superseded,
       (SELECT x.key FROM timers.keyed_timers x
         WHERE x.subject = k.subject AND x.status = 'armed'
         ORDER BY x.owed_at, x.place, x.key LIMIT 1) AS next_timer,
       min(k.owed_at) FILTER (WHERE k.status = 'armed') AS next_owed_at
  FROM timers.keyed_timers k
 GROUP BY k.subject;

COMMENT ON VIEW timers.keyed_owners IS
    'Each owner of keyed timers (the key''s first part) with its counts and next_timer, the next armed one in tick order.';

CREATE OR REPLACE TRIGGER read_only INSTEAD OF INSERT OR UPDATE OR DELETE ON timers.keyed_owners
    FOR EACH ROW EXECUTE FUNCTION timers._read_only_view();

-- VOLATILE: it must see the row the same statement has just written.
CREATE OR REPLACE FUNCTION timers._keyed_row(p_id bigint) RETURNS timers.keyed
    LANGUAGE sql VOLATILE
    AS $$ SELECT k.* FROM timers.keyed k WHERE k.id = p_id $$;

CREATE OR REPLACE FUNCTION timers.list_keyed("on" text DEFAULT NULL, status text DEFAULT NULL,
                                             test_clock text DEFAULT NULL)
    RETURNS SETOF timers.keyed
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
        SELECT k.* FROM timers.keyed k
         WHERE ($1 IS NULL OR k."on" = $1)
           AND ($2 IS NULL OR k.status = $2)
           AND ($3 IS NULL OR k.test_clock = $3)
         ORDER BY k.owed_at NULLS LAST, k.place, k.key
    $$;

COMMENT ON FUNCTION timers.list_keyed(text, text, text) IS
    'Keyed timers of one owner (the key''s first part; NULL: all), of one status and one test clock, in tick order.';

-- The caller's role in effect, proven by its ticket (timers._take_ticket:
-- a direct call naming another role is refused, also from a timer's SQL), and an admin.
CREATE OR REPLACE FUNCTION timers._keyed_check_actor(p_actor name, p_what text) RETURNS void
    LANGUAGE plpgsql VOLATILE
    AS $$
BEGIN
    PERFORM timers._take_ticket(p_actor, p_what);
    IF NOT pg_has_role(p_actor, timers._role('admin'), 'MEMBER') THEN
        RAISE EXCEPTION 'permission denied to %: it needs the role %, and role "%" is not a member', p_what,
            timers._role('admin'), p_actor
            USING ERRCODE = '42501';
    END IF;
END
$$;

-- One row of timers.keyed_events for keyed timer k.
CREATE OR REPLACE FUNCTION timers._keyed_event(
    k timers.keyed_timers, p_event text, p_cause text, p_actor name, p_detail jsonb) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    INSERT INTO timers.keyed_events (clock_at, key, event, cause, actor, detail)
    VALUES (coalesce(timers._now(k.test_clock), now()), k.key, p_event, p_cause,
            coalesce(p_actor, current_user), coalesce(p_detail, '{}'));
END
$$;

-- Lock a keyed timer for a change; one being fired right now is refused, not waited for.
CREATE OR REPLACE FUNCTION timers._keyed_lock(p_key text) RETURNS timers.keyed_timers
    LANGUAGE plpgsql
    AS $$
DECLARE
    k timers.keyed_timers;
BEGIN
    BEGIN
        SELECT * INTO k FROM timers.keyed_timers WHERE key = p_key FOR UPDATE NOWAIT;
    EXCEPTION WHEN lock_not_available THEN
        RAISE EXCEPTION 'keyed timer % is firing; change it when the run has finished', timers._quoted(p_key, 400)
            USING ERRCODE = '55P03';
    END;
    IF k.id IS NULL THEN
        RAISE EXCEPTION 'there is no keyed timer % in database %', timers._quoted(p_key, 400), current_database()
            USING ERRCODE = 'P0002', HINT = 'Arm it first: SELECT timers.arm(key, owed_at, sql);';
    END IF;
    RETURN k;
END
$$;

-- Refuse a change of a timer that is not in one of the states p_states.
CREATE OR REPLACE FUNCTION timers._keyed_require(k timers.keyed_timers, p_states text[], p_what text) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF k.status = ANY (p_states) THEN
        RETURN;
    END IF;
    IF k.status = 'fired' THEN
        RAISE EXCEPTION 'cannot % keyed timer ''%'': it fired at % (commit %); a fired timer is done', p_what, k.key,
            timers._iso(k.fired_at), k.commit
            USING ERRCODE = '55000';
    ELSIF k.status = 'superseded' THEN
        RAISE EXCEPTION 'cannot % keyed timer ''%'': it was superseded by ''%'' (by %)', p_what, k.key,
            coalesce(k.superseded_by, '-'), k.cause
            USING ERRCODE = '55000',
                  HINT = CASE WHEN k.superseded_by IS NOT NULL THEN format('Change %L instead.', k.superseded_by) END;
    ELSIF k.status = 'void' THEN
        RAISE EXCEPTION 'cannot % keyed timer ''%'': it is void (%)', p_what, k.key, k.cause
            USING ERRCODE = '55000';
    ELSIF k.status = 'held' THEN
        RAISE EXCEPTION 'cannot % keyed timer ''%'': it is held by % since %', p_what, k.key, k.held_by,
            timers._iso(k.held_since)
            USING ERRCODE = '55000', HINT = format('Resume it first: SELECT timers.resume(%L);', k.key);
    ELSE
        RAISE EXCEPTION 'cannot % keyed timer ''%'': it is %', p_what, k.key, k.status USING ERRCODE = '55000';
    END IF;
END
$$;

-- A keyed timer's version: the given one (1-200 characters), else the SQL's md5.
CREATE OR REPLACE FUNCTION timers._keyed_version(p_sql text, p_version text) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF p_version IS NOT NULL AND (p_version = '' OR length(p_version) > 200) THEN
        RAISE EXCEPTION 'bad version %: use 1 to 200 characters, or NULL for the SQL''s md5', timers._quoted(p_version, 40)
            USING ERRCODE = '22023';
    END IF;
    RETURN coalesce(p_version, 'md5:' || left(md5(p_sql), 12));
END
$$;

-- The save-time check of timers.save (timers._check_sql), skipped for SQL
-- that a keyed timer holds already (it passed the check when it was armed).
CREATE OR REPLACE FUNCTION timers._keyed_check_sql(p_sql text) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF p_sql IS NOT NULL AND octet_length(p_sql) <= 65536 AND EXISTS (
        SELECT 1 FROM timers.keyed_timers x WHERE md5(x.sql) = md5(p_sql) AND x.sql = p_sql) THEN
        RETURN;
    END IF;
    PERFORM timers._check_sql(p_sql, false);
END
$$;

-- Re-arm a locked timer for one of the closed list of causes. With @n in its
-- key it is superseded and its successor @n+1 is armed (returned); without
-- @n it keeps its key and changes in place (armed again now). p_owed: the new
-- owed time (a held timer stays held); p_nominal/p_since: the date before the
-- roll and the last activity; p_sql/p_owner/p_version: the new SQL (repin).
CREATE OR REPLACE FUNCTION timers._keyed_rearm(
    k timers.keyed_timers, p_actor name, p_cause text, p_event text, p_owed timestamptz,
    p_nominal timestamptz, p_since timestamptz, p_sql text, p_owner name, p_version text,
    p_executor text) RETURNS bigint
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
               sql = p_sql, owner = p_owner, executor = p_executor, version = p_version,
               updated_at = now()
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
        armed_at, late_at, held_since, held_by, remaining, resumed_at, sql, owner, executor, version,
        test_clock, nominal_at, calendar, roll, zone, policy, since)
    VALUES (v_key, k.subject, k.kind, k.name, k.occurrence, k.n + 1, k.status, k.place,
            CASE WHEN k.status = 'held' THEN NULL ELSE p_owed END, v_now, k.late_at,
            k.held_since, k.held_by, k.remaining, k.resumed_at, p_sql, p_owner, p_executor, p_version,
            k.test_clock,
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

-- The checks of timers.arm's arguments that need no calendar: the zone, the date it is
-- owed at (owed_at, or since + the policy's span), the place and the test clock; 22023
-- or 22004 naming the bad one.
CREATE OR REPLACE FUNCTION timers._keyed_arm_args(
    p_owed_at timestamptz, p_place integer, p_test_clock text, p_policy text,
    p_since timestamptz, p_zone text,
    OUT zone text, OUT nominal timestamptz, OUT policy timers.keyed_policies)
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    PERFORM timers._check_time('since', p_since);
    zone := timers._check_zone(coalesce(p_zone, 'UTC'));
    nominal := p_owed_at;
    IF p_policy IS NOT NULL THEN
        policy := timers._keyed_policy(timers._keyed_check_policy_name(p_policy));
        IF p_since IS NULL THEN
            RAISE EXCEPTION 'since must be the time of the last activity, which policy % counts its span from',
                quote_literal(policy.name) USING ERRCODE = '22004';
        END IF;
        IF p_owed_at IS NOT NULL THEN
            RAISE EXCEPTION 'give owed_at or a policy, not both: with policy % the timer is owed at since + %',
                quote_literal(policy.name), policy.span USING ERRCODE = '22023';
        END IF;
        nominal := timers._keyed_span_end(p_since, policy.span, zone);
    ELSIF p_since IS NOT NULL THEN
        RAISE EXCEPTION 'since is the last activity of a policy timer: give policy too, or leave since out'
            USING ERRCODE = '22023';
    END IF;
    IF nominal IS NULL THEN
        RAISE EXCEPTION 'owed_at must be a time, not NULL' USING ERRCODE = '22004';
    END IF;
    PERFORM timers._check_time(CASE WHEN p_policy IS NULL THEN 'owed_at' ELSE 'since + span' END, nominal);
    IF p_place IS NULL OR p_place NOT BETWEEN 1 AND 8 THEN
        RAISE EXCEPTION 'bad place %: a place in the tick is 1 to 8 (default 5)', coalesce(p_place::text, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    IF p_test_clock IS NOT NULL AND NOT EXISTS (SELECT 1 FROM timers.test_clocks c WHERE c.name = p_test_clock) THEN
        RAISE EXCEPTION 'there is no test clock %; make one with SELECT timers.create_test_clock(%, now())',
            timers._quoted(p_test_clock), timers._quoted(p_test_clock)
            USING ERRCODE = '22023';
    END IF;
END
$$;

-- The body of timers.arm (p_actor proven by its ticket).
CREATE OR REPLACE FUNCTION timers._keyed_arm(
    p_actor name, p_key text, p_owed_at timestamptz, p_sql text, p_place integer,
    p_late_at timestamptz, p_test_clock text, p_version text, p_calendar text, p_roll text,
    p_policy text, p_since timestamptz, p_zone text) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_executor text;
    kp record;
    v_id bigint;
    v_now timestamptz;
    v_version text;
    v_zone text;
    v_calendar text;
    v_policy timers.keyed_policies;
    v_nominal timestamptz;
    v_owed timestamptz;
    a record;
    k timers.keyed_timers;
BEGIN
    PERFORM timers._keyed_check_actor(p_actor, 'arm a keyed timer');
    SELECT * INTO kp FROM timers._keyed_parse_key(p_key);
    -- A replay arms the same keys: an existing key answers unchanged.
    SELECT x.id INTO v_id FROM timers.keyed_timers x WHERE x.key = p_key;
    IF FOUND THEN
        RETURN v_id;
    END IF;
    a := timers._keyed_arm_args(p_owed_at, p_place, p_test_clock, p_policy, p_since, p_zone);
    v_zone := a.zone;
    v_nominal := a.nominal;
    v_policy := a.policy;
    v_calendar := timers._keyed_check_roll(p_calendar, p_roll);
    v_owed := timers._keyed_roll(v_calendar, p_roll, v_zone, v_nominal);
    PERFORM timers._check_time('late_at', p_late_at);
    IF p_late_at IS NOT NULL AND p_late_at < v_owed THEN
        RAISE EXCEPTION 'late_at % is before owed_at %: the late time of a deadline comes at or after it',
            timers._iso(p_late_at), timers._iso(v_owed)
            USING ERRCODE = '22023';
    END IF;
    PERFORM timers._keyed_check_sql(p_sql);
    v_version := timers._keyed_version(p_sql, p_version);
    v_now := timers._now(p_test_clock);
    v_executor := timers._ensure_executor(p_actor);
    INSERT INTO timers.keyed_timers AS x (key, subject, kind, name, occurrence, n, place, owed_at,
        armed_at, late_at, sql, owner, executor, version, test_clock, nominal_at, calendar, roll, zone,
        policy, since)
    VALUES (p_key, kp.subject, kp.kind, kp.name, kp.occurrence, kp.n, p_place, v_owed, v_now,
            p_late_at, p_sql, p_actor, v_executor, v_version, p_test_clock, v_nominal, v_calendar,
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
    RETURN timers._keyed_row(timers._keyed_arm(current_user, arm.key, arm.owed_at, arm.sql, arm.place,
                                         arm.late_at, arm.test_clock, arm.version, arm.calendar,
                                         arm.roll, arm.policy, arm.since, arm.zone));
END
$$;

COMMENT ON FUNCTION timers.arm(text, timestamptz, text, integer, timestamptz, text, text, text, text, text, timestamptz, text) IS
    'Arm a keyed timer (key owner:kind:name:occurrence[@n]) owed at owed_at (rolled onto calendar''s open days; or since + policy''s span); it runs sql once, as the role in effect now. An existing key answers unchanged. Needs pgtimers_admin.';

-- A move sets the nominal time; a calendar rolls it, and a policy timer's last
-- activity moves with it (owed_at - span).
CREATE OR REPLACE FUNCTION timers._keyed_move(p_actor name, p_key text, p_owed_at timestamptz, p_by text)
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
            timers._quoted(p_by), array_to_string(timers._keyed_move_causes(), ', ')
            USING ERRCODE = '22023';
    END IF;
    IF p_owed_at IS NULL THEN
        RAISE EXCEPTION 'owed_at must be a time, not NULL' USING ERRCODE = '22004';
    END IF;
    PERFORM timers._check_time('owed_at', p_owed_at);
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

CREATE OR REPLACE FUNCTION timers.move(key text, owed_at timestamptz, by text DEFAULT 'move')
    RETURNS timers.keyed
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM timers._require_admin('move a keyed timer');
    RETURN timers._keyed_row(timers._keyed_move(current_user, move.key, move.owed_at, move.by));
END
$$;

COMMENT ON FUNCTION timers.move(text, timestamptz, text) IS
    'Move an armed keyed timer (by: move, policy, calendar or due): a key with @n is superseded by @n+1, one without keeps its key. Needs pgtimers_admin.';

-- The body of timers.hold.
CREATE OR REPLACE FUNCTION timers._keyed_hold(p_actor name, p_key text, p_held_by text) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    k timers.keyed_timers;
    v_now timestamptz;
    v_remaining interval;
BEGIN
    PERFORM timers._keyed_check_actor(p_actor, 'hold a keyed timer');
    IF p_held_by IS NULL OR btrim(p_held_by) = '' THEN
        RAISE EXCEPTION 'held_by must name what the timer waits on (a party, an ask), not be empty'
            USING ERRCODE = '22023';
    END IF;
    k := timers._keyed_lock(p_key);
    IF k.status = 'held' AND k.held_by = p_held_by THEN
        RETURN k.id;
    END IF;
    PERFORM timers._keyed_require(k, ARRAY['armed'], 'hold');
    IF k.kind = 'rung' THEN
        RAISE EXCEPTION 'cannot hold keyed timer ''%'': a rung follows a date the world sets, and such a date never waits', k.key
            USING ERRCODE = '55000';
    END IF;
    v_now := coalesce(timers._now(k.test_clock), now());
    v_remaining := greatest(k.owed_at - v_now, interval '0');
    UPDATE timers.keyed_timers
       SET status = 'held', owed_at = NULL, held_since = v_now, held_by = p_held_by,
           remaining = v_remaining, resumed_at = NULL, updated_at = now()
     WHERE id = k.id;
    PERFORM timers._keyed_event(k, 'held', 'hold', p_actor, jsonb_build_object(
        'held_by', p_held_by, 'owed_at', timers._iso(k.owed_at), 'remaining', v_remaining::text));
    PERFORM timers._audit(p_actor, 'hold', k.key, jsonb_build_object('held_by', p_held_by, 'remaining', v_remaining));
    PERFORM timers._notify('hold', k.key);
    RETURN k.id;
END
$$;

CREATE OR REPLACE FUNCTION timers.hold(key text, held_by text) RETURNS timers.keyed
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM timers._require_admin('hold a keyed timer');
    RETURN timers._keyed_row(timers._keyed_hold(current_user, hold.key, hold.held_by));
END
$$;

COMMENT ON FUNCTION timers.hold(text, text) IS
    'Hold an armed keyed timer while it waits on held_by; the time left is kept in remaining. Rungs are never held. Needs pgtimers_admin.';

-- The body of timers.resume.
CREATE OR REPLACE FUNCTION timers._keyed_resume(p_actor name, p_key text) RETURNS bigint
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

CREATE OR REPLACE FUNCTION timers.resume(key text) RETURNS timers.keyed
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM timers._require_admin('resume a keyed timer');
    RETURN timers._keyed_row(timers._keyed_resume(current_user, resume.key));
END
$$;

COMMENT ON FUNCTION timers.resume(text) IS
    'Re-arm a held keyed timer at now + remaining (never after its late_at); a time that passed fires at once. Needs pgtimers_admin.';

-- The body of timers.repin.
CREATE OR REPLACE FUNCTION timers._keyed_repin(p_actor name, p_key text, p_sql text, p_version text)
    RETURNS bigint
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
    v_id := timers._keyed_rearm(k, p_actor, 'repin', 'repinned', k.owed_at, k.nominal_at, k.since,
                                p_sql, p_actor, v_version, timers._ensure_executor(p_actor));
    PERFORM timers._audit(p_actor, 'repin', k.key, jsonb_build_object(
        'sql', p_sql, 'version', v_version, 'from_version', k.version, 'id', v_id));
    PERFORM timers._notify('repin', k.key);
    RETURN v_id;
END
$$;

CREATE OR REPLACE FUNCTION timers.repin(key text, sql text, version text DEFAULT NULL) RETURNS timers.keyed
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM timers._require_admin('repin a keyed timer');
    RETURN timers._keyed_row(timers._keyed_repin(current_user, repin.key, repin.sql, repin.version));
END
$$;

COMMENT ON FUNCTION timers.repin(text, text, text) IS
    'Re-arm a keyed timer under new SQL (version: NULL = the SQL''s md5), superseding it with by = repin when its key has @n. Needs pgtimers_admin.';

-- ---------------------------------------------------------------------------
-- Rights
-- ---------------------------------------------------------------------------
REVOKE ALL ON FUNCTION
    timers._keyed_arm_args(timestamptz,integer,text,text,timestamptz,text),
    timers._keyed_kinds(),
    timers._keyed_move_causes(),
    timers._keyed_parse_key(text),
    timers._keyed_row(bigint),
    timers.list_keyed(text,text,text),
    timers._keyed_check_actor(name,text),
    timers._keyed_event(timers.keyed_timers,text,text,name,jsonb),
    timers._keyed_lock(text),
    timers._keyed_require(timers.keyed_timers,text[],text),
    timers._keyed_version(text,text),
    timers._keyed_check_sql(text),
    timers._keyed_rearm(timers.keyed_timers,name,text,text,timestamp with time zone,timestamp with time zone,timestamp with time zone,text,name,text,text),
    timers._keyed_arm(name,text,timestamp with time zone,text,integer,timestamp with time zone,text,text,text,text,text,timestamp with time zone,text),
    timers.arm(text,timestamp with time zone,text,integer,timestamp with time zone,text,text,text,text,text,timestamp with time zone,text),
    timers._keyed_move(name,text,timestamp with time zone,text),
    timers.move(text,timestamp with time zone,text),
    timers._keyed_hold(name,text,text),
    timers.hold(text,text),
    timers._keyed_resume(name,text),
    timers.resume(text),
    timers._keyed_repin(name,text,text,text),
    timers.repin(text,text,text)
    FROM PUBLIC, pgtimers_reader, pgtimers_admin, pgtimers_runner;
GRANT EXECUTE ON FUNCTION
    timers._keyed_kinds(),
    timers._keyed_move_causes()
    TO PUBLIC;
GRANT EXECUTE ON FUNCTION
    timers._keyed_parse_key(text),
    timers.list_keyed(text,text,text)
    TO pgtimers_reader;
GRANT EXECUTE ON FUNCTION
    timers._keyed_row(bigint),
    timers._keyed_arm(name,text,timestamp with time zone,text,integer,timestamp with time zone,text,text,text,text,text,timestamp with time zone,text),
    timers.arm(text,timestamp with time zone,text,integer,timestamp with time zone,text,text,text,text,text,timestamp with time zone,text),
    timers._keyed_move(name,text,timestamp with time zone,text),
    timers.move(text,timestamp with time zone,text),
    timers._keyed_hold(name,text,text),
    timers.hold(text,text),
    timers._keyed_resume(name,text),
    timers.resume(text),
    timers._keyed_repin(name,text,text,text),
    timers.repin(text,text,text)
    TO pgtimers_admin;
GRANT EXECUTE ON FUNCTION
    timers._keyed_event(timers.keyed_timers,text,text,name,jsonb)
    TO pgtimers_runner;
REVOKE ALL ON timers.keyed FROM PUBLIC, pgtimers_reader, pgtimers_admin, pgtimers_runner;
GRANT SELECT ON timers.keyed TO pgtimers_reader, pgtimers_runner;
REVOKE ALL ON timers.keyed_owners FROM PUBLIC, pgtimers_reader, pgtimers_admin, pgtimers_runner;
GRANT SELECT ON timers.keyed_owners TO pgtimers_reader, pgtimers_runner;
