-- pgtimers code: roles of this database's own, for several tenants on one cluster.
--
-- Repeatable: applied whole on every install and upgrade, after the versioned
-- migrations (docs/design.md), after every other code file but the last: the code
-- above grants to the cluster's roles (pgtimers_reader, pgtimers_admin,
-- pgtimers_runner); in a database with roles of its own, this file moves those rights
-- to them again. Each object here is defined in this file only.

-- Move every right role p_from holds on pgtimers' schemas and what is in them (the
-- schemas, tables, views and their columns, functions and procedures) to role p_to:
-- granted to p_to, revoked from p_from. How many rights moved. SECURITY DEFINER: the
-- rights are the installing role's to give.
CREATE OR REPLACE FUNCTION timers._move_rights(p_from name, p_to name) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_from oid := (SELECT r.oid FROM pg_roles r WHERE r.rolname = p_from);
    r record;
    n integer := 0;
BEGIN
    IF v_from IS NULL OR p_from = p_to THEN
        RETURN 0;
    END IF;
    FOR r IN
        SELECT format('%s ON SCHEMA %I', a.privilege_type, s.nspname) AS what
          FROM pg_namespace s, aclexplode(s.nspacl) a
         WHERE s.nspname IN ('timers', 'timers_exec') AND a.grantee = v_from
        UNION ALL
        -- columns before their tables: a table's REVOKE takes its columns' too
        SELECT format('%s (%I) ON %s', a.privilege_type, t.attname, c.oid::regclass)
          FROM pg_class c JOIN pg_attribute t ON t.attrelid = c.oid, aclexplode(t.attacl) a
         WHERE c.relnamespace = 'timers'::regnamespace AND t.attnum > 0 AND a.grantee = v_from
        UNION ALL
        SELECT format('%s ON %s', a.privilege_type, c.oid::regclass)
          FROM pg_class c, aclexplode(c.relacl) a
         WHERE c.relnamespace = 'timers'::regnamespace AND a.grantee = v_from
        UNION ALL
        SELECT format('EXECUTE ON %s %s', CASE p.prokind WHEN 'p' THEN 'PROCEDURE' ELSE 'FUNCTION' END,
                      p.oid::regprocedure)
          FROM pg_proc p, aclexplode(p.proacl) a
         WHERE p.pronamespace = 'timers'::regnamespace AND a.grantee = v_from
    LOOP
        EXECUTE format('GRANT %s TO %I', r.what, p_to);
        EXECUTE format('REVOKE %s FROM %I', r.what, p_from);
        n := n + 1;
    END LOOP;
    RETURN n;
END
$$;

-- The name of this database's own role of a kind: pgtimers_<database>_<kind>, the
-- database's name folded to lower-case letters, digits and '_' (at most 40 of them).
CREATE OR REPLACE FUNCTION timers._database_role_name(p_kind text) RETURNS name
    LANGUAGE sql STABLE
    AS $$
        SELECT format('pgtimers_%s_%s', left(regexp_replace(lower(current_database()), '[^a-z0-9_]', '_', 'g'), 40),
                      p_kind)::name
    $$;

-- The role p_role, made now (NOLOGIN) when it does not exist; 42501 naming what to do
-- when the installing role may not make roles.
CREATE OR REPLACE FUNCTION timers._make_role(p_role name) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles r WHERE r.rolname = p_role) THEN
        RETURN;
    END IF;
    BEGIN
        EXECUTE format('CREATE ROLE %I NOLOGIN', p_role);
    EXCEPTION WHEN insufficient_privilege THEN
        RAISE EXCEPTION 'role % does not exist, and role % may not create roles', quote_ident(p_role), quote_ident(current_user)
            USING ERRCODE = '42501',
                  HINT = format('A role with CREATEROLE can run: CREATE ROLE %I NOLOGIN; then call timers.use_database_roles again (or name roles that exist: reader => ..., admin => ..., runner => ...).', p_role);
    END;
END
$$;

-- Give this database roles of its own for reading, changing and running timers (or,
-- with enabled => false, go back to the cluster's). Every right the cluster's
-- pgtimers_reader, pgtimers_admin and pgtimers_runner had here moves to the database's
-- roles, so that a member of the cluster's roles (an admin of another database) can do
-- nothing here, and this database's owner can grant its roles without the ADMIN option
-- on the cluster's. The roles are made when they do not exist (the installing role then
-- needs CREATEROLE), named pgtimers_<database>_reader, _admin, _runner unless named here;
-- the admin role is made a member of the reader role. Only a superuser or the role that
-- installed pgtimers (the owner of schema timers) may. Audited. (timers.use_database_roles
-- below is the public call.)
CREATE OR REPLACE FUNCTION timers._use_database_roles(
    p_enabled boolean, p_reader name, p_admin name, p_runner name) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_kinds constant text[] := ARRAY['reader', 'admin', 'runner'];
    v_asked constant name[] := ARRAY[p_reader, p_admin, p_runner];
    v_owner name := (SELECT n.nspowner::regrole::text FROM pg_namespace n WHERE n.nspname = 'timers');
    v_now name[] := '{}';
    v_new name[] := '{}';
    v_moved integer := 0;
    i integer;
BEGIN
    IF NOT (coalesce((SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = session_user), false)
            OR pg_has_role(session_user, v_owner, CASE WHEN current_setting('server_version_num')::int >= 160000
                                                       THEN 'SET' ELSE 'MEMBER' END)) THEN
        RAISE EXCEPTION 'permission denied to choose the roles of database %: only a superuser or the role that installed pgtimers (%) may', current_database(), quote_ident(v_owner)
            USING ERRCODE = '42501';
    END IF;
    IF p_enabled IS NULL THEN
        RAISE EXCEPTION 'enabled must be true or false, not NULL' USING ERRCODE = '22004';
    END IF;
    FOR i IN 1 .. 3 LOOP
        v_now := v_now || timers._role(v_kinds[i]);
        v_new := v_new || CASE WHEN NOT p_enabled THEN ('pgtimers_' || v_kinds[i])::name
                               ELSE coalesce(v_asked[i],
                                             CASE WHEN v_now[i] <> 'pgtimers_' || v_kinds[i] THEN v_now[i] END,
                                             timers._database_role_name(v_kinds[i])) END;
    END LOOP;
    IF cardinality(ARRAY(SELECT DISTINCT x FROM unnest(v_new) x)) < 3 THEN
        RAISE EXCEPTION 'the reader, admin and runner roles must be three roles, not %', array_to_string(v_new, ', ')
            USING ERRCODE = '22023';
    END IF;
    FOR i IN 1 .. 3 LOOP
        PERFORM timers._make_role(v_new[i]);
    END LOOP;
    IF p_enabled AND NOT pg_has_role(v_new[2], v_new[1], 'MEMBER') THEN
        EXECUTE format('GRANT %I TO %I', v_new[1], v_new[2]);
    END IF;
    FOR i IN 1 .. 3 LOOP
        DELETE FROM timers.settings s WHERE s.key = v_kinds[i] || '_role';
        IF p_enabled THEN
            INSERT INTO timers.settings (key, value) VALUES (v_kinds[i] || '_role', v_new[i]);
        END IF;
        v_moved := v_moved + timers._move_rights(v_now[i], v_new[i]);
    END LOOP;
    -- Before 16, CREATEROLE may grant any role that is not a superuser: another tenant's
    -- owner can make itself a member of these roles.
    IF p_enabled AND current_setting('server_version_num')::int < 160000 THEN
        RAISE WARNING 'before PostgreSQL 16, any role with CREATEROLE can grant itself %, % or %, and with them the timers of database %',
                      v_new[1], v_new[2], v_new[3], current_database()
            USING HINT = 'Upgrade to PostgreSQL 16 or later (CREATEROLE then grants only the roles it has the ADMIN option on), or give the roles of other tenants no CREATEROLE.';
    END IF;
    PERFORM timers._audit(session_user, 'use_database_roles', current_database(), jsonb_build_object(
        'enabled', p_enabled, 'reader', v_new[1], 'admin', v_new[2], 'runner', v_new[3], 'was', v_now,
        'rights_moved', v_moved));
    RETURN jsonb_build_object('database', current_database(), 'reader', v_new[1], 'admin', v_new[2],
                              'runner', v_new[3], 'rights_moved', v_moved);
END
$$;

-- The public call (an invoker, as every public function): its body above runs as the role
-- that installed pgtimers, which owns what is granted, and only that role (and members
-- with its rights) or a superuser may execute it; anyone else is told so.
CREATE OR REPLACE FUNCTION timers.use_database_roles(
    enabled boolean DEFAULT true, reader name DEFAULT NULL, admin name DEFAULT NULL,
    runner name DEFAULT NULL) RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_owner name := (SELECT n.nspowner::regrole::text FROM pg_namespace n WHERE n.nspname = 'timers');
BEGIN
    IF NOT (coalesce((SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = current_user), false)
            OR has_function_privilege('timers._use_database_roles(boolean,name,name,name)', 'EXECUTE')) THEN
        RAISE EXCEPTION 'permission denied to choose the roles of database %: only a superuser or the role that installed pgtimers (%) may', current_database(), quote_ident(v_owner)
            USING ERRCODE = '42501';
    END IF;
    RETURN timers._use_database_roles(use_database_roles.enabled, use_database_roles.reader,
                                      use_database_roles.admin, use_database_roles.runner);
END
$$;

COMMENT ON FUNCTION timers.use_database_roles(boolean, name, name, name) IS
    'Give this database roles of its own (pgtimers_<database>_reader, _admin, _runner, or the names given) instead of the cluster''s pgtimers_reader/_admin/_runner, which then have no rights here; enabled => false goes back. A superuser or the role that installed pgtimers only; audited. Returns the roles.';

-- ---------------------------------------------------------------------------
-- Rights
-- ---------------------------------------------------------------------------
REVOKE ALL ON FUNCTION
    timers._move_rights(name,name),
    timers._database_role_name(text),
    timers._make_role(name),
    timers._use_database_roles(boolean,name,name,name),
    timers.use_database_roles(boolean,name,name,name)
    FROM PUBLIC, pgtimers_reader, pgtimers_admin, pgtimers_runner;
-- it says who may call it (a superuser or the installing role, who owns the body)
GRANT EXECUTE ON FUNCTION
    timers.use_database_roles(boolean,name,name,name)
    TO PUBLIC;

-- In a database with roles of its own, the rights the code above granted to the
-- cluster's roles go to them again.
DO $roles$
DECLARE
    v_kind text;
BEGIN
    FOREACH v_kind IN ARRAY ARRAY['reader', 'admin', 'runner'] LOOP
        IF timers._role(v_kind) OPERATOR(pg_catalog.<>) ('pgtimers_' OPERATOR(pg_catalog.||) v_kind) THEN
            PERFORM timers._move_rights(('pgtimers_' OPERATOR(pg_catalog.||) v_kind)::name, timers._role(v_kind));
        END IF;
    END LOOP;
END
$roles$;
