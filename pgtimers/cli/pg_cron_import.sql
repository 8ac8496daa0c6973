-- Named queries of `pgtimers import-pg-cron`. Looked up by name.

-- name: cron_jobs
-- In the database where pg_cron keeps its jobs: every job this role may see, and
-- the zone pg_cron reads their schedules in.
SELECT coalesce(jsonb_agg(to_jsonb(j) ORDER BY j.jobid), '[]'::jsonb),
       current_setting('cron.timezone', true)
  FROM cron.job j;

-- name: import_here
SELECT jobid, jobname, timer, schedule, action, reason
  FROM timers.import_pg_cron(dry_run => %(dry_run)s);

-- name: import_jobs
SELECT jobid, jobname, timer, schedule, action, reason
  FROM timers.import_pg_cron_jobs(%(jobs)s::jsonb, dry_run => %(dry_run)s,
                                  timezone => %(timezone)s);
