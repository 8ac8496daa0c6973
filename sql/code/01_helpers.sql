-- pgtimers code: small helpers shared by every concept: instants as text, spans as ms,
-- messages, the clocks and zones of a timer.
--
-- Repeatable: applied whole on every install and upgrade, after the versioned
-- migrations (docs/design.md). Each object here is defined in this file only.

-- UTC offset of a zone at an instant (e.g. +05:45 for Asia/Kathmandu).
CREATE OR REPLACE FUNCTION timers._utc_offset(t timestamptz, zone text) RETURNS interval
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT pg_catalog.timezone(zone, t) OPERATOR(pg_catalog.-) pg_catalog.timezone('UTC', t) $$;

-- Index of the lowest set bit of a non-negative bigint (NULL for 0).
CREATE OR REPLACE FUNCTION timers._lowbit(x bigint) RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
        SELECT CASE WHEN x OPERATOR(pg_catalog.=) 0 THEN NULL
                    ELSE pg_catalog.bit_count(((x OPERATOR(pg_catalog.&) (OPERATOR(pg_catalog.-) x))
                                                OPERATOR(pg_catalog.-) 1)::bit(64))::integer END
    $$;

-- The database's default zone (timers.set_timezone), else UTC.
-- PL/pgSQL, not SQL: a SQL function with a sub-select is never inlined and was planned
-- again on every call; this one keeps its plan.
CREATE OR REPLACE FUNCTION timers._default_zone() RETURNS text
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    RETURN COALESCE((SELECT s.value FROM timers.settings s WHERE s.key = 'timezone'), 'UTC');
END $$;

-- The zone a timer's wall times are read in: its own, else the database default.
CREATE OR REPLACE FUNCTION timers._zone(p_timezone text) RETURNS text
    LANGUAGE sql STABLE
    AS $$ SELECT COALESCE(p_timezone, timers._default_zone()) $$;

-- The time a timer lives on: its test clock's frozen time, else the server's.
CREATE OR REPLACE FUNCTION timers._now(p_test_clock text) RETURNS timestamptz
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    IF p_test_clock IS NULL THEN
        RETURN now();
    END IF;
    RETURN (SELECT c.now FROM timers.test_clocks c WHERE c.name = p_test_clock);
END
$$;

-- ISO 8601 in UTC, e.g. 2027-01-04T09:00:00Z (fraction only when there is one). The
-- small helpers here look nothing up unqualified, so they need no SET clause and the
-- planner inlines them into their callers.
CREATE OR REPLACE FUNCTION timers._iso(p_at timestamptz) RETURNS text
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
        SELECT pg_catalog.to_char(pg_catalog.timezone('UTC', p_at), 'YYYY-MM-DD"T"HH24:MI:SS')
            OPERATOR(pg_catalog.||)
               CASE WHEN pg_catalog.date_trunc('second', p_at) OPERATOR(pg_catalog.=) p_at THEN ''
                    ELSE pg_catalog.rtrim(pg_catalog.to_char(pg_catalog.timezone('UTC', p_at), '.US'), '0') END
            OPERATOR(pg_catalog.||) 'Z'
    $$;

-- A span as whole milliseconds, never negative.
CREATE OR REPLACE FUNCTION timers._ms(p_span interval) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT GREATEST(0, pg_catalog.round(EXTRACT(epoch FROM p_span) OPERATOR(pg_catalog.*) 1000))::bigint $$;

-- The time limit of a run whose timer sets none (timers.save's timeout). The runner's
-- own default is the same (pgtimers/runner/answers.py RUN_TIMEOUT_MS; a test checks):
-- a fire it asks for with that limit runs every timer without a timeout of its own.
CREATE OR REPLACE FUNCTION timers._run_timeout() RETURNS interval
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT interval '10 minutes' $$;

-- The rows of a skip event written one per due time up to this many; a larger
-- gap (an `every 1s` timer down for a week) is one summary row.
CREATE OR REPLACE FUNCTION timers._skip_rows_cap() RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT 100 $$;

-- A procedure that commits cannot run inside a transaction block. The run-now
-- and advance procedures find out first: inside an exception block COMMIT always
-- fails, and its message tells a transaction block (atomic context: "invalid
-- transaction termination") from a plain CALL ("cannot commit while a
-- subtransaction is active"). plpgsql_check flags that COMMIT, on purpose here.
CREATE OR REPLACE FUNCTION timers._in_transaction_block_message() RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT 'invalid transaction termination' $$;

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

-- A name (or any short text) given by a caller, as a message shows it: quoted as
-- a literal, control characters (C0, DEL, C1) made visible as '?', cut short after
-- p_max characters ('…'). NULL shows as NULL.
CREATE OR REPLACE FUNCTION timers._quoted(p_text text, p_max integer DEFAULT 80) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
        SELECT pg_catalog.quote_nullable(pg_catalog.regexp_replace(
                   CASE WHEN pg_catalog.length(p_text) > p_max
                        THEN pg_catalog.left(p_text, p_max) || '…' ELSE p_text END,
                   '[\x01-\x1f\x7f-\x9f]', '?', 'g'))
    $$;

-- Raise the "not inside a transaction block" error of a procedure when its
-- COMMIT probe failed with the message of a transaction block.
CREATE OR REPLACE FUNCTION timers._refuse_in_block(p_probe text, p_message text, p_hint text) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    IF p_probe IS NOT DISTINCT FROM timers._in_transaction_block_message() THEN
        IF p_hint IS NULL THEN
            RAISE EXCEPTION USING ERRCODE = '25001', MESSAGE = p_message;
        END IF;
        RAISE EXCEPTION USING ERRCODE = '25001', MESSAGE = p_message, HINT = p_hint;
    END IF;
END
$$;

-- An error text as stored and logged: at most 8,000 characters, the rest marked as cut.
CREATE OR REPLACE FUNCTION timers._cut(p_text text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
        SELECT CASE WHEN length(p_text) <= 8000 THEN p_text
                    ELSE left(p_text, 8000) || format(' … [cut: %s characters in all]', length(p_text)) END
    $$;

-- A time given as an argument (start_at, owed_at, ...) is a finite one of the years 1 to
-- 9999, which every schedule can step from and every answer can write: else 22008
-- naming the argument. NULL passes (the caller decides whether it may be NULL).
CREATE OR REPLACE FUNCTION timers._check_time(p_what text, p_at timestamptz) RETURNS void
    LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF p_at IS NOT NULL AND (NOT isfinite(p_at) OR p_at < '0001-01-02 00:00+00'
                             OR p_at >= '9999-12-31 00:00+00') THEN
        RAISE EXCEPTION 'bad %: %; give a time between the years 1 and 9999', p_what, p_at
            USING ERRCODE = '22008';
    END IF;
END
$$;

-- ---------------------------------------------------------------------------
-- Rights
-- ---------------------------------------------------------------------------
REVOKE ALL ON FUNCTION
    timers._utc_offset(timestamp with time zone,text),
    timers._lowbit(bigint),
    timers._default_zone(),
    timers._zone(text),
    timers._now(text),
    timers._iso(timestamp with time zone),
    timers._ms(interval),
    timers._skip_rows_cap(),
    timers._run_timeout(),
    timers._in_transaction_block_message(),
    timers._read_only_view(),
    timers._quoted(text,integer),
    timers._refuse_in_block(text,text,text),
    timers._cut(text),
    timers._check_time(text,timestamp with time zone)
    FROM PUBLIC, pgtimers_reader, pgtimers_admin, pgtimers_runner;
GRANT EXECUTE ON FUNCTION
    timers._utc_offset(timestamp with time zone,text),
    timers._lowbit(bigint)
    TO pgtimers_reader, pgtimers_runner;
GRANT EXECUTE ON FUNCTION
    timers._default_zone(),
    timers._zone(text),
    timers._now(text),
    timers._iso(timestamp with time zone),
    timers._ms(interval),
    timers._skip_rows_cap(),
    timers._run_timeout(),
    timers._in_transaction_block_message(),
    timers._quoted(text,integer),
    timers._check_time(text,timestamp with time zone)
    TO PUBLIC;
GRANT EXECUTE ON FUNCTION
    timers._refuse_in_block(text,text,text)
    TO pgtimers_admin;
GRANT EXECUTE ON FUNCTION
    timers._cut(text)
    TO pgtimers_runner;
