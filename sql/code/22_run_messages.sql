-- pgtimers code: a run's own messages, kept with its timers.runs row (messages): the
-- NOTICE, INFO and WARNING messages its SQL raised, then its error's DETAIL and HINT, the
-- first 8 KB of them.
--
-- Repeatable: applied whole on every install and upgrade, after the versioned
-- migrations (docs/design.md). Each object here is defined in this file only.

-- A run's messages as kept: the first 8 KB (8,192 bytes, never half a character) of
-- p_text, then, when more was said, a line that says how much was cut (p_more: bytes
-- already cut before p_text came here, which count too). NULL is ''.
CREATE OR REPLACE FUNCTION timers._messages_cut(p_text text, p_more bigint DEFAULT 0) RETURNS text
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $$
DECLARE
    v_limit constant integer := 8192;
    v_keep text := coalesce(p_text, '');
    v_more bigint := greatest(coalesce(p_more, 0), 0);
BEGIN
    IF octet_length(v_keep) <= v_limit AND v_more = 0 THEN
        RETURN v_keep;
    END IF;
    v_keep := left(v_keep, v_limit);
    WHILE octet_length(v_keep) > v_limit LOOP
        -- each character is 1 to 4 bytes: dropping a quarter of the excess in characters
        -- never drops more than the excess
        v_keep := left(v_keep, length(v_keep) - greatest((octet_length(v_keep) - v_limit) / 4, 1));
    END LOOP;
    v_more := v_more + octet_length(coalesce(p_text, '')) - octet_length(v_keep);
    RETURN v_keep || E'\n' || format('… [%s more bytes cut]', to_char(v_more, 'FM999,999,999,999,999,990'));
END
$$;

-- The messages of a run's error (timers._execute): its DETAIL and HINT, a line each
-- ('DETAIL: ...', 'HINT: ...'), cut to 8 KB; '' when it has neither.
CREATE OR REPLACE FUNCTION timers._error_said(p_detail text, p_hint text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
        SELECT CASE WHEN coalesce(p_detail, '') = '' AND coalesce(p_hint, '') = '' THEN ''
                    ELSE timers._messages_cut(concat_ws(E'\n', 'DETAIL: ' || nullif(p_detail, ''),
                                                        'HINT: ' || nullif(p_hint, ''))) END
    $$;

-- The runner's word on what runs said (p_runs: [{timer_id, started_at, messages, more}],
-- one per run that said something): a run's NOTICE, INFO and WARNING messages reach the
-- runner's connection, not PL/pgSQL, while it runs (after timers._execute's notice
-- 'pgtimers: run', whose detail is the timer's id and started_at), and are written here
-- after its commit: before the DETAIL and HINT lines its row has, cut to 8 KB (more:
-- bytes the runner cut already), also in the events (timers.events) that report that run.
-- A run that kept no row (history => 'failures', a run that yielded) gets nothing.
-- Returns how many rows of timers.runs it wrote.
CREATE OR REPLACE FUNCTION timers._run_messages(p_runs jsonb) RETURNS integer
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    e record;
    v_id bigint;
    v_messages text;
    v_n integer := 0;
BEGIN
    IF jsonb_typeof(p_runs) IS DISTINCT FROM 'array' THEN
        RAISE EXCEPTION 'a run''s messages come as a JSON array of {timer_id, started_at, messages, more}'
            USING ERRCODE = '22023';
    END IF;
    FOR e IN
        SELECT x.timer_id, x.started_at, coalesce(x.messages, '') AS messages, coalesce(x.more, 0) AS more
          FROM jsonb_to_recordset(p_runs) AS x(timer_id bigint, started_at timestamptz, messages text,
                                               more bigint)
    LOOP
        CONTINUE WHEN e.messages = '' AND e.more = 0;
        UPDATE timers.runs r
           SET messages = timers._messages_cut(
                   e.messages || CASE WHEN r.messages = '' THEN '' ELSE E'\n' || r.messages END, e.more)
         WHERE r.id = (SELECT x.id FROM timers.runs x
                        WHERE x.timer_id = e.timer_id AND x.started_at = e.started_at
                          AND x.kind <> 'skipped'
                        ORDER BY x.id DESC LIMIT 1)
        RETURNING r.id, r.messages INTO v_id, v_messages;
        CONTINUE WHEN v_id IS NULL;
        v_n := v_n + 1;
        -- its events came after it started (the index on at finds them)
        UPDATE timers.events v SET messages = v_messages
         WHERE v.at >= e.started_at AND v.run_id = v_id;
        v_id := NULL;
    END LOOP;
    RETURN v_n;
END
$$;

-- ---------------------------------------------------------------------------
-- Rights
-- ---------------------------------------------------------------------------
REVOKE ALL ON FUNCTION
    timers._messages_cut(text,bigint),
    timers._error_said(text,text),
    timers._run_messages(jsonb)
    FROM PUBLIC, pgtimers_reader, pgtimers_admin, pgtimers_runner;
GRANT EXECUTE ON FUNCTION
    timers._messages_cut(text,bigint),
    timers._error_said(text,text),
    timers._run_messages(jsonb)
    TO pgtimers_runner;
