-- pgtimers migration 0023: the pg_cron import shows each job's username and command.
--
-- Versioned: applied once, in order, and frozen once released (docs/design.md).

-- Their rows gain the columns username and command: a changed return type, which
-- CREATE OR REPLACE cannot make. The code (sql/code/18_pg_cron_import.sql) creates
-- them again.
DROP FUNCTION IF EXISTS timers.import_pg_cron(boolean);
DROP FUNCTION IF EXISTS timers.import_pg_cron_jobs(jsonb, boolean, text);
