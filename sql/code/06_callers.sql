-- pgtimers code: who is calling: caller tickets, the admin check, audit rows, NOTIFY.
--
-- Repeatable: applied whole on every install and upgrade, after the versioned
-- migrations (docs/design.md). Each object here is defined in this file only.

-- One audit row; actor is the role in effect at the public call, session the login role.
CREATE OR REPLACE FUNCTION timers._audit(p_actor name, p_action text, p_object text, p_detail jsonb)
    RETURNS void
    LANGUAGE sql
    SET search_path = pg_catalog, pg_temp
    AS $$
        INSERT INTO timers.audit (actor, session, action, object, detail)
        VALUES (p_actor, session_user, p_action, p_object, coalesce(p_detail, '{}'))
    $$;

-- Wake the runners of this database: they LISTEN on channel pgtimers.
CREATE OR REPLACE FUNCTION timers._notify(p_event text, p_object text) RETURNS void
    LANGUAGE sql
    SET search_path = pg_catalog, pg_temp
    AS $$
        SELECT pg_notify('pgtimers', jsonb_build_object(
            'database', current_database(), 'event', p_event, 'timer', p_object)::text)
    $$;

  -- pruning ended transactions
-- Leave this call's caller ticket: (this transaction, current_user).
CREATE OR REPLACE FUNCTION timers._ticket() RETURNS void
    LANGUAGE sql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$ INSERT INTO timers.callers DEFAULT VALUES $$;

-- Take the newest ticket of p_actor in this transaction, else 42501: only that role
-- itself may act for it.
CREATE OR REPLACE FUNCTION timers._take_ticket(p_actor name, p_what text) RETURNS void
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
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
    IF NOT pg_has_role(current_user, 'pgtimers_admin', 'MEMBER') THEN
        RAISE EXCEPTION 'permission denied to % : it needs the role pgtimers_admin, and role "%" is not a member', p_what, current_user
            USING ERRCODE = '42501',
                  HINT = 'An administrator can run: GRANT pgtimers_admin TO ' || quote_ident(current_user) || ';';
    END IF;
    PERFORM timers._ticket();
END
$$;

-- ---------------------------------------------------------------------------
-- Rights
-- ---------------------------------------------------------------------------
REVOKE ALL ON FUNCTION
    timers._audit(name,text,text,jsonb),
    timers._notify(text,text),
    timers._ticket(),
    timers._take_ticket(name,text),
    timers._require_admin(text)
    FROM PUBLIC, pgtimers_reader, pgtimers_admin, pgtimers_runner;
GRANT EXECUTE ON FUNCTION
    timers._audit(name,text,text,jsonb),
    timers._notify(text,text),
    timers._require_admin(text)
    TO PUBLIC;
GRANT EXECUTE ON FUNCTION
    timers._ticket()
    TO pgtimers_admin;
