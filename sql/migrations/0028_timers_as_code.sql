-- pgtimers migration 0028: timers as code. A timer records which declared set manages it
-- (timers.apply), and applies take turns.
--
-- Versioned: applied once, in order, and frozen once released (docs/design.md).

ALTER TABLE timers.timers
    -- the label of the file set (timers.apply's spec, pgtimers apply --managed-by) that
    -- saved it last; NULL: saved by hand, which a prune never deletes
    ADD COLUMN managed_by text;

INSERT INTO timers.locks (name, note)
VALUES ('apply', 'one timers.apply at a time: a second one waits for the first to commit');
