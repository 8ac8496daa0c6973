-- Named queries of the uninstall (pgtimers uninstall, alembic downgrade base). Looked up by name.
-- Statements with {} take identifiers through psycopg.sql.Identifier.

-- name: schemas
-- pgtimers' schemas in this database, their owner, and whether the current role may drop them.
SELECT n.nspname::text, pg_catalog.pg_get_userbyid(n.nspowner)::text,
       pg_catalog.pg_has_role(current_user, n.nspowner, 'USAGE')
  FROM pg_catalog.pg_namespace n
 WHERE n.nspname = ANY(%(schemas)s)
 ORDER BY n.nspname;

-- name: current_user
SELECT current_user::text;

-- name: has_relation
-- A table of pgtimers the current role may read (a role that may not is refused anyway).
SELECT pg_catalog.to_regclass(%(name)s) IS NOT NULL
       AND pg_catalog.has_table_privilege(%(name)s, 'SELECT');

-- name: has_live_runners_function
SELECT pg_catalog.to_regprocedure('timers._live_runners()') IS NOT NULL
       AND pg_catalog.has_function_privilege('timers._live_runners()', 'EXECUTE');

-- name: revision
SELECT max(version_num)::text FROM timers.alembic_version;

-- name: timer_count
SELECT count(*) FROM timers.timers;

-- name: live_runners
SELECT timers._live_runners();

-- name: executors
-- Executors in timers_exec and the roles that own them (their owners need not be us).
SELECT p.proname::text, pg_catalog.pg_get_userbyid(p.proowner)::text
  FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
 WHERE n.nspname = 'timers_exec'
 ORDER BY p.proname;

-- name: outside_dependents
-- Objects outside pgtimers' schemas that DROP SCHEMA ... CASCADE would drop with them:
-- the normal dependencies (a view on timers.status, a foreign key to timers.timers, a
-- trigger or column default calling a timers function) of the schemas and what is in them.
-- A view is named, not its _RETURN rule.
WITH inside AS (
    SELECT 'pg_catalog.pg_namespace'::regclass AS classid, n.oid AS objid
      FROM pg_catalog.pg_namespace n WHERE n.nspname = ANY(%(schemas)s)
    UNION ALL
    SELECT 'pg_catalog.pg_class'::regclass, c.oid
      FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = ANY(%(schemas)s)
    UNION ALL
    SELECT 'pg_catalog.pg_proc'::regclass, p.oid
      FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
     WHERE n.nspname = ANY(%(schemas)s)
    UNION ALL
    SELECT 'pg_catalog.pg_type'::regclass, t.oid
      FROM pg_catalog.pg_type t JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace
     WHERE n.nspname = ANY(%(schemas)s)
), dependents AS (
    SELECT DISTINCT d.classid, d.objid, d.objsubid
      FROM pg_catalog.pg_depend d JOIN inside i ON i.classid = d.refclassid AND i.objid = d.refobjid
     WHERE d.deptype = 'n'
)
SELECT DISTINCT
       CASE WHEN x.classid = 'pg_catalog.pg_rewrite'::regclass
            THEN (SELECT v.type || ' ' || v.identity
                    FROM pg_catalog.pg_rewrite r
                   CROSS JOIN LATERAL pg_catalog.pg_identify_object('pg_catalog.pg_class'::regclass, r.ev_class, 0) v
                   WHERE r.oid = x.objid)
            ELSE o.type || ' ' || o.identity END
  FROM dependents x
 CROSS JOIN LATERAL pg_catalog.pg_identify_object(x.classid, x.objid, x.objsubid) o
 CROSS JOIN LATERAL pg_catalog.pg_identify_object_as_address(x.classid, x.objid, x.objsubid) a
 WHERE coalesce(o.schema, a.object_names[1], '') <> ALL(%(schemas)s)
 ORDER BY 1;

-- name: roles
-- pgtimers' roles that exist, with the roles that are members of each (but each other).
SELECT r.rolname::text,
       coalesce(array_agg(m.rolname::text ORDER BY m.rolname)
                FILTER (WHERE m.rolname IS NOT NULL AND NOT m.rolname = ANY(%(roles)s)), '{}')
  FROM pg_catalog.pg_roles r
  LEFT JOIN pg_catalog.pg_auth_members am ON am.roleid = r.oid
  LEFT JOIN pg_catalog.pg_roles m ON m.oid = am.member
 WHERE r.rolname = ANY(%(roles)s)
 GROUP BY r.rolname
 ORDER BY r.rolname;

-- name: other_databases
SELECT d.datname::text, d.datallowconn
  FROM pg_catalog.pg_database d
 WHERE d.datname <> current_database()
 ORDER BY d.datname;

-- name: databases_granting_roles
-- The other databases where pgtimers' roles hold rights or own objects (PostgreSQL's
-- shared dependencies: readable from any database, without connecting to it).
SELECT DISTINCT d.datname::text
  FROM pg_catalog.pg_shdepend s
  JOIN pg_catalog.pg_database d ON d.oid = s.dbid
  JOIN pg_catalog.pg_roles r ON r.oid = s.refobjid
 WHERE s.refclassid = 'pg_catalog.pg_authid'::regclass
   AND r.rolname = ANY(%(roles)s)
   AND d.datname <> current_database()
 ORDER BY 1;

-- name: has_schema
SELECT count(*) > 0 FROM pg_catalog.pg_namespace n WHERE n.nspname = ANY(%(schemas)s);

-- name: install_lock
SELECT pg_catalog.pg_advisory_xact_lock(%(key)s);

-- name: lock_timeout
SELECT pg_catalog.set_config('lock_timeout', %(timeout)s, true);

-- name: drop_schemas
DROP SCHEMA IF EXISTS {} CASCADE;

-- name: drop_roles
DROP ROLE IF EXISTS {};

-- name: database_roles
-- This database's own roles (timers.use_database_roles), which go with its schemas.
SELECT s.value FROM timers.settings s WHERE s.key IN ('reader_role', 'admin_role', 'runner_role')
 ORDER BY s.key;
