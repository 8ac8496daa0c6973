-- pgtimers 0012: hardening.
--
-- 1. Names in messages. A name (or short text) given by a caller is shown the way
--    timers._check_name always showed it: quoted as a literal, control characters
--    made visible as '?', cut short (timers._shown). Before, the calendar, test
--    clock, policy, key, version and cause messages and the "there is no ..."
--    lookups echoed them raw (a newline or an ESC sequence forges log lines or
--    drives a terminal).
-- 2. The save-time check of a timer's SQL (timers._check_sql) reads more than
--    statement heads: DEALLOCATE, EXECUTE (of a prepared statement) and DECLARE
--    ... WITH HOLD are refused; a call of dblink's connecting functions anywhere
--    in the code is refused; and the bodies of DO blocks and of routines the SQL
--    creates are read too (PREPARE, DEALLOCATE, dblink calls, nested blocks):
--    timers._sql_scan. timers._exec_as checks the session part of that (PREPARE,
--    DEALLOCATE, EXECUTE) before each run, so SQL saved before this check is
--    refused too, and after each run it refuses (and drops) statements prepared
--    by dynamic SQL, which no check of the text can see.
-- 3. The runner's role runs saved SQL only: timers._exec_as becomes SECURITY
--    DEFINER and runs only the saved SQL of a timer or keyed timer of the role it
--    names; the executors are no longer granted to the runner's role, nor is
--    USAGE on schema timers_exec.
-- 4. The runner's role may update only the bookkeeping columns of the tables it
--    writes (results, counters, due times, request answers), never a timer's
--    owner, SQL, name or schedule, nor a keyed timer's owner, SQL, key or version,
--    nor a test clock.
-- 5. A timer runs only as the role that saved it, also after a rename: each
--    timer keeps its owner's oid, and timers._exec_as checks it.
--
-- CREATE OR REPLACE keeps each replaced function's signature and rights.

-- ---------------------------------------------------------------------------
-- 1. Names in messages
-- ---------------------------------------------------------------------------

-- 0003: the same rule and message, through the shared helper (timers._shown, sql/0010_keyed_rearm.sql).
CREATE OR REPLACE FUNCTION timers._check_name(name text)
RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF name ~ '^[A-Za-z0-9_-]{1,64}$' THEN
        RETURN name;
    END IF;
    RAISE EXCEPTION USING
        ERRCODE = 'invalid_parameter_value',
        MESSAGE = format('bad timer name %s%s: use 1 to 64 letters, digits, "_" and "-"',
                         timers._shown(name),
                         CASE WHEN length(name) > 64 THEN format(' (%s characters)', length(name)) END);
END
$fn$;

-- 0004
CREATE OR REPLACE FUNCTION timers._no_such_timer(p_name text) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    RAISE EXCEPTION 'there is no timer % in database %', timers._shown(p_name), current_database()
        USING ERRCODE = 'P0002';
END
$$;

-- 0004
CREATE OR REPLACE FUNCTION timers._check_options(
    p_catch_up text, p_start_at timestamptz, p_end_at timestamptz,
    p_max_runs bigint, p_timeout interval, p_test_clock text) RETURNS void
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    IF p_catch_up IS NOT NULL AND p_catch_up NOT IN ('skip', 'latest', 'all') THEN
        RAISE EXCEPTION 'bad catch_up %: use ''skip'' (the default: missed due times are counted, not run), ''latest'' (one run for all of them) or ''all'' (each one, in order)', timers._shown(p_catch_up)
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
        RAISE EXCEPTION 'there is no test clock %; make one with SELECT timers.create_test_clock(%, now())',
            timers._shown(p_test_clock), timers._shown(p_test_clock)
            USING ERRCODE = '22023';
    END IF;
END
$$;

-- 0004
CREATE OR REPLACE FUNCTION timers._require_calendar(p_spec jsonb) RETURNS void
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    IF p_spec->>'kind' = 'trading'
       AND NOT EXISTS (SELECT 1 FROM timers.calendars c WHERE lower(c.name) = lower(p_spec->>'calendar') COLLATE "default") THEN
        RAISE EXCEPTION 'there is no calendar % in database %', timers._shown(p_spec->>'calendar'), current_database()
            USING ERRCODE = '22023',
                  HINT = format('Make it first: SELECT timers.save_calendar(%s, ''mon-fri'');',
                                timers._shown(p_spec->>'calendar'));
    END IF;
END
$$;

-- 0005
CREATE OR REPLACE FUNCTION timers._no_such_test_clock(p_name text) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    RAISE EXCEPTION 'there is no test clock % in database %', timers._shown(p_name), current_database()
        USING ERRCODE = 'P0002';
END
$$;

-- 0005
CREATE OR REPLACE FUNCTION timers._create_test_clock(p_actor name, p_name text, p_at timestamptz)
    RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM timers._take_ticket(p_actor, 'create a test clock');
    IF p_name IS NULL OR p_name !~ '^[A-Za-z0-9_-]{1,64}$' THEN
        RAISE EXCEPTION 'bad test clock name %: use 1 to 64 letters, digits, _ and -', timers._shown(p_name)
            USING ERRCODE = '22023';
    END IF;
    IF p_at IS NULL THEN
        RAISE EXCEPTION 'frozen_at must be a time, not NULL' USING ERRCODE = '22004';
    END IF;
    IF EXISTS (SELECT 1 FROM timers.test_clocks WHERE lower(name) = lower(p_name) COLLATE "default") THEN
        RAISE EXCEPTION 'test clock ''%'' exists already', p_name USING ERRCODE = '42710';
    END IF;
    INSERT INTO timers.test_clocks (name, now, created_by) VALUES (p_name, p_at, p_actor);
    PERFORM timers._audit(p_actor, 'create_test_clock', p_name, jsonb_build_object('frozen_at', p_at));
    RETURN jsonb_build_object('name', p_name, 'now', timers._iso(p_at));
END
$$;

-- 0006
CREATE OR REPLACE FUNCTION timers._check_calendar_name(p_name text) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    IF p_name IS NULL OR p_name !~ '^[A-Za-z0-9_-]{1,64}$' THEN
        RAISE EXCEPTION 'bad calendar name %: use 1 to 64 letters, digits, "_" and "-"', timers._shown(p_name)
            USING ERRCODE = '22023';
    END IF;
    RETURN p_name;
END
$$;

-- 0006
CREATE OR REPLACE FUNCTION timers._calendar(p_name text) RETURNS text
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_name text;
BEGIN
    SELECT c.name INTO v_name FROM timers.calendars c WHERE lower(c.name) = lower(p_name) COLLATE "default";
    IF v_name IS NULL THEN
        RAISE EXCEPTION 'there is no calendar % in database %', timers._shown(p_name), current_database()
            USING ERRCODE = 'P0002',
                  HINT = format('Make it with SELECT timers.save_calendar(%s, ''mon-fri'');', timers._shown(p_name));
    END IF;
    RETURN v_name;
END
$$;

-- 0009: the control-character and length messages showed the key raw.
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
        RAISE EXCEPTION 'bad key %: it is % bytes long, and a key is at most 400', timers._shown(p_key, 40), octet_length(p_key)
            USING ERRCODE = '22023';
    END IF;
    IF p_key ~ '[[:cntrl:]]' THEN
        RAISE EXCEPTION 'bad key %: it holds a control character (a tab or a line break); %', timers._shown(p_key), v_form
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

-- 0009: the key is the caller's, not parsed yet (move, hold, resume, repin).
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
        RAISE EXCEPTION 'keyed timer % is firing; change it when the run has finished', timers._shown(p_key, 400)
            USING ERRCODE = '55P03';
    END;
    IF k.id IS NULL THEN
        RAISE EXCEPTION 'there is no keyed timer % in database %', timers._shown(p_key, 400), current_database()
            USING ERRCODE = 'P0002', HINT = 'Arm it first: SELECT timers.arm(key, owed_at, sql);';
    END IF;
    RETURN k;
END
$$;

-- 0009
CREATE OR REPLACE FUNCTION timers._keyed_version(p_sql text, p_version text) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    IF p_version IS NOT NULL AND (p_version = '' OR length(p_version) > 200) THEN
        RAISE EXCEPTION 'bad version %: use 1 to 200 characters, or NULL for the SQL''s md5', timers._shown(p_version, 40)
            USING ERRCODE = '22023';
    END IF;
    RETURN coalesce(p_version, 'md5:' || left(md5(p_sql), 12));
END
$$;

-- ---------------------------------------------------------------------------
-- 2. The SQL check reads more than statement heads
-- ---------------------------------------------------------------------------

-- 0003: DEALLOCATE, EXECUTE and DECLARE may be refused too.
CREATE OR REPLACE FUNCTION timers._sql_refused_words()
RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
SELECT ARRAY['CREATE', 'DROP', 'ALTER', 'GRANT', 'REVOKE', 'SET', 'RESET', 'DISCARD',
             'BEGIN', 'START', 'COMMIT', 'END', 'ROLLBACK', 'ABORT', 'SAVEPOINT', 'RELEASE',
             'PREPARE', 'DEALLOCATE', 'EXECUTE', 'DECLARE',
             'VACUUM', 'REINDEX', 'CLUSTER', 'LISTEN', 'UNLISTEN', 'LOAD', 'COPY']
$fn$;

-- Why a statement is refused, from its head (see _sql_statements): statement (its
-- name in messages) and reason, both NULL when it is allowed.
--
-- Refused: statements that leave the database (CREATE/ALTER/DROP DATABASE, ALTER
-- SYSTEM, CREATE/DROP TABLESPACE, COPY to or from files, programs or the client,
-- LOAD), the owner's identity (role statements, GRANT/REVOKE of roles, SET/RESET
-- ROLE, SET/RESET SESSION AUTHORIZATION), the run's transaction (transaction
-- control, savepoints) or the runner's session (SET SESSION CHARACTERISTICS,
-- RESET ALL, DISCARD, LISTEN/UNLISTEN, PREPARE/DEALLOCATE/EXECUTE: prepared
-- statements share one namespace with the driver's; DECLARE ... WITH HOLD: the
-- cursor's query runs at COMMIT, outside the executor), and statements PostgreSQL
-- cannot run inside a transaction (VACUUM, ... CONCURRENTLY, REINDEX
-- SCHEMA/DATABASE/SYSTEM, CLUSTER of every table).
-- Allowed on purpose: plain SET/RESET of other settings (search_path, work_mem, ...),
-- CHECKPOINT (permission-checked by PostgreSQL: superusers and pg_checkpoint), ANALYZE,
-- REFRESH MATERIALIZED VIEW CONCURRENTLY, REASSIGN/DROP OWNED (permission-checked),
-- CREATE/ALTER/DROP USER MAPPING, DECLARE without HOLD, NOTIFY, CALL, DO (its body is
-- read by _sql_scan).
CREATE OR REPLACE FUNCTION timers._sql_refusal(head text[], has_on boolean,
                                               OUT statement text, OUT reason text)
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    r_database constant text := 'a timer works inside its own database';
    r_identity constant text := 'a timer runs as the role that saved it';
    r_roles constant text := 'a timer runs as the role that saved it and cannot manage roles';
    r_transaction constant text :=
        'a run is one transaction, committed together with the run''s bookkeeping, so the SQL'
        ' cannot end it or start another (a procedure that commits cannot do it either: the SQL'
        ' runs inside a function); to split work, use several timers';
    r_savepoint constant text :=
        'a run is one transaction and its SQL runs inside a function; to undo part of the work'
        ' on an error, use a DO block with BEGIN ... EXCEPTION';
    r_no_block constant text :=
        'it cannot run inside a transaction block, and a run is one transaction';
    w1 text := head[1];
    w2 text := head[2];
    w3 text := head[3];
    v text;      -- SET/RESET target, normalized
    v2 text;
    j integer;
BEGIN
    IF w1 IS NULL THEN
        RETURN;
    END IF;
    CASE w1
    WHEN 'CREATE', 'DROP', 'ALTER' THEN
        IF w1 = 'CREATE' AND w2 = 'OR' AND w3 = 'REPLACE' THEN
            w2 := head[4];
            w3 := head[5];
        END IF;
        IF w2 = 'DATABASE' THEN
            statement := w1 || ' DATABASE';
            reason := r_database;
        ELSIF w1 = 'ALTER' AND w2 = 'SYSTEM' THEN
            statement := 'ALTER SYSTEM';
            reason := 'it changes the whole server''s configuration; ' || r_database;
        ELSIF w2 IN ('ROLE', 'GROUP') OR (w2 = 'USER' AND w3 IS DISTINCT FROM 'MAPPING') THEN
            statement := w1 || ' ' || w2;
            reason := r_roles;
        ELSIF w2 = 'TABLESPACE' AND w1 <> 'ALTER' THEN
            statement := w1 || ' TABLESPACE';
            reason := 'tablespaces belong to the whole server, and ' || r_no_block;
        ELSIF w1 IN ('CREATE', 'DROP')
              AND (w2 = 'INDEX' AND w3 = 'CONCURRENTLY'
                   OR w1 = 'CREATE' AND w2 = 'UNIQUE' AND w3 = 'INDEX' AND head[4] = 'CONCURRENTLY') THEN
            statement := w1 || ' INDEX CONCURRENTLY';
            reason := r_no_block;
        ELSIF w1 = 'ALTER' AND w2 = 'TABLE' THEN
            j := array_position(head, 'DETACH');
            IF j IS NOT NULL AND head[j + 1] = 'PARTITION'
               AND array_position(head, 'CONCURRENTLY', j) IS NOT NULL THEN
                statement := 'DETACH PARTITION ... CONCURRENTLY';
                reason := r_no_block;
            END IF;
        END IF;
    WHEN 'GRANT', 'REVOKE' THEN
        IF NOT has_on THEN
            statement := w1 || ' of a role';
            reason := r_roles;
        END IF;
    WHEN 'SET', 'RESET' THEN
        j := 2;
        IF w1 = 'SET' AND w2 IN ('LOCAL', 'SESSION')
           AND w3 IS DISTINCT FROM 'AUTHORIZATION' AND w3 IS DISTINCT FROM 'CHARACTERISTICS' THEN
            j := 3;
        END IF;
        v := head[j];
        v2 := head[j + 1];
        -- a setting's name is case-insensitive, quoted or not: SET "Role" = ...
        IF v LIKE '"%"' THEN
            v := upper(replace(substr(v, 2, length(v) - 2), '""', '"'));
        END IF;
        IF v = 'ROLE' THEN
            statement := w1 || ' ROLE';
            reason := r_identity;
        ELSIF v = 'SESSION_AUTHORIZATION' OR (v = 'SESSION' AND v2 = 'AUTHORIZATION') THEN
            statement := w1 || ' SESSION AUTHORIZATION';
            reason := r_identity;
        ELSIF w1 = 'SET' AND v = 'SESSION' AND v2 = 'CHARACTERISTICS' THEN
            statement := 'SET SESSION CHARACTERISTICS';
            reason := 'it would change the runner''s session beyond this run; use SET TRANSACTION';
        ELSIF w1 = 'RESET' AND v = 'ALL' THEN
            statement := 'RESET ALL';
            reason := 'it would also reset the run''s own settings (pgtimers.timer, pgtimers.due_at);'
                      ' reset settings one by one';
        END IF;
    WHEN 'DISCARD' THEN
        statement := 'DISCARD';
        reason := 'it would throw away the state of the runner''s session, which outlives the run';
    WHEN 'BEGIN', 'COMMIT', 'END', 'ABORT' THEN
        statement := w1 || CASE WHEN w1 = 'COMMIT' AND w2 = 'PREPARED' THEN ' PREPARED' ELSE '' END;
        reason := r_transaction;
    WHEN 'ROLLBACK' THEN
        IF w2 = 'PREPARED' THEN
            statement := 'ROLLBACK PREPARED';
            reason := r_transaction;
        ELSIF w2 = 'TO' OR (w2 IN ('WORK', 'TRANSACTION') AND w3 = 'TO') THEN
            statement := 'ROLLBACK TO SAVEPOINT';
            reason := r_savepoint;
        ELSE
            statement := 'ROLLBACK';
            reason := r_transaction;
        END IF;
    WHEN 'START' THEN
        IF w2 = 'TRANSACTION' THEN
            statement := 'START TRANSACTION';
            reason := r_transaction;
        END IF;
    WHEN 'PREPARE' THEN
        IF w2 = 'TRANSACTION' THEN
            statement := 'PREPARE TRANSACTION';
            reason := r_transaction;
        ELSE
            -- A prepared statement would outlive the run on the runner's shared session.
            statement := 'PREPARE';
            reason := 'a prepared statement would outlive the run in the runner''s session, and could'
                      ' take the name of one the runner executes next; run the statement directly,'
                      ' or use a function';
        END IF;
    WHEN 'SAVEPOINT' THEN
        statement := 'SAVEPOINT';
        reason := r_savepoint;
    WHEN 'RELEASE' THEN
        statement := 'RELEASE SAVEPOINT';
        reason := r_savepoint;
    WHEN 'DEALLOCATE' THEN
        statement := 'DEALLOCATE';
        reason := 'it would drop prepared statements of the runner''s session, which outlives the run'
                  ' (a timer cannot PREPARE its own)';
    WHEN 'EXECUTE' THEN
        statement := 'EXECUTE';
        reason := 'it would run a prepared statement of the runner''s session (a timer cannot PREPARE'
                  ' its own); run the statement directly, or use a function';
    WHEN 'DECLARE' THEN
        j := array_position(head, 'HOLD');
        IF j > 1 AND head[j - 1] = 'WITH'
           AND (array_position(head, 'FOR') IS NULL OR array_position(head, 'FOR') > j) THEN
            statement := 'DECLARE ... WITH HOLD';
            reason := 'a holdable cursor''s query runs at COMMIT, after the SQL has returned, as the'
                      ' runner rather than the timer''s owner; declare the cursor without WITH HOLD';
        END IF;
    WHEN 'VACUUM' THEN
        statement := 'VACUUM';
        reason := r_no_block || ' (ANALYZE can)';
    WHEN 'REINDEX' THEN
        IF w3 = 'CONCURRENTLY' THEN
            statement := 'REINDEX CONCURRENTLY';
            reason := r_no_block;
        ELSIF w2 IN ('SCHEMA', 'DATABASE', 'SYSTEM') THEN
            statement := 'REINDEX ' || w2;
            reason := r_no_block || ' (REINDEX TABLE and REINDEX INDEX can)';
        END IF;
    WHEN 'CLUSTER' THEN
        IF w2 IS NULL OR (w2 = 'VERBOSE' AND w3 IS NULL) THEN
            statement := 'CLUSTER without a table';
            reason := r_no_block || ' (CLUSTER of one table can)';
        END IF;
    WHEN 'LISTEN', 'UNLISTEN' THEN
        statement := w1;
        reason := 'a run''s session does not receive notifications; NOTIFY and pg_notify() do work';
    WHEN 'LOAD' THEN
        statement := 'LOAD';
        reason := 'it loads a library into the runner''s server process; ' || r_database;
    WHEN 'COPY' THEN
        SELECT min(u.o) INTO j FROM unnest(head) WITH ORDINALITY AS u(w, o) WHERE u.w IN ('TO', 'FROM');
        v := head[j + 1];
        IF v = 'PROGRAM' THEN
            statement := 'COPY ... PROGRAM';
            reason := 'it runs a program on the database server; ' || r_database;
        ELSIF v IN ('STDIN', 'STDOUT') THEN
            statement := 'COPY ... ' || v;
            reason := 'a timer has no client to copy from or to; use INSERT ... SELECT';
        ELSE
            statement := 'COPY ... a file';
            reason := 'it reads or writes a file on the database server; ' || r_database;
        END IF;
    ELSE
        NULL;
    END CASE;
END
$fn$;

-- The value of one string constant, given as the tokens of _sql_tokens that make
-- it up: a '..', E'..' or $tag$..$tag$ token, and the '..' tokens that continue a
-- quoted one on the next lines (they follow the first one's escape rules). With
-- p_unicode, the tokens are of U&'..' (p_escape: its UESCAPE character, default
-- '\'). NULL when they are not a string constant PostgreSQL would read.
-- E'..' and U&'..' are read by PostgreSQL itself, from a literal rebuilt here and
-- checked to be exactly one string constant.
CREATE OR REPLACE FUNCTION timers._sql_string_value(parts text[], p_unicode boolean DEFAULT false,
                                                    p_escape text DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET standard_conforming_strings = on
AS $fn$
DECLARE
    v_first constant text := parts[1];
    v_tag text;
    v_inner text := '';
    v_literal text;
    v_value text;
    v_part text;
    i integer;
BEGIN
    IF v_first IS NULL THEN
        RETURN NULL;
    END IF;
    IF starts_with(v_first, '$') THEN
        -- a dollar quote is never continued
        v_tag := substring(v_first FROM '^\$[^$]*\$');
        IF v_tag IS NULL OR length(v_first) < 2 * length(v_tag) OR right(v_first, length(v_tag)) <> v_tag THEN
            RETURN NULL;
        END IF;
        RETURN substr(v_first, length(v_tag) + 1, length(v_first) - 2 * length(v_tag));
    END IF;
    FOR i IN 1 .. cardinality(parts) LOOP
        v_part := parts[i];
        IF i = 1 AND v_first ~ '^[Ee]''' THEN
            v_part := substr(v_part, 2);
        END IF;
        IF v_part !~ '^''[\s\S]*''$' OR length(v_part) < 2 THEN
            RETURN NULL;
        END IF;
        v_inner := v_inner || substr(v_part, 2, length(v_part) - 2);
    END LOOP;
    IF v_first ~ '^[Ee]''' THEN
        v_literal := 'E''' || v_inner || '''';
        IF v_literal !~ '^E''(?:[^''\\]|''''|\\[\s\S])*''$' THEN
            RETURN NULL;
        END IF;
    ELSIF p_unicode THEN
        p_escape := coalesce(p_escape, '\');
        IF v_inner !~ '^(?:[^'']|'''')*$' OR p_escape !~ '^[^0-9A-Fa-f+''"[:space:]]$' THEN
            RETURN NULL;
        END IF;
        v_literal := 'U&''' || v_inner || ''' UESCAPE ''' || p_escape || '''';
    ELSE
        IF v_inner !~ '^(?:[^'']|'''')*$' THEN
            RETURN NULL;
        END IF;
        RETURN replace(v_inner, '''''', '''');
    END IF;
    BEGIN
        EXECUTE 'SELECT ' || v_literal INTO v_value;
    EXCEPTION WHEN OTHERS THEN
        RETURN NULL;
    END;
    RETURN v_value;
END
$fn$;

-- What the SQL check refuses beyond statement heads, found by reading the tokens
-- of a text (_sql_tokens): statement (its name in messages), reason, and pos (the
-- character position in the text), all NULL when nothing is refused.
--
--   * PREPARE and DEALLOCATE statements, and at the top level EXECUTE of a
--     prepared statement: a prepared statement lives in the runner's session,
--     which outlives the run and also runs the runner's own statements. Inside a
--     body (p_context: 'a DO block' or 'the body of a routine') a statement
--     starts at the start, after ';' or after BEGIN, THEN, ELSE and LOOP; its
--     EXECUTE is PL/pgSQL's dynamic SQL, not refused.
--   * Unless p_session_only: a call of dblink(), dblink_exec(), dblink_connect(),
--     dblink_connect_u(), dblink_send_query() or dblink_open(), plain, quoted,
--     U&"..." or schema-qualified: it connects to a server as the role of its
--     connection string, not as the timer's owner.
--   * The bodies of DO blocks and of CREATE [OR REPLACE] FUNCTION/PROCEDURE ... AS
--     '...' are read the same way, p_depth levels deep; a body that cannot be read,
--     or one nested deeper, is refused.
-- Known limit: the text of dynamic SQL (EXECUTE 'PREPARE ...' in PL/pgSQL, or a
-- function that exists already) is not read here; timers._exec_as refuses its
-- prepared statements after the run.
CREATE OR REPLACE FUNCTION timers._sql_scan(p_text text, p_session_only boolean,
                                            p_context text DEFAULT NULL, p_depth integer DEFAULT 4,
                                            OUT statement text, OUT reason text, OUT pos integer)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    dblinks constant text[] := ARRAY['dblink', 'dblink_exec', 'dblink_connect', 'dblink_connect_u',
                                     'dblink_send_query', 'dblink_open'];
    -- a name after these words is a table or a routine being defined, not a call
    not_calls constant text[] := ARRAY['TABLE', 'INTO', 'EXISTS', 'REFERENCES', 'VIEW', 'COPY',
                                       'FUNCTION', 'PROCEDURE', 'ROUTINE'];
    r_unread constant text :=
        'its body could not be read for the check; write it as one dollar-quoted string ($$ ... $$)';
    toks text[];
    kinds text[];
    poss integer[];
    cand integer[];
    i integer;
    j integer;
    b integer;
    w text;
    w2 text;
    nm text;
    esc text;
    uni boolean;
    at_start boolean;
    lvl integer;
    body_at integer;      -- index of the first token of a body's string constant
    body_ctx text;
    body_what text;       -- the statement that has the body, in messages
    parts text[];
    body text;
    tag text;
    sub record;
    r record;
BEGIN
    IF p_text IS NULL OR p_text = '' THEN
        RETURN;
    END IF;
    SELECT array_agg(x.tok ORDER BY x.n), array_agg(x.kind ORDER BY x.n), array_agg(x.pos ORDER BY x.n)
      INTO toks, kinds, poss
      FROM timers._sql_tokens(p_text) AS x
     WHERE x.kind <> 't';
    -- the tokens worth a look, found set-wise: a loop over every token of 64 KB is slow
    SELECT array_agg(c.i ORDER BY c.i) INTO cand
      FROM (SELECT u.i::integer AS i, u.t, u.k, lag(u.t) OVER (ORDER BY u.i) AS p
              FROM unnest(toks, kinds) WITH ORDINALITY AS u(t, k, i)) c
     WHERE (c.k = 'w' AND upper(c.t) IN ('PREPARE', 'DEALLOCATE', 'EXECUTE', 'DO', 'CREATE'))
        OR (NOT p_session_only AND c.k = 'w' AND lower(c.t) = ANY (dblinks))
        OR (NOT p_session_only AND c.k = 'q' AND (c.t LIKE '%dblink%' OR c.p = '&'));

    FOREACH i IN ARRAY coalesce(cand, '{}'::integer[]) LOOP
        w := CASE WHEN kinds[i] = 'w' THEN upper(toks[i]) END;
        at_start := i = 1 OR toks[i - 1] = ';'
                    OR (p_context IS NOT NULL AND kinds[i - 1] = 'w'
                        AND upper(toks[i - 1]) IN ('BEGIN', 'THEN', 'ELSE', 'LOOP'));
        body_at := NULL;

        IF at_start AND w IN ('PREPARE', 'DEALLOCATE', 'EXECUTE') THEN
            w2 := CASE WHEN kinds[i + 1] = 'w' THEN upper(toks[i + 1]) END;
            -- PL/pgSQL's EXECUTE runs a string; PREPARE TRANSACTION is transaction control,
            -- which PostgreSQL refuses in a run by itself
            CONTINUE WHEN w = 'EXECUTE' AND p_context IS NOT NULL;
            CONTINUE WHEN w = 'PREPARE' AND w2 = 'TRANSACTION';
            r := timers._sql_refusal(ARRAY[w, w2], false);
            statement := r.statement || coalesce(' in ' || p_context, '');
            reason := r.reason;
            pos := poss[i];
            RETURN;
        ELSIF at_start AND w = 'DO' THEN
            -- DO [LANGUAGE lang] body [LANGUAGE lang]
            j := i + 1;
            WHILE j <= cardinality(toks) AND toks[j] <> ';' LOOP
                IF kinds[j] = 's' AND NOT (kinds[j - 1] = 'w' AND upper(toks[j - 1]) IN ('LANGUAGE', 'UESCAPE')) THEN
                    body_at := j;
                    EXIT;
                END IF;
                j := j + 1;
            END LOOP;
            body_ctx := 'a DO block';
            body_what := 'DO';
        ELSIF at_start AND w = 'CREATE' THEN
            j := i + 1;
            IF upper(toks[j]) = 'OR' AND upper(toks[j + 1]) = 'REPLACE' THEN
                j := j + 2;
            END IF;
            IF kinds[j] = 'w' AND upper(toks[j]) IN ('FUNCTION', 'PROCEDURE') THEN
                body_what := 'CREATE ' || upper(toks[j]);
                -- the string after AS, outside parentheses
                lvl := 0;
                j := j + 1;
                WHILE j <= cardinality(toks) AND NOT (toks[j] = ';' AND lvl = 0) LOOP
                    IF toks[j] = '(' THEN
                        lvl := lvl + 1;
                    ELSIF toks[j] = ')' THEN
                        lvl := lvl - 1;
                    ELSIF lvl = 0 AND kinds[j] = 'w' AND upper(toks[j]) = 'AS' THEN
                        b := j + 1;
                        IF kinds[b] = 'w' AND upper(toks[b]) = 'U' AND toks[b + 1] = '&' THEN
                            b := b + 2;
                        END IF;
                        IF kinds[b] = 's' THEN
                            body_at := b;
                            EXIT;
                        END IF;
                    END IF;
                    j := j + 1;
                END LOOP;
            END IF;
            body_ctx := 'the body of a routine';
        ELSIF NOT p_session_only AND kinds[i] IN ('w', 'q') THEN
            -- a call of one of dblink's connecting functions: its name, then '('
            j := i + 1;
            uni := kinds[i] = 'q' AND i > 2 AND toks[i - 1] = '&' AND kinds[i - 2] = 'w'
                   AND upper(toks[i - 2]) = 'U' AND poss[i - 1] = poss[i - 2] + 1 AND poss[i] = poss[i - 1] + 1;
            IF kinds[i] = 'w' THEN
                nm := lower(toks[i]);
            ELSE
                nm := replace(substr(toks[i], 2, length(toks[i]) - 2), '""', '"');
                IF uni THEN
                    esc := NULL;
                    IF kinds[j] = 'w' AND upper(toks[j]) = 'UESCAPE' AND kinds[j + 1] = 's' THEN
                        esc := timers._sql_string_value(ARRAY[toks[j + 1]]);
                        j := j + 2;
                    END IF;
                    nm := timers._sql_string_value(ARRAY['''' || replace(nm, '''', '''''') || ''''], true, esc);
                END IF;
            END IF;
            IF nm = ANY (dblinks) AND toks[j] = '(' THEN
                -- the word before the (schema-qualified) name
                b := i - CASE WHEN uni THEN 3 ELSE 1 END;
                WHILE b > 1 AND toks[b] = '.' AND kinds[b - 1] IN ('w', 'q') LOOP
                    b := b - 2;
                END LOOP;
                IF b < 1 OR kinds[b] <> 'w' OR NOT upper(toks[b]) = ANY (not_calls) THEN
                    statement := nm || '()' || coalesce(' in ' || p_context, '');
                    reason := 'it connects to a database server as the role of its connection string, not as'
                              ' the timer''s owner; a timer works inside its own database';
                    pos := poss[i];
                    RETURN;
                END IF;
            END IF;
        END IF;

        CONTINUE WHEN body_at IS NULL;
        -- the body: its string constant (continued on the next lines, or U&'..' UESCAPE 'c')
        uni := body_at > 2 AND toks[body_at - 1] = '&' AND kinds[body_at - 2] = 'w'
               AND upper(toks[body_at - 2]) = 'U' AND poss[body_at - 1] = poss[body_at - 2] + 1
               AND poss[body_at] = poss[body_at - 1] + 1;
        parts := ARRAY[toks[body_at]];
        j := body_at + 1;
        WHILE kinds[j] = 's' AND starts_with(toks[j], '''') AND NOT starts_with(toks[body_at], '$') LOOP
            parts := parts || toks[j];
            j := j + 1;
        END LOOP;
        esc := NULL;
        IF uni AND kinds[j] = 'w' AND upper(toks[j]) = 'UESCAPE' AND kinds[j + 1] = 's' THEN
            esc := timers._sql_string_value(ARRAY[toks[j + 1]]);
        END IF;
        body := timers._sql_string_value(parts, uni, esc);
        IF body IS NULL OR p_depth <= 0 THEN
            statement := body_what || coalesce(' in ' || p_context, '');
            reason := CASE WHEN body IS NULL THEN r_unread
                           ELSE 'DO blocks and routines nested this deep are not read for the check' END;
            pos := poss[body_at];
            RETURN;
        END IF;
        sub := timers._sql_scan(body, p_session_only, body_ctx, p_depth - 1);
        IF sub.statement IS NOT NULL THEN
            statement := sub.statement;
            reason := sub.reason;
            -- the position in this text: exact in a dollar quote, else the string's start
            tag := substring(toks[body_at] FROM '^\$[^$]*\$');
            pos := CASE WHEN tag IS NOT NULL THEN poss[body_at] + length(tag) + sub.pos - 1
                        ELSE poss[body_at] END;
            RETURN;
        END IF;
    END LOOP;
END
$fn$;

-- 0003: after the statement heads, the rest of the text (timers._sql_scan).
CREATE OR REPLACE FUNCTION timers._check_sql(sql text)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    max_bytes constant integer := 65536;
    refusable constant text[] := timers._sql_refused_words();
    msg text;
    near integer;
    x text;
    p integer;
    s record;
    refusal record;
    deep record;
    found_any boolean := false;
BEGIN
    IF sql IS NULL THEN
        RAISE EXCEPTION 'the timer''s SQL is empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF octet_length(sql) > max_bytes THEN
        RAISE EXCEPTION 'the timer''s SQL is % bytes; the limit is % (64 KB)', octet_length(sql), max_bytes
            USING ERRCODE = 'program_limit_exceeded';
    END IF;

    sql := sql || '';   -- decompress once, not in every function it is passed to
    msg := timers._sql_parse_error(sql);
    IF msg IS NOT NULL THEN
        -- A backslash outside strings is never SQL: most likely a psql meta-command.
        p := CASE WHEN strpos(sql, '\') > 0 THEN strpos(timers._sql_code(sql), '\') ELSE 0 END;
        IF p > 0 THEN
            RAISE EXCEPTION 'the timer''s SQL may not use %: psql meta-commands like \c do not work in a timer (%)',
                (regexp_match(substr(sql, p, 40), '^\\(?:[A-Za-z]+|[^[:space:]])?'))[1],
                timers._sql_line_col(sql, p)
                USING ERRCODE = 'syntax_error';
        END IF;
        p := timers._sql_error_position(sql, msg);
        -- the token in "at or near" can be the whole rest of the SQL: shorten it
        near := strpos(msg, ' at or near "');
        IF near > 0 AND right(msg, 1) = '"' THEN
            x := substr(msg, near + 13, length(msg) - near - 13);
            IF length(x) > 40 THEN
                msg := left(msg, near + 12) || left(x, 40) || '…"';
            END IF;
        END IF;
        RAISE EXCEPTION USING
            ERRCODE = 'syntax_error',
            MESSAGE = format('the timer''s SQL does not parse: %s%s', msg,
                             ' (' || timers._sql_line_col(sql, p) || ')');
    END IF;

    FOR s IN SELECT * FROM timers._sql_statements(sql) LOOP
        found_any := true;
        CONTINUE WHEN NOT (s.head[1] = ANY (refusable));
        refusal := timers._sql_refusal(s.head, s.has_on);
        IF refusal.statement IS NOT NULL THEN
            RAISE EXCEPTION 'the timer''s SQL may not use %: % (%)',
                refusal.statement, refusal.reason, timers._sql_line_col(sql, s.pos)
                USING ERRCODE = 'insufficient_privilege';
        END IF;
    END LOOP;
    IF NOT found_any THEN
        RAISE EXCEPTION 'the timer''s SQL is empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- dblink calls anywhere, and what DO blocks and routine bodies hold. Only text
    -- that can hold one of them is read again: a call names dblink (or is a
    -- U&"..." name), a body follows DO, FUNCTION or PROCEDURE (keywords cannot be
    -- escaped).
    IF sql ~* 'dblink|u&|\m(do|function|procedure)\M' THEN
        deep := timers._sql_scan(sql, false);
        IF deep.statement IS NOT NULL THEN
            RAISE EXCEPTION 'the timer''s SQL may not use %: % (%)',
                deep.statement, deep.reason, timers._sql_line_col(sql, deep.pos)
                USING ERRCODE = 'insufficient_privilege';
        END IF;
    END IF;
END
$fn$;

-- Owners are stored by role name. After ALTER ROLE a RENAME TO b, another role
-- could take the name a, and with it a's timers (its own executor passes every
-- check). Each timer now also keeps the owner's oid, set by a trigger whenever
-- its owner is written (save, arm, repin), and timers._exec_as refuses to run
-- saved SQL for a role whose oid is not the one that saved it.
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

-- 0004: the runner's role reaches the executors only through this function, which
-- runs a timer's saved SQL as the role that saved it, never SQL of the caller's
-- choosing (a superuser session, which could SET ROLE anyway, may run any: tests,
-- the embedded runner). Before the run it refuses what timers._sql_scan finds for
-- the runner's session (also in SQL saved before that check); after it,
-- statements prepared or dropped by dynamic SQL. SECURITY DEFINER: the executors
-- are not granted to the runner's role any more (section 3).
CREATE OR REPLACE FUNCTION timers._exec_as(p_owner name, p_sql text) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_fn text := timers._executor_name(p_owner);
    v_oid oid := (SELECT r.oid FROM pg_roles r WHERE r.rolname = p_owner);
    v_timer text;
    v_saved_oid oid;
    v_saved boolean;
    v_same boolean;
    v_rows bigint;
    v_refusal record;
    v_prepared text[];
    v_name text;
BEGIN
    -- The saved SQL being run, and whether the role that saved it is the one that
    -- has the name now (owner_oid). The run names what it runs (pgtimers.timer: a
    -- timer's name or a keyed timer's key), found by a unique index; anything else
    -- (a direct call) is looked up by owner and SQL.
    v_timer := current_setting('pgtimers.timer', true);
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
    IF v_fn IS NULL OR to_regprocedure(format('timers_exec.%I(text)', v_fn)) IS NULL THEN
        RAISE EXCEPTION 'the timer''s owner "%" has no executor (the role was dropped or its objects were); save the timer again as an existing role', p_owner
            USING ERRCODE = '42704';
    END IF;
    -- Owners are stored by name: after a rename, the role that takes the name is not
    -- the one that saved the timer, and never runs it.
    IF v_saved AND NOT v_same THEN
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

REVOKE ALL ON FUNCTION
    timers._sql_string_value(text[], boolean, text),
    timers._sql_scan(text, boolean, text, integer)
FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    timers._sql_string_value(text[], boolean, text),
    timers._sql_scan(text, boolean, text, integer)
TO pgtimers_admin, pgtimers_runner;

-- ---------------------------------------------------------------------------
-- 3. The executors are reached through timers._exec_as only
-- ---------------------------------------------------------------------------

-- 0004: an executor is not granted to the runner's role: timers._exec_as (SECURITY
-- DEFINER, owned by the install's owner, like this function) calls it.
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

REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA timers_exec FROM pgtimers_runner;
REVOKE USAGE ON SCHEMA timers_exec FROM pgtimers_runner;

-- ---------------------------------------------------------------------------
-- 4. The runner's role updates bookkeeping columns only
-- ---------------------------------------------------------------------------
-- Every UPDATE the runner's role runs itself (the functions of the run, skips,
-- downtime, run-now and retention in 0005, the keyed fire in 0009; the named
-- queries of pgtimers/queries.sql only lock rows, which needs UPDATE on one
-- column). The test clocks move only through SECURITY DEFINER bodies.

REVOKE UPDATE ON timers.timers FROM pgtimers_runner;
GRANT UPDATE (next_due_at, catch_up_due_at, expired, last_due_at, last_run_at, last_late_ms,
              max_late_ms, last_ok, last_error, last_took_ms, last_rows, runs, scheduled_runs,
              failures, caught_up, skipped, last_skip_at, last_skip_reason)
    ON timers.timers TO pgtimers_runner;

REVOKE UPDATE ON timers.keyed_timers FROM pgtimers_runner;
GRANT UPDATE (status, fired_at, late_by, attempt, wakes, commit, superseded_by, superseded_at,
              cause, ok, error, sqlstate, rows, took_ms, updated_at)
    ON timers.keyed_timers TO pgtimers_runner;

REVOKE UPDATE ON timers.run_requests FROM pgtimers_runner;
GRANT UPDATE (finished_at, result) ON timers.run_requests TO pgtimers_runner;

REVOKE UPDATE ON timers.test_clocks FROM pgtimers_runner;
