-- pgtimers migration 0021: parked runners.
--
-- Versioned: applied once, in order, and frozen once released (docs/design.md).

-- A runner whose connection budget is short closes the control session of a database
-- with nothing due soon and promises to be back by parked_until: until then it still
-- serves the database (no downtime rules, CALL timers.run waits for it).
ALTER TABLE timers.runners ADD COLUMN parked_until timestamptz;
