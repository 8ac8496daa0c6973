-- pgtimers migration 0017: zones.
--
-- Versioned: applied once, in order, and frozen once released (docs/design.md).

-- The zone a timer's wall times are read in, resolved: its own, else the database's
-- default (timers.set_timezone keeps it), else UTC. Planning a due time read the
-- default from timers.settings at every step; a run plans two or more.
ALTER TABLE timers.timers ADD COLUMN zone text;
UPDATE timers.timers
   SET zone = coalesce(timezone, (SELECT s.value FROM timers.settings s WHERE s.key = 'timezone'), 'UTC');
ALTER TABLE timers.timers ALTER COLUMN zone SET NOT NULL;
