-- pgtimers 0009: keyed occurrence timers (seed 000: "Timers and replay").
--
-- A keyed timer is a one-shot timer named by a key that names the occurrence,
-- never its date: owner:kind:name:occurrence[@n]. It is armed, fired,
-- superseded or held (or void, when its test clock is deleted), re-armed only
-- by a closed list of causes (move, policy, calendar, due, hold/resume,
-- repin), and committed once however often it is woken: the runner fires it
-- in the run's own transaction, and every later wake answers
-- {replayed: true, commit} and does nothing else.
--
-- Tick order: owed_at, then place (1-8), then the key's bytes (COLLATE "C").
-- One fire at a time per clock (the server's, or each test clock), so a
-- timer's effects commit before the next one in tick order starts.
-- docs/keyed.md has the long form.

-- ---------------------------------------------------------------------------
-- Tables
-- ---------------------------------------------------------------------------

CREATE TABLE timers.keyed_timers (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    key           text COLLATE "C" NOT NULL,
    -- the key's parts: the seed's "on" (the job, clock occurrence, subscription...)
    subject       text COLLATE "C" NOT NULL,
    kind          text COLLATE "C" NOT NULL,
    name          text COLLATE "C" NOT NULL,
    occurrence    text COLLATE "C" NOT NULL,
    n             integer CHECK (n >= 0),
    status        text NOT NULL DEFAULT 'armed'
                  CHECK (status IN ('armed', 'fired', 'superseded', 'held', 'void')),
    place         smallint NOT NULL DEFAULT 5 CHECK (place BETWEEN 1 AND 8),
    owed_at       timestamptz,
    armed_at      timestamptz NOT NULL,
    fired_at      timestamptz,
    late_by       interval,
    -- a deadline's late time: a resume never re-arms after it
    late_at       timestamptz,
    attempt       integer NOT NULL DEFAULT 0,
    wakes         integer NOT NULL DEFAULT 0,
    -- the transaction that committed the fire (pg_current_xact_id() of the run)
    commit        xid8,
    superseded_by text COLLATE "C",
    superseded_at timestamptz,
    -- the cause of a supersede (move, policy, calendar, due, repin, catch_up) or a void
    cause         text,
    held_since    timestamptz,
    held_by       text,
    remaining     interval,
    resumed_at    timestamptz,
    sql           text NOT NULL,
    owner         name NOT NULL,
    version       text NOT NULL,
    test_clock    text REFERENCES timers.test_clocks (name) ON DELETE SET NULL,
    -- the run's outcome
    ok            boolean,
    error         text NOT NULL DEFAULT '',
    sqlstate      text NOT NULL DEFAULT '',
    rows          bigint,
    took_ms       bigint,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT keyed_timers_key UNIQUE (key),
    CONSTRAINT keyed_kind CHECK (kind IN ('cycle', 'schedule', 'ask', 'task', 'deadline', 'rung',
                                          'due', 'window', 'money')),
    CONSTRAINT keyed_armed_owes CHECK (status <> 'armed' OR owed_at IS NOT NULL),
    CONSTRAINT keyed_held_owes_nothing CHECK (status <> 'held' OR (owed_at IS NULL AND remaining IS NOT NULL))
);
-- The due sets, in tick order: the server's clock, and each test clock.
CREATE INDEX keyed_due ON timers.keyed_timers (owed_at, place, key)
    WHERE status = 'armed' AND test_clock IS NULL;
CREATE INDEX keyed_due_test_clock ON timers.keyed_timers (test_clock, owed_at, place, key)
    WHERE status = 'armed' AND test_clock IS NOT NULL;
CREATE INDEX keyed_subject ON timers.keyed_timers (subject, kind, occurrence);
-- SQL already checked: arming many timers with one SQL checks it once (the
-- save-time check takes a lock per call, which a bulk arm would run out of).
CREATE INDEX keyed_sql ON timers.keyed_timers (md5(sql));
CREATE INDEX keyed_fired_test_clock ON timers.keyed_timers (test_clock, fired_at)
    WHERE status = 'fired' AND test_clock IS NOT NULL;

-- Every arm, re-arm (with its cause), fire, supersede, hold, resume and void.
CREATE TABLE timers.keyed_events (
    id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    -- the time on the timer's clock (its test clock's, else the server's)
    clock_at  timestamptz,
    key       text COLLATE "C" NOT NULL,
    event     text NOT NULL CHECK (event IN ('armed', 'moved', 'held', 'resumed', 'repinned',
                                             'superseded', 'fired', 'void')),
    cause     text NOT NULL,
    actor     name NOT NULL DEFAULT current_user,
    detail    jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX keyed_events_key ON timers.keyed_events (key, id);

COMMENT ON TABLE timers.keyed_timers IS
    'Keyed occurrence timers (seed 000): read them through view timers.keyed; change them with timers.arm/move/hold/resume/repin.';
COMMENT ON TABLE timers.keyed_events IS
    'One row per arm, re-arm (with its cause), fire, supersede, hold, resume and void of a keyed timer.';

REVOKE ALL ON timers.keyed_timers, timers.keyed_events FROM PUBLIC;
GRANT SELECT ON timers.keyed_events TO pgtimers_reader;
GRANT SELECT, UPDATE ON timers.keyed_timers TO pgtimers_runner;
GRANT SELECT, INSERT ON timers.keyed_events TO pgtimers_runner;

-- ---------------------------------------------------------------------------
-- Keys
-- ---------------------------------------------------------------------------

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
CREATE OR REPLACE FUNCTION timers._parse_key(
    p_key text, OUT subject text, OUT kind text, OUT name text, OUT occurrence text,
    OUT n integer, OUT base text)
    LANGUAGE plpgsql IMMUTABLE
    SET search_path = pg_catalog, pg_temp
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
        RAISE EXCEPTION 'bad key ''%...'': it is % bytes long, and a key is at most 400', left(p_key, 40), octet_length(p_key)
            USING ERRCODE = '22023';
    END IF;
    IF p_key ~ '[[:cntrl:]]' THEN
        RAISE EXCEPTION 'bad key %: it holds a control character (a tab or a line break); %', quote_literal(p_key), v_form
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

-- ---------------------------------------------------------------------------
-- Reading
-- ---------------------------------------------------------------------------

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
       k.updated_at
  FROM timers.keyed_timers k;

COMMENT ON VIEW timers.keyed IS
    'One row per keyed timer with the seed''s fields: key, on, status (armed/fired/superseded/held/void), place, owed_at, armed_at, fired_at, late_by, attempt, wakes, commit, superseded_by, by, held_since, held_by, remaining, resumed_at, late_at, version.';

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

-- VOLATILE: it must see the row the same statement has just written.
CREATE OR REPLACE FUNCTION timers._keyed_row(p_id bigint) RETURNS timers.keyed
    LANGUAGE sql VOLATILE
    SET search_path = pg_catalog, pg_temp
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

-- ---------------------------------------------------------------------------
-- Changing: arm, move, hold, resume, repin
-- ---------------------------------------------------------------------------

-- The caller's role in effect, proven by its ticket (timers._take_ticket, 0004:
-- a direct call naming another role is refused, also from a timer's SQL), and an admin.
CREATE OR REPLACE FUNCTION timers._keyed_check_actor(p_actor name, p_what text) RETURNS void
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM timers._take_ticket(p_actor, p_what);
    IF NOT pg_has_role(p_actor, 'pgtimers_admin', 'MEMBER') THEN
        RAISE EXCEPTION 'permission denied to %: it needs the role pgtimers_admin, and role "%" is not a member', p_what, p_actor
            USING ERRCODE = '42501';
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION timers._keyed_event(
    k timers.keyed_timers, p_event text, p_cause text, p_actor name, p_detail jsonb) RETURNS void
    LANGUAGE sql
    SET search_path = pg_catalog, pg_temp
    AS $$
        INSERT INTO timers.keyed_events (clock_at, key, event, cause, actor, detail)
        VALUES (coalesce(timers._now(k.test_clock), now()), k.key, p_event, p_cause,
                coalesce(p_actor, current_user), coalesce(p_detail, '{}'))
    $$;

-- Lock a keyed timer for a change; one being fired right now is refused, not waited for.
CREATE OR REPLACE FUNCTION timers._keyed_lock(p_key text) RETURNS timers.keyed_timers
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    k timers.keyed_timers;
BEGIN
    BEGIN
        SELECT * INTO k FROM timers.keyed_timers WHERE key = p_key FOR UPDATE NOWAIT;
    EXCEPTION WHEN lock_not_available THEN
        RAISE EXCEPTION 'keyed timer ''%'' is firing; change it when the run has finished', p_key
            USING ERRCODE = '55P03';
    END;
    IF k.id IS NULL THEN
        RAISE EXCEPTION 'there is no keyed timer ''%'' in database %', p_key, current_database()
            USING ERRCODE = 'P0002', HINT = 'Arm it first: SELECT timers.arm(key, owed_at, sql);';
    END IF;
    RETURN k;
END
$$;

-- Refuse a change of a timer that is not in one of the states p_states.
CREATE OR REPLACE FUNCTION timers._keyed_require(k timers.keyed_timers, p_states text[], p_what text) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
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

CREATE OR REPLACE FUNCTION timers._keyed_version(p_sql text, p_version text) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    IF p_version IS NOT NULL AND (p_version = '' OR length(p_version) > 200) THEN
        RAISE EXCEPTION 'bad version ''%'': use 1 to 200 characters, or NULL for the SQL''s md5', left(p_version, 40)
            USING ERRCODE = '22023';
    END IF;
    RETURN coalesce(p_version, 'md5:' || left(md5(p_sql), 12));
END
$$;

-- The save-time check of timers.save (timers._check_sql), skipped for SQL
-- that a keyed timer holds already (it passed the check when it was armed).
CREATE OR REPLACE FUNCTION timers._keyed_check_sql(p_sql text) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    IF p_sql IS NOT NULL AND octet_length(p_sql) <= 65536 AND EXISTS (
        SELECT 1 FROM timers.keyed_timers x WHERE md5(x.sql) = md5(p_sql) AND x.sql = p_sql) THEN
        RETURN;
    END IF;
    PERFORM timers._check_sql(p_sql);
END
$$;

-- Re-arm a locked timer for one of the closed list of causes. With @n in its
-- key it is superseded and its successor @n+1 is armed (returned); without
-- @n it keeps its key and changes in place. p_owed: the new owed time (a held
-- timer stays held); p_sql/p_owner/p_version: the new SQL (repin).
CREATE OR REPLACE FUNCTION timers._keyed_rearm(
    k timers.keyed_timers, p_actor name, p_cause text, p_event text, p_owed timestamptz,
    p_sql text, p_owner name, p_version text) RETURNS bigint
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
        armed_at, late_at, held_since, held_by, remaining, resumed_at, sql, owner, version, test_clock)
    VALUES (v_key, k.subject, k.kind, k.name, k.occurrence, k.n + 1, k.status, k.place,
            CASE WHEN k.status = 'held' THEN NULL ELSE p_owed END, v_now, k.late_at,
            k.held_since, k.held_by, k.remaining, k.resumed_at, p_sql, p_owner, p_version, k.test_clock)
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

CREATE OR REPLACE FUNCTION timers._arm(
    p_actor name, p_key text, p_owed_at timestamptz, p_sql text, p_place integer,
    p_late_at timestamptz, p_test_clock text, p_version text) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    kp record;
    v_id bigint;
    v_now timestamptz;
    v_version text;
    k timers.keyed_timers;
BEGIN
    PERFORM timers._keyed_check_actor(p_actor, 'arm a keyed timer');
    SELECT * INTO kp FROM timers._parse_key(p_key);
    -- A replay arms the same keys: an existing key answers unchanged.
    SELECT x.id INTO v_id FROM timers.keyed_timers x WHERE x.key = p_key;
    IF FOUND THEN
        RETURN v_id;
    END IF;
    IF p_owed_at IS NULL THEN
        RAISE EXCEPTION 'owed_at must be a time, not NULL' USING ERRCODE = '22004';
    END IF;
    IF p_place IS NULL OR p_place NOT BETWEEN 1 AND 8 THEN
        RAISE EXCEPTION 'bad place %: a place in the tick is 1 to 8 (default 5)', coalesce(p_place::text, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    IF p_test_clock IS NOT NULL AND NOT EXISTS (SELECT 1 FROM timers.test_clocks c WHERE c.name = p_test_clock) THEN
        RAISE EXCEPTION 'there is no test clock ''%''; make one with SELECT timers.create_test_clock(%, now())',
            p_test_clock, quote_literal(p_test_clock)
            USING ERRCODE = '22023';
    END IF;
    IF p_late_at IS NOT NULL AND p_late_at < p_owed_at THEN
        RAISE EXCEPTION 'late_at % is before owed_at %: the late time of a deadline comes at or after it',
            timers._iso(p_late_at), timers._iso(p_owed_at)
            USING ERRCODE = '22023';
    END IF;
    PERFORM timers._keyed_check_sql(p_sql);
    v_version := timers._keyed_version(p_sql, p_version);
    v_now := timers._now(p_test_clock);
    PERFORM timers._ensure_executor(p_actor);
    INSERT INTO timers.keyed_timers AS x (key, subject, kind, name, occurrence, n, place, owed_at,
        armed_at, late_at, sql, owner, version, test_clock)
    VALUES (p_key, kp.subject, kp.kind, kp.name, kp.occurrence, kp.n, p_place, p_owed_at, v_now,
            p_late_at, p_sql, p_actor, v_version, p_test_clock)
    ON CONFLICT (key) DO NOTHING
    RETURNING x.* INTO k;
    IF k.id IS NULL THEN
        -- armed by a concurrent call between our look and our insert
        SELECT x.id INTO v_id FROM timers.keyed_timers x WHERE x.key = p_key;
        RETURN v_id;
    END IF;
    PERFORM timers._keyed_event(k, 'armed', 'arm', p_actor, jsonb_build_object(
        'owed_at', timers._iso(p_owed_at), 'place', p_place, 'version', v_version));
    PERFORM timers._audit(p_actor, 'arm', p_key, jsonb_build_object(
        'owed_at', p_owed_at, 'sql', p_sql, 'place', p_place, 'late_at', p_late_at,
        'test_clock', p_test_clock, 'version', v_version));
    PERFORM timers._notify('arm', p_key);
    RETURN k.id;
END
$$;

CREATE OR REPLACE FUNCTION timers.arm(
    key text, owed_at timestamptz, sql text, place integer DEFAULT 5,
    late_at timestamptz DEFAULT NULL, test_clock text DEFAULT NULL, version text DEFAULT NULL)
    RETURNS timers.keyed
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM timers._require_admin('arm a keyed timer');
    RETURN timers._keyed_row(timers._arm(current_user, arm.key, arm.owed_at, arm.sql, arm.place,
                                         arm.late_at, arm.test_clock, arm.version));
END
$$;

CREATE OR REPLACE FUNCTION timers._move(p_actor name, p_key text, p_owed_at timestamptz, p_by text)
    RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    k timers.keyed_timers;
    v_id bigint;
BEGIN
    PERFORM timers._keyed_check_actor(p_actor, 'move a keyed timer');
    IF p_by IS NULL OR NOT p_by = ANY (timers._keyed_move_causes()) THEN
        RAISE EXCEPTION 'bad cause ''%'': a move is recorded as one of % (hold, resume and repin have their own calls)',
            coalesce(p_by, 'NULL'), array_to_string(timers._keyed_move_causes(), ', ')
            USING ERRCODE = '22023';
    END IF;
    IF p_owed_at IS NULL THEN
        RAISE EXCEPTION 'owed_at must be a time, not NULL' USING ERRCODE = '22004';
    END IF;
    k := timers._keyed_lock(p_key);
    PERFORM timers._keyed_require(k, ARRAY['armed'], 'move');
    IF k.owed_at = p_owed_at THEN
        RETURN k.id;
    END IF;
    v_id := timers._keyed_rearm(k, p_actor, p_by, 'moved', p_owed_at, k.sql, k.owner, k.version);
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
    RETURN timers._keyed_row(timers._move(current_user, move.key, move.owed_at, move.by));
END
$$;

CREATE OR REPLACE FUNCTION timers._hold(p_actor name, p_key text, p_held_by text) RETURNS bigint
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
    RETURN timers._keyed_row(timers._hold(current_user, hold.key, hold.held_by));
END
$$;

CREATE OR REPLACE FUNCTION timers._resume(p_actor name, p_key text) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    k timers.keyed_timers;
    v_now timestamptz;
    v_owed timestamptz;
BEGIN
    PERFORM timers._keyed_check_actor(p_actor, 'resume a keyed timer');
    k := timers._keyed_lock(p_key);
    PERFORM timers._keyed_require(k, ARRAY['held'], 'resume');
    v_now := coalesce(timers._now(k.test_clock), now());
    -- the time left is kept, not spent; a deadline never re-arms after its late time
    v_owed := v_now + k.remaining;
    IF k.late_at IS NOT NULL AND k.late_at < v_owed THEN
        v_owed := k.late_at;
    END IF;
    UPDATE timers.keyed_timers
       SET status = 'armed', owed_at = v_owed, resumed_at = v_now, updated_at = now()
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
    RETURN timers._keyed_row(timers._resume(current_user, resume.key));
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
    v_id := timers._keyed_rearm(k, p_actor, 'repin', 'repinned', k.owed_at, p_sql, p_actor, v_version);
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
    RETURN timers._keyed_row(timers._repin(current_user, repin.key, repin.sql, repin.version));
END
$$;

COMMENT ON FUNCTION timers.arm(text, timestamptz, text, integer, timestamptz, text, text) IS
    'Arm a keyed timer (key owner:kind:name:occurrence[@n]) owed at owed_at; it runs sql once, as the role in effect now. An existing key answers unchanged. Needs pgtimers_admin.';
COMMENT ON FUNCTION timers.move(text, timestamptz, text) IS
    'Move an armed keyed timer (by: move, policy, calendar or due): a key with @n is superseded by @n+1, one without keeps its key. Needs pgtimers_admin.';
COMMENT ON FUNCTION timers.hold(text, text) IS
    'Hold an armed keyed timer while it waits on held_by; the time left is kept in remaining. Rungs are never held. Needs pgtimers_admin.';
COMMENT ON FUNCTION timers.resume(text) IS
    'Re-arm a held keyed timer at now + remaining (never after its late_at); a time that passed fires at once. Needs pgtimers_admin.';
COMMENT ON FUNCTION timers.repin(text, text, text) IS
    'Re-arm a keyed timer under new SQL (version: NULL = the SQL''s md5), superseding it with by = repin when its key has @n. Needs pgtimers_admin.';

-- ---------------------------------------------------------------------------
-- Firing (the runner's side)
-- ---------------------------------------------------------------------------

-- Advisory lock class of keyed fires: one per clock at a time, so tick order
-- holds across any number of workers and runners. Key 0: the server's clock.
CREATE OR REPLACE FUNCTION timers._keyed_lock_class() RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT 28777 $$;

CREATE OR REPLACE FUNCTION timers._keyed_lock_key(p_test_clock text) RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    AS $$ SELECT CASE WHEN p_test_clock IS NULL THEN 0 ELSE hashtext(p_test_clock) END $$;

-- Claim the next keyed timer in tick order on a clock whose fire lock this
-- transaction can take (held until commit). No row when nothing is owed.
-- p_skip: ids to leave alone for a while (their fire raised).
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
       AND pg_try_advisory_xact_lock(timers._keyed_lock_class(), timers._keyed_lock_key(NULL)) THEN
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
        CONTINUE WHEN NOT pg_try_advisory_xact_lock(timers._keyed_lock_class(),
                                                    timers._keyed_lock_key(c.name));
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

-- Run a keyed timer's SQL as its owner in a sub-block (a savepoint): an error
-- or the time limit rolls back the SQL's effects only.
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

-- One wake of a keyed timer, in the caller's transaction. Fires it when it is
-- armed and owed (the SQL, then the bookkeeping, committing together); a fired
-- timer answers {replayed: true, commit} and does nothing else. Of several
-- owed rungs of one owner, occurrence and family (the name's first word, e.g.
-- notice), only the latest runs: the earlier ones are superseded (by
-- catch_up); a `run` rung always runs. NULL: not this caller's to fire.
CREATE OR REPLACE FUNCTION timers._fire_keyed(p_id bigint, p_owed_at timestamptz, p_runner text)
    RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    k timers.keyed_timers;
    v_now timestamptz;
    v_latest timers.keyed_timers;
    v_family text;
    v_reason text;
    r jsonb;
    v_fired_at timestamptz;
    v_late interval;
    v_ok boolean;
BEGIN
    SELECT * INTO k FROM timers.keyed_timers WHERE id = p_id FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF k.status = 'fired' THEN
        UPDATE timers.keyed_timers SET wakes = wakes + 1 WHERE id = k.id;
        RETURN jsonb_build_object('timer', k.key, 'replayed', true, 'commit', k.commit::text,
                                  'fired_at', timers._iso(k.fired_at));
    END IF;
    IF k.status <> 'armed' OR k.owed_at IS DISTINCT FROM p_owed_at THEN
        RETURN NULL;
    END IF;
    v_now := timers._now(k.test_clock);
    IF v_now IS NULL OR k.owed_at > v_now THEN
        RETURN NULL;
    END IF;

    v_family := split_part(k.name, ' ', 1);
    IF k.kind = 'rung' AND v_family <> 'run' THEN
        SELECT * INTO v_latest FROM timers.keyed_timers s
         WHERE s.subject = k.subject AND s.kind = 'rung' AND s.occurrence = k.occurrence
           AND split_part(s.name, ' ', 1) = v_family
           AND s.status = 'armed' AND s.test_clock IS NOT DISTINCT FROM k.test_clock
           AND s.owed_at <= v_now
         ORDER BY s.owed_at DESC, s.place DESC, s.key DESC
         LIMIT 1;
        IF v_latest.id IS DISTINCT FROM k.id THEN
            v_reason := format('a later %s rung was owed too: only the latest, %s, runs', v_family, v_latest.key);
            UPDATE timers.keyed_timers
               SET status = 'superseded', superseded_by = v_latest.key, superseded_at = v_now,
                   cause = 'catch_up', wakes = wakes + 1, updated_at = now()
             WHERE id = k.id;
            PERFORM timers._keyed_event(k, 'superseded', 'catch_up', current_user,
                jsonb_build_object('superseded_by', v_latest.key, 'runner', p_runner));
            RETURN jsonb_build_object('timer', k.key, 'kind', 'keyed', 'superseded', true,
                'superseded_by', v_latest.key, 'due_at', timers._iso(k.owed_at),
                'skipped', jsonb_build_array(jsonb_build_object(
                    'timer', k.key, 'count', 1, 'first', timers._iso(k.owed_at),
                    'last', timers._iso(k.owed_at), 'reason', v_reason)));
        END IF;
    END IF;

    r := timers._keyed_execute(k);
    v_ok := (r->>'ok')::boolean;
    v_fired_at := CASE WHEN k.test_clock IS NULL THEN (r->>'started_at')::timestamptz ELSE v_now END;
    -- one armed after its day fires at once and is never late
    v_late := CASE WHEN k.armed_at >= k.owed_at THEN NULL
                   ELSE greatest(v_fired_at - k.owed_at, interval '0') END;
    UPDATE timers.keyed_timers
       SET status = 'fired', fired_at = v_fired_at, late_by = v_late,
           attempt = attempt + 1, wakes = wakes + 1, commit = pg_current_xact_id(),
           ok = v_ok, error = r->>'error', sqlstate = r->>'sqlstate',
           rows = (r->>'rows')::bigint, took_ms = (r->>'took_ms')::bigint, updated_at = now()
     WHERE id = k.id;
    PERFORM timers._keyed_event(k, 'fired', 'wake', current_user, jsonb_build_object(
        'ok', v_ok, 'error', r->>'error', 'runner', p_runner, 'commit', pg_current_xact_id()::text,
        'late_by', v_late::text));
    RETURN jsonb_build_object(
        'timer', k.key, 'kind', 'keyed', 'due_at', timers._iso(k.owed_at), 'ok', v_ok,
        'error', r->>'error', 'sqlstate', r->>'sqlstate', 'rows', (r->>'rows')::bigint,
        'took_ms', (r->>'took_ms')::bigint, 'late_ms', coalesce(timers._ms(v_late), 0),
        'commit', pg_current_xact_id()::text, 'replayed', false);
END
$$;

-- ---------------------------------------------------------------------------
-- The runner's wake-up and test clocks, now with keyed timers
-- (CREATE OR REPLACE of the 0005 functions, same signatures and rights).
-- ---------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION timers._next_wake(OUT db_now timestamptz, OUT wake_at timestamptz)
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
        WITH running AS (
            SELECT l.objid::bigint AS id FROM pg_locks l
             WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
               AND l.classid = timers._running_lock_class()::oid
               AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())),
        -- clocks with a keyed fire running: not now (the fire wakes the runner when done)
        keyed_busy AS (
            SELECT l.objid::bigint AS lock_key FROM pg_locks l
             WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
               AND l.classid = timers._keyed_lock_class()::oid
               AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()))
        SELECT clock_timestamp(), least(
            (SELECT t.next_due_at FROM timers.timers t
              WHERE t.next_due_at IS NOT NULL AND t.test_clock IS NULL
                AND t.id NOT IN (SELECT id FROM running)
              ORDER BY t.next_due_at, t.id LIMIT 1),
            (SELECT now() WHERE EXISTS (
                SELECT 1 FROM timers.timers t JOIN timers.test_clocks c ON c.name = t.test_clock
                 WHERE t.test_clock IS NOT NULL AND t.next_due_at IS NOT NULL AND t.next_due_at <= c.now
                   AND t.id NOT IN (SELECT id FROM running))),
            (SELECT now() WHERE EXISTS (
                SELECT 1 FROM timers.run_requests r
                 WHERE r.finished_at IS NULL AND r.requested_at > now() - interval '5 minutes'
                   AND r.timer_id NOT IN (SELECT id FROM running))),
            (SELECT k.owed_at FROM timers.keyed_timers k
              WHERE k.status = 'armed' AND k.test_clock IS NULL
                AND NOT EXISTS (SELECT 1 FROM keyed_busy b WHERE b.lock_key = timers._keyed_lock_key(NULL))
              ORDER BY k.owed_at, k.place, k.key LIMIT 1),
            (SELECT now() WHERE EXISTS (
                SELECT 1 FROM timers.test_clocks c
                 WHERE NOT EXISTS (SELECT 1 FROM keyed_busy b
                                    WHERE b.lock_key = (timers._keyed_lock_key(c.name)::bigint & 4294967295))
                   AND EXISTS (SELECT 1 FROM timers.keyed_timers k
                                WHERE k.test_clock = c.name AND k.status = 'armed' AND k.owed_at <= c.now))))
    $$;

CREATE OR REPLACE FUNCTION timers._clock_step(p_actor name, p_name text, p_to timestamptz, p_first boolean)
    RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    c timers.test_clocks;
    v_runner boolean := timers._live_runners() > 0;
    v_next timestamptz;
    v_at timestamptz;
    v_owed integer;
BEGIN
    PERFORM timers._take_ticket(p_actor, 'advance a test clock');
    IF NOT pg_has_role(p_actor, 'pgtimers_admin', 'MEMBER') THEN
        RAISE EXCEPTION 'permission denied to advance a test clock: it needs the role pgtimers_admin'
            USING ERRCODE = '42501';
    END IF;
    SELECT * INTO c FROM timers.test_clocks WHERE name = p_name FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM timers._no_such_test_clock(p_name);
    END IF;
    IF p_to IS NULL OR p_to < c.now THEN
        RAISE EXCEPTION 'test_clock_backward: test clock ''%'' is at %, and % is before it; a test clock only moves forward',
            p_name, timers._iso(c.now), coalesce(timers._iso(p_to), 'NULL')
            USING ERRCODE = '22023',
                  HINT = format('Make a new clock there: SELECT timers.create_test_clock(%L, %L);',
                                p_name || '_2', timers._iso(p_to));
    END IF;
    IF p_first THEN
        PERFORM timers._audit(p_actor, 'advance_test_clock', p_name, jsonb_build_object(
            'from', timers._iso(c.now), 'to', timers._iso(p_to), 'runner', v_runner));
    END IF;
    IF v_runner THEN
        v_next := least(
            (SELECT min(t.next_due_at) FROM timers.timers t
              WHERE t.test_clock = c.name AND t.next_due_at IS NOT NULL AND t.next_due_at <= p_to),
            (SELECT min(k.owed_at) FROM timers.keyed_timers k
              WHERE k.test_clock = c.name AND k.status = 'armed' AND k.owed_at <= p_to));
    END IF;
    IF v_next IS NULL THEN
        UPDATE timers.test_clocks SET now = p_to WHERE name = c.name;
        RETURN jsonb_build_object('done', true, 'runner', v_runner, 'now', timers._iso(p_to), 'owed', 0);
    END IF;
    v_at := greatest(v_next, c.now);
    UPDATE timers.test_clocks SET now = v_at WHERE name = c.name;
    v_owed := timers._clock_owed(c.name, v_at);
    PERFORM timers._notify('advance_test_clock', c.name);
    RETURN jsonb_build_object('done', false, 'runner', true, 'at', v_at, 'now', timers._iso(v_at), 'owed', v_owed);
END
$$;

-- How many timers (repeating and keyed) of a clock still owe a due time at or before p_at.
CREATE OR REPLACE FUNCTION timers._clock_owed(p_name text, p_at timestamptz) RETURNS integer
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
        SELECT ((SELECT count(*) FROM timers.timers t
                  WHERE t.test_clock = p_name AND t.next_due_at IS NOT NULL AND t.next_due_at <= p_at)
              + (SELECT count(*) FROM timers.keyed_timers k
                  WHERE k.test_clock = p_name AND k.status = 'armed' AND k.owed_at <= p_at))::integer
    $$;

-- Redeliver: offer every due time fired at p_at once more, and every keyed
-- timer fired then; each must answer that it has run already.
CREATE OR REPLACE FUNCTION timers._clock_redeliver(p_name text, p_at timestamptz) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_id bigint;
    k record;
    r jsonb;
    v_replayed integer := 0;
BEGIN
    FOR v_id IN SELECT t.id FROM timers.timers t WHERE t.test_clock = p_name AND t.last_due_at = p_at LOOP
        IF timers._run_due(v_id, p_at, 'redeliver') IS NULL THEN
            v_replayed := v_replayed + 1;
        ELSE
            RAISE EXCEPTION 'due time % of timer % ran twice', timers._iso(p_at), v_id USING ERRCODE = 'XX000';
        END IF;
    END LOOP;
    FOR k IN
        SELECT x.id, x.key, x.owed_at FROM timers.keyed_timers x
         WHERE x.test_clock = p_name AND x.status = 'fired' AND x.fired_at = p_at
         ORDER BY x.owed_at, x.place, x.key
    LOOP
        r := timers._fire_keyed(k.id, k.owed_at, 'redeliver');
        IF r IS NOT NULL AND (r->>'replayed')::boolean THEN
            v_replayed := v_replayed + 1;
        ELSE
            RAISE EXCEPTION 'keyed timer % fired twice', k.key USING ERRCODE = 'XX000';
        END IF;
    END LOOP;
    RETURN v_replayed;
END
$$;

-- Deleting a clock voids its timers: repeating ones as in 0005, keyed ones
-- still armed or held become void (by test_clock_deleted).
CREATE OR REPLACE FUNCTION timers._delete_test_clock(p_actor name, p_name text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    c timers.test_clocks;
    t timers.timers;
    k timers.keyed_timers;
    v_reason text;
    v_voided integer := 0;
BEGIN
    PERFORM timers._take_ticket(p_actor, 'delete a test clock');
    SELECT * INTO c FROM timers.test_clocks WHERE lower(name) = lower(p_name) FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM timers._no_such_test_clock(p_name);
    END IF;
    v_reason := format('test clock ''%s'' was deleted: the timer is void', c.name);
    FOR t IN SELECT * FROM timers.timers WHERE test_clock = c.name ORDER BY id FOR UPDATE LOOP
        IF t.next_due_at IS NOT NULL THEN
            PERFORM timers._record_skips(t, ARRAY[t.next_due_at], 1, t.next_due_at, t.next_due_at, v_reason, '');
        END IF;
        UPDATE timers.timers SET next_due_at = NULL, catch_up_due_at = NULL, expired = true WHERE id = t.id;
        v_voided := v_voided + 1;
    END LOOP;
    FOR k IN
        SELECT * FROM timers.keyed_timers x
         WHERE x.test_clock = c.name AND x.status IN ('armed', 'held')
         ORDER BY x.owed_at, x.place, x.key
           FOR UPDATE
    LOOP
        UPDATE timers.keyed_timers SET status = 'void', cause = 'test_clock_deleted', updated_at = now()
         WHERE id = k.id;
        PERFORM timers._keyed_event(k, 'void', 'test_clock_deleted', p_actor,
                                    jsonb_build_object('reason', v_reason, 'was', k.status));
        v_voided := v_voided + 1;
    END LOOP;
    DELETE FROM timers.test_clocks WHERE name = c.name;
    PERFORM timers._audit(p_actor, 'delete_test_clock', c.name, jsonb_build_object('voided', v_voided));
    PERFORM timers._notify('delete_test_clock', c.name);
    RETURN jsonb_build_object('deleted', true, 'voided', v_voided);
END
$$;

-- ---------------------------------------------------------------------------
-- Trouble: a keyed timer that fired more than 5 minutes late, is owed more
-- than 5 minutes and not fired, or whose run failed (in the last 24 h).
-- ---------------------------------------------------------------------------

CREATE OR REPLACE VIEW timers.trouble AS
SELECT x.name, x.trouble, x.schedule, x.last_run, x.last_ok, x.last_late_ms, x.failures_24h,
       x.skipped, x.last_error, x.database, x.late_by
  FROM (
    SELECT s.name,
           concat_ws('; ',
               CASE WHEN s.last_ok = false THEN 'last run failed' END,
               CASE WHEN s.failures_24h > 0 THEN s.failures_24h || ' failed in 24 h' END,
               CASE WHEN s.next_run_ms > 0
                     AND s.next_run_ms < (extract(epoch FROM now()) * 1000)::bigint - 60000
                    THEN 'overdue by ' || ((extract(epoch FROM now()) * 1000)::bigint - s.next_run_ms) / 1000
                         || ' s: is a runner up?' END,
               CASE WHEN s.last_late_ms > 5000 THEN 'last run started ' || s.last_late_ms / 1000 || ' s late' END,
               CASE WHEN s.last_skip_ms > (extract(epoch FROM now()) * 1000)::bigint - 86400000
                    THEN 'skipped: ' || s.last_skip_reason END) AS trouble,
           s.schedule,
           CASE WHEN s.last_run_ms = 0 THEN NULL ELSE to_timestamp(s.last_run_ms / 1000.0) END AS last_run,
           s.last_ok,
           s.last_late_ms,
           s.failures_24h,
           s.skipped,
           s.last_error,
           s.database,
           NULL::interval AS late_by
      FROM timers.status s
     WHERE s.last_ok = false
        OR s.failures_24h > 0
        OR (s.next_run_ms > 0 AND s.next_run_ms < (extract(epoch FROM now()) * 1000)::bigint - 60000)
        OR s.last_late_ms > 5000
        OR s.last_skip_ms > (extract(epoch FROM now()) * 1000)::bigint - 86400000
    UNION ALL
    SELECT k.key COLLATE "default",
           concat_ws('; ',
               CASE WHEN k.status = 'fired' AND k.ok = false THEN 'its run failed' END,
               CASE WHEN k.status = 'fired' AND k.late_by > interval '5 minutes'
                    THEN 'fired ' || k.late_by::text || ' late' END,
               CASE WHEN k.status = 'armed' THEN 'owed since ' || timers._iso(k.owed_at)
                    || ' and not fired: is a runner up?' END) COLLATE "default",
           ('keyed ' || k.kind || ' owed ' || coalesce(timers._iso(k.owed_at), '-')) COLLATE "default",
           k.fired_at,
           k.ok,
           coalesce(timers._ms(k.late_by), 0),
           CASE WHEN k.ok = false THEN 1 ELSE 0 END::bigint,
           0::bigint,
           k.error,
           current_database()::text,
           CASE WHEN k.status = 'armed' THEN coalesce(timers._now(k.test_clock), now()) - k.owed_at
                ELSE k.late_by END
      FROM timers.keyed_timers k
     WHERE (k.status = 'fired' AND k.fired_at > coalesce(timers._now(k.test_clock), now()) - interval '24 hours'
            AND (k.ok = false OR k.late_by > interval '5 minutes'))
        OR (k.status = 'armed' AND k.owed_at < coalesce(timers._now(k.test_clock), now()) - interval '5 minutes')
  ) x
 ORDER BY (x.last_ok = false) DESC, x.failures_24h DESC, x.last_late_ms DESC, x.name;

COMMENT ON VIEW timers.trouble IS
    'Timers that need a look, worst first: failed last run, failures in 24 h, overdue (no runner?), late, skipped; and keyed timers (name = key) that failed, fired more than 5 minutes late (late_by), or are owed more than 5 minutes and not fired.';

-- Views that are not automatically updatable (GROUP BY, UNION) get triggers
-- that refuse writes, so that a write is refused by the privilege check
-- (42501) like on every other relation of the schema, and by the trigger for
-- a superuser.
CREATE OR REPLACE FUNCTION timers._read_only_view() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    RAISE EXCEPTION 'view %.% is read-only: change timers through the timers.* functions', TG_TABLE_SCHEMA, TG_TABLE_NAME
        USING ERRCODE = '42501';
END
$$;

CREATE TRIGGER read_only INSTEAD OF INSERT OR UPDATE OR DELETE ON timers.keyed_owners
    FOR EACH ROW EXECUTE FUNCTION timers._read_only_view();
CREATE TRIGGER read_only INSTEAD OF INSERT OR UPDATE OR DELETE ON timers.trouble
    FOR EACH ROW EXECUTE FUNCTION timers._read_only_view();

-- ---------------------------------------------------------------------------
-- Rights
-- ---------------------------------------------------------------------------
REVOKE ALL ON FUNCTION timers._read_only_view() FROM PUBLIC;
REVOKE ALL ON FUNCTION
    timers._parse_key(text), timers._keyed_row(bigint), timers._keyed_check_sql(text),
    timers._keyed_check_actor(name, text),
    timers._keyed_event(timers.keyed_timers, text, text, name, jsonb),
    timers._keyed_lock(text), timers._keyed_require(timers.keyed_timers, text[], text),
    timers._keyed_version(text, text),
    timers._keyed_rearm(timers.keyed_timers, name, text, text, timestamptz, text, name, text),
    timers._arm(name, text, timestamptz, text, integer, timestamptz, text, text),
    timers._move(name, text, timestamptz, text), timers._hold(name, text, text),
    timers._resume(name, text), timers._repin(name, text, text, text),
    timers.arm(text, timestamptz, text, integer, timestamptz, text, text),
    timers.move(text, timestamptz, text), timers.hold(text, text), timers.resume(text),
    timers.repin(text, text, text), timers.list_keyed(text, text, text),
    timers._claim_keyed(bigint[]),
    timers._keyed_execute(timers.keyed_timers), timers._fire_keyed(bigint, timestamptz, text)
    FROM PUBLIC;

GRANT EXECUTE ON FUNCTION
    timers._arm(name, text, timestamptz, text, integer, timestamptz, text, text),
    timers._move(name, text, timestamptz, text), timers._hold(name, text, text),
    timers._resume(name, text), timers._repin(name, text, text, text),
    timers.arm(text, timestamptz, text, integer, timestamptz, text, text),
    timers.move(text, timestamptz, text), timers.hold(text, text), timers.resume(text),
    timers.repin(text, text, text), timers._keyed_row(bigint)
    TO pgtimers_admin;
GRANT EXECUTE ON FUNCTION timers.list_keyed(text, text, text), timers._parse_key(text)
    TO pgtimers_reader;
GRANT EXECUTE ON FUNCTION
    timers._claim_keyed(bigint[]),
    timers._keyed_execute(timers.keyed_timers), timers._fire_keyed(bigint, timestamptz, text),
    timers._keyed_event(timers.keyed_timers, text, text, name, jsonb)
    TO pgtimers_runner;
GRANT SELECT ON timers.keyed, timers.keyed_owners TO pgtimers_reader, pgtimers_runner;
GRANT SELECT ON timers.trouble TO pgtimers_reader;
