-- pgtimers migration 0024: fair claims under overload.
--
-- Versioned: applied once, in order, and frozen once released (docs/design.md).

-- The claim takes, among timers due at the same fire time, the one that ran longest ago
-- (never first), then the lowest id: without last_run_at in between, a timer passed over
-- when more are due than the workers can run had the same fire time as the winners the
-- next time round and lost to their lower ids again. The index serves that order, so
-- the claim stays one index scan and no sort. last_run_at changes in the same UPDATE
-- as next_due_at (fire_at, already a key here), so the wider key costs no HOT update.
DROP INDEX timers.timers_due;
CREATE INDEX timers_due ON timers.timers (fire_at, last_run_at NULLS FIRST, id)
    WHERE fire_at IS NOT NULL AND test_clock IS NULL;
