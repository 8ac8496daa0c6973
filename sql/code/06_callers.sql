-- pgtimers code: who is calling: caller tickets, the admin check, audit rows, NOTIFY.
--
-- Repeatable: applied whole on every install and upgrade, after the versioned
-- migrations (docs/design.md). Each object here is defined in this file only.

-- The role that holds a kind of right in this database ('reader', 'admin' or 'runner'):
-- pgtimers_<kind>, the cluster's, unless this database has roles of its own
-- (timers.use_database_roles, recorded in timers.settings as <kind>_role).
-- PL/pgSQL, not SQL: a SQL function with a sub-select is never inlined and was planned
-- again on every call (56 µs, three calls a save); this one keeps its plan.
CREATE OR REPLACE FUNCTION timers._role(p_kind text) RETURNS name
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    RETURN COALESCE((SELECT s.value FROM timers.settings s WHERE s.key = p_kind || '_role'),
                    'pgtimers_' || p_kind)::name;
END $$;

-- One audit row; actor is the role in effect at the public call, session the login role.
-- The small bodies of this file are PL/pgSQL, not SQL: a SQL function with SET is never
-- inlined and was planned again on every call (30-50 µs each, several a save); these keep
-- their plans.
CREATE OR REPLACE FUNCTION timers._audit(p_actor name, p_action text, p_object text, p_detail jsonb)
    RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    INSERT INTO timers.audit (actor, session, action, object, detail)
    VALUES (p_actor, session_user, p_action, p_object, coalesce(p_detail, '{}'));
END $$;

-- Wake the runners of this database: they LISTEN on channel pgtimers.
CREATE OR REPLACE FUNCTION timers._notify(p_event text, p_object text) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM pg_notify('pgtimers', jsonb_build_object(
        'database', current_database(), 'event', p_event, 'timer', p_object)::text);
END $$;

-- Record an event in the outbox, timers.events (a failed run, a skipped due time, a retry
-- given up, a pause, a backfill's end, a deadline missed, a recovery; p_run: the
-- timers.runs row it reports, p_messages what that run said), and announce it to LISTEN
-- pgtimers_events. The payload is JSON {database, timer, event, due_at, attempt, error,
-- sqlstate, event_id} plus p_extra; within NOTIFY's 8,000 bytes, the error is cut (never
-- the event; the row keeps it whole). Both take effect when the transaction commits, so
-- only what happened.
CREATE OR REPLACE FUNCTION timers._event(
    p_event text, p_timer text, p_due timestamptz, p_attempt integer, p_error text,
    p_sqlstate text, p_extra jsonb DEFAULT '{}', p_run bigint DEFAULT NULL,
    p_messages text DEFAULT '') RETURNS void
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_error text := coalesce(p_error, '');
    v_payload text;
    v_over integer;
    v_budget integer;  -- bytes the error may keep
    v_keep integer;    -- characters it keeps
    v_bytes integer;
    v_id bigint;
BEGIN
    INSERT INTO timers.events (event, timer, due_at, attempt, error, sqlstate, detail, run_id, messages)
    VALUES (p_event, p_timer, p_due, p_attempt, v_error, coalesce(p_sqlstate, ''),
            coalesce(p_extra, '{}'), p_run, coalesce(p_messages, ''))
    RETURNING id INTO v_id;
    LOOP
        v_payload := (jsonb_build_object(
            'database', current_database(), 'timer', p_timer, 'event', p_event,
            'due_at', timers._iso(p_due), 'attempt', p_attempt, 'error', v_error,
            'sqlstate', coalesce(p_sqlstate, ''), 'event_id', v_id) || coalesce(p_extra, '{}'))::text;
        v_over := octet_length(v_payload) - 7999;
        EXIT WHEN v_over <= 0 OR v_error = '';
        -- cut the error by what is over, in bytes, and room for the mark; look again (JSON
        -- escapes can make it longer than its bytes)
        v_budget := octet_length(v_error) - v_over - 16;
        v_keep := greatest(v_budget, 0);
        LOOP
            v_bytes := octet_length(left(v_error, v_keep));
            EXIT WHEN v_bytes <= v_budget OR v_keep = 0;
            v_keep := greatest(v_keep - greatest((v_bytes - v_budget) / 4, 1), 0);
        END LOOP;
        v_error := CASE WHEN v_keep = 0 THEN '' ELSE left(v_error, v_keep) || ' … [cut]' END;
    END LOOP;
    PERFORM pg_notify('pgtimers_events', v_payload);
END
$$;

-- Leave this call's caller ticket: (this transaction, current_user).
CREATE OR REPLACE FUNCTION timers._ticket() RETURNS void
    LANGUAGE plpgsql VOLATILE
    AS $$
BEGIN
    INSERT INTO timers.callers DEFAULT VALUES;
END $$;

-- Take the newest ticket of p_actor in this transaction, else 42501: only that role
-- itself may act for it.
CREATE OR REPLACE FUNCTION timers._take_ticket(p_actor name, p_what text) RETURNS void
    LANGUAGE plpgsql VOLATILE
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

-- The caller is a member of pgtimers_admin (else 42501 with the GRANT to run), and
-- leaves its ticket.
CREATE OR REPLACE FUNCTION timers._require_admin(p_what text) RETURNS void
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    IF NOT pg_has_role(current_user, timers._role('admin'), 'MEMBER') THEN
        RAISE EXCEPTION 'permission denied to % : it needs the role %, and role "%" is not a member', p_what,
            timers._role('admin'), current_user
            USING ERRCODE = '42501',
                  HINT = format('An administrator can run: GRANT %I TO %I;', timers._role('admin'), current_user);
    END IF;
    PERFORM timers._ticket();
END
$$;

-- ---------------------------------------------------------------------------
-- Rights
-- ---------------------------------------------------------------------------
REVOKE ALL ON FUNCTION
    timers._role(text),
    timers._audit(name,text,text,jsonb),
    timers._notify(text,text),
    timers._event(text,text,timestamp with time zone,integer,text,text,jsonb,bigint,text),
    timers._ticket(),
    timers._take_ticket(name,text),
    timers._require_admin(text)
    FROM PUBLIC, pgtimers_reader, pgtimers_admin, pgtimers_runner;
GRANT EXECUTE ON FUNCTION
    timers._role(text),
    timers._audit(name,text,text,jsonb),
    timers._notify(text,text),
    timers._require_admin(text)
    TO PUBLIC;
GRANT EXECUTE ON FUNCTION
    timers._ticket()
    TO pgtimers_admin;
GRANT EXECUTE ON FUNCTION
    timers._event(text,text,timestamp with time zone,integer,text,text,jsonb,bigint,text)
    TO pgtimers_runner, pgtimers_admin;
