-- Named queries of `pgtimers import-pg-cron`. Looked up by name.

-- name: pin_path
-- The database of --cron-dsn may have schemas others write to: nothing below is looked
-- up there.
SET search_path = pg_catalog, pg_temp;

-- name: cron_table
-- In the database of --cron-dsn, before anything of cron.job is read: whether there is
-- a relation cron.job, and why it is not pg_cron's own table (NULL when it is: a member
-- of the extension pg_cron, a table, owned by the extension's owner), in the words of
-- timers._pg_cron_table (sql/code/18_pg_cron_import.sql).
SELECT c.oid IS NOT NULL,
       CASE WHEN c.oid IS NULL THEN NULL
            WHEN e.oid IS NULL THEN format('the extension pg_cron is not installed here, and cron.job is %s of role %s',
                                           k.kind, quote_ident(pg_get_userbyid(c.relowner)))
            WHEN NOT EXISTS (SELECT 1 FROM pg_depend d
                              WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.objsubid = 0
                                AND d.refclassid = 'pg_extension'::regclass AND d.refobjid = e.oid
                                AND d.deptype = 'e')
                 THEN format('it is not a member of the extension pg_cron (it is %s of role %s)',
                             k.kind, quote_ident(pg_get_userbyid(c.relowner)))
            WHEN c.relowner <> e.extowner
                 THEN format('it is owned by role %s, and the extension pg_cron by role %s',
                             quote_ident(pg_get_userbyid(c.relowner)), quote_ident(pg_get_userbyid(e.extowner)))
            WHEN c.relkind <> 'r' THEN format('it is %s, not a table', k.kind)
       END
  FROM (SELECT to_regclass('cron.job') AS t) r
  LEFT JOIN pg_class c ON c.oid = r.t
  LEFT JOIN pg_extension e ON e.extname = 'pg_cron'
  LEFT JOIN LATERAL (SELECT CASE c.relkind WHEN 'r' THEN 'a table' WHEN 'p' THEN 'a partitioned table'
                                           WHEN 'v' THEN 'a view' WHEN 'm' THEN 'a materialized view'
                                           WHEN 'f' THEN 'a foreign table' ELSE 'a relation' END AS kind) k ON true;

-- name: cron_jobs
-- In the database where pg_cron keeps its jobs, once cron_table found its own table:
-- every job this role may see, and the zone pg_cron reads their schedules in.
SELECT coalesce(jsonb_agg(to_jsonb(j) ORDER BY j.jobid), '[]'::jsonb),
       current_setting('cron.timezone', true)
  FROM cron.job j;

-- name: import_here
SELECT jobid, jobname, timer, schedule, action, reason, username, command
  FROM timers.import_pg_cron(dry_run => %(dry_run)s, run_group => %(run_group)s);

-- name: import_jobs
SELECT jobid, jobname, timer, schedule, action, reason, username, command
  FROM timers.import_pg_cron_jobs(%(jobs)s::jsonb, dry_run => %(dry_run)s,
                                  timezone => %(timezone)s, run_group => %(run_group)s);
