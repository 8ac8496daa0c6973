-- pgtimers migration 0001: schema.
--
-- Versioned: applied once, in order, and frozen once released (docs/design.md).

-- pgtimers 0001: schema, roles, tables.
-- Everything lives in schema timers; the per-owner executors live in timers_exec,
-- a schema no timer owner can reach by name (see docs/security.md).
DO $roles$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'pgtimers_reader') THEN
        CREATE ROLE pgtimers_reader NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'pgtimers_admin') THEN
        CREATE ROLE pgtimers_admin NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'pgtimers_runner') THEN
        CREATE ROLE pgtimers_runner NOLOGIN;
    END IF;
    IF NOT pg_catalog.pg_has_role('pgtimers_admin', 'pgtimers_reader', 'MEMBER') THEN
        GRANT pgtimers_reader TO pgtimers_admin;
    END IF;
END
$roles$;

CREATE SCHEMA IF NOT EXISTS timers;

CREATE SCHEMA IF NOT EXISTS timers_exec;

-- Key/value settings of this database's timers (default zone, history retention).
CREATE TABLE timers.settings (
    key   text PRIMARY KEY,
    value text NOT NULL
);

INSERT INTO timers.settings (key, value) VALUES
    ('timezone', 'UTC'),
    ('runs_retention', '30 days');

-- Frozen clocks for tests: a timer attached to one lives on its time.
CREATE TABLE timers.test_clocks (
    name       text PRIMARY KEY,
    now        timestamptz NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    created_by name NOT NULL DEFAULT current_user
);

-- Trading calendars: week eras, holidays and extra trading days.
CREATE TABLE timers.calendars (
    name        text PRIMARY KEY,
    valid_from  date,
    valid_until date,
    note        text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE UNIQUE INDEX calendars_name_ci ON timers.calendars (lower(name));

-- One row per era: from from_day on, the calendar trades on the days of the mask
-- (bit 0 = Sunday .. bit 6 = Saturday), until the next era starts.
CREATE TABLE timers.calendar_weeks (
    calendar text NOT NULL REFERENCES timers.calendars (name) ON DELETE CASCADE ON UPDATE CASCADE,
    from_day date NOT NULL,
    days     smallint NOT NULL CHECK (days BETWEEN 0 AND 127),
    PRIMARY KEY (calendar, from_day)
);

-- Exceptions to the week: a holiday (trading = false) or an extra trading day.
CREATE TABLE timers.calendar_days (
    calendar text NOT NULL REFERENCES timers.calendars (name) ON DELETE CASCADE ON UPDATE CASCADE,
    day      date NOT NULL,
    trading  boolean NOT NULL,
    note     text NOT NULL DEFAULT '',
    PRIMARY KEY (calendar, day)
);

CREATE TABLE timers.timers (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name             text NOT NULL,
    schedule         text NOT NULL,
    spec             jsonb NOT NULL,
    sql              text NOT NULL,
    enabled          boolean NOT NULL DEFAULT true,
    timezone         text,
    catch_up         text CHECK (catch_up IN ('skip', 'latest', 'all')),
    start_at         timestamptz,
    end_at           timestamptz,
    max_runs         bigint CHECK (max_runs > 0),
    timeout          interval,
    locked           boolean NOT NULL DEFAULT false,
    test_clock       text REFERENCES timers.test_clocks (name) ON DELETE SET NULL,
    owner            name NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    -- planning: the next due time, NULL when off, expired or voided
    next_due_at      timestamptz,
    expired          boolean NOT NULL DEFAULT false,
    -- high-water mark of the committed due times: the exactly-once guard
    last_due_at      timestamptz,
    -- results (the seed's last_* fields and counters)
    last_run_at      timestamptz,
    last_late_ms     bigint NOT NULL DEFAULT 0,
    max_late_ms      bigint NOT NULL DEFAULT 0,
    last_ok          boolean,
    last_error       text NOT NULL DEFAULT '',
    last_took_ms     bigint NOT NULL DEFAULT 0,
    last_rows        bigint NOT NULL DEFAULT 0,
    runs             bigint NOT NULL DEFAULT 0,
    scheduled_runs   bigint NOT NULL DEFAULT 0,
    failures         bigint NOT NULL DEFAULT 0,
    skipped          bigint NOT NULL DEFAULT 0,
    last_skip_at     timestamptz,
    last_skip_reason text NOT NULL DEFAULT '',
    caught_up        bigint NOT NULL DEFAULT 0,
    CONSTRAINT timers_name_rule CHECK (name ~ '^[A-Za-z0-9_-]{1,64}$')
);

CREATE UNIQUE INDEX timers_name_ci ON timers.timers (lower(name));

-- The due-set index: only armed timers are in it, so claiming never scans the rest.
CREATE INDEX timers_due ON timers.timers (next_due_at, id)
    WHERE next_due_at IS NOT NULL;

CREATE TABLE timers.runs (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    timer_id    bigint NOT NULL,
    timer       text NOT NULL,
    kind        text NOT NULL CHECK (kind IN ('scheduled', 'catch_up', 'run_now', 'skipped')),
    due_at      timestamptz,
    started_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    took_ms     bigint NOT NULL DEFAULT 0,
    late_ms     bigint NOT NULL DEFAULT 0,
    ok          boolean,
    error       text NOT NULL DEFAULT '',
    rows        bigint NOT NULL DEFAULT 0,
    reason      text NOT NULL DEFAULT '',
    runner      text NOT NULL DEFAULT ''
);

CREATE INDEX runs_timer_started ON timers.runs (timer_id, started_at DESC);

CREATE INDEX runs_started ON timers.runs (started_at);

CREATE TABLE timers.audit (
    id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    actor     name NOT NULL,
    session   name NOT NULL,
    action    text NOT NULL,
    object    text NOT NULL,
    detail    jsonb NOT NULL DEFAULT '{}'
);

CREATE INDEX audit_at ON timers.audit (at);
