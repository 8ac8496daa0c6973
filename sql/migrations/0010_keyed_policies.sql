-- pgtimers migration 0010: keyed policies.
--
-- Versioned: applied once, in order, and frozen once released (docs/design.md).

-- A named span of silence ("stall_days" = 14 days): a timer armed with the
-- policy is owed at its last activity plus the span.
CREATE TABLE timers.keyed_policies (
    name       text PRIMARY KEY,
    span       interval NOT NULL CHECK (span > interval '0'),
    note       text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE UNIQUE INDEX keyed_policies_name_ci ON timers.keyed_policies (lower(name));

ALTER TABLE timers.keyed_timers
    -- the date the world sets, before the calendar rolls it (NULL: held, or armed before 0010)
    ADD COLUMN nominal_at timestamptz,
    ADD COLUMN calendar   text,
    ADD COLUMN roll       text CHECK (roll IN ('following', 'preceding')),
    -- the zone that decides a calendar day, and in which a policy's span is added
    ADD COLUMN zone       text NOT NULL DEFAULT 'UTC',
    ADD COLUMN policy     text,
    -- the last activity a policy's span counts from
    ADD COLUMN since      timestamptz,
    ADD CONSTRAINT keyed_calendar_rolls CHECK ((calendar IS NULL) = (roll IS NULL)),
    ADD CONSTRAINT keyed_policy_since CHECK (policy IS NULL OR since IS NOT NULL);

UPDATE timers.keyed_timers SET nominal_at = owed_at WHERE status = 'armed';

CREATE INDEX keyed_calendar ON timers.keyed_timers (lower(calendar))
    WHERE status = 'armed' AND calendar IS NOT NULL;

CREATE INDEX keyed_policy ON timers.keyed_timers (policy)
    WHERE status = 'armed' AND policy IS NOT NULL;

DROP FUNCTION IF EXISTS timers._keyed_rearm(timers.keyed_timers, name, text, text, timestamptz, text, name, text);

DROP FUNCTION IF EXISTS timers.arm(text, timestamptz, text, integer, timestamptz, text, text);

DROP FUNCTION IF EXISTS timers._arm(name, text, timestamptz, text, integer, timestamptz, text, text);
