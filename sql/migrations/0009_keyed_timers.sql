-- pgtimers migration 0009: keyed timers.
--
-- Versioned: applied once, in order, and frozen once released (docs/design.md).

CREATE TABLE timers.keyed_timers (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    key           text COLLATE "C" NOT NULL,
    -- the key's parts: the seed's "on" (the job, clock occurrence, subscription...)
    subject       text COLLATE "C" NOT NULL,
    kind          text COLLATE "C" NOT NULL,
    name          text COLLATE "C" NOT NULL,
    occurrence    text COLLATE "C" NOT NULL,
    n             integer CHECK (n >= 0),
    status        text NOT NULL DEFAULT 'armed'
                  CHECK (status IN ('armed', 'fired', 'superseded', 'held', 'void')),
    place         smallint NOT NULL DEFAULT 5 CHECK (place BETWEEN 1 AND 8),
    owed_at       timestamptz,
    armed_at      timestamptz NOT NULL,
    fired_at      timestamptz,
    late_by       interval,
    -- a deadline's late time: a resume never re-arms after it
    late_at       timestamptz,
    attempt       integer NOT NULL DEFAULT 0,
    wakes         integer NOT NULL DEFAULT 0,
    -- the transaction that committed the fire (pg_current_xact_id() of the run)
    commit        xid8,
    superseded_by text COLLATE "C",
    superseded_at timestamptz,
    -- the cause of a supersede (move, policy, calendar, due, repin, catch_up) or a void
    cause         text,
    held_since    timestamptz,
    held_by       text,
    remaining     interval,
    resumed_at    timestamptz,
    sql           text NOT NULL,
    owner         name NOT NULL,
    version       text NOT NULL,
    test_clock    text REFERENCES timers.test_clocks (name) ON DELETE SET NULL,
    -- the run's outcome
    ok            boolean,
    error         text NOT NULL DEFAULT '',
    sqlstate      text NOT NULL DEFAULT '',
    rows          bigint,
    took_ms       bigint,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT keyed_timers_key UNIQUE (key),
    CONSTRAINT keyed_kind CHECK (kind IN ('cycle', 'schedule', 'ask', 'task', 'deadline', 'rung',
                                          'due', 'window', 'money')),
    CONSTRAINT keyed_armed_owes CHECK (status <> 'armed' OR owed_at IS NOT NULL),
    CONSTRAINT keyed_held_owes_nothing CHECK (status <> 'held' OR (owed_at IS NULL AND remaining IS NOT NULL))
);

-- The due sets, in tick order: the server's clock, and each test clock.
CREATE INDEX keyed_due ON timers.keyed_timers (owed_at, place, key)
    WHERE status = 'armed' AND test_clock IS NULL;

CREATE INDEX keyed_due_test_clock ON timers.keyed_timers (test_clock, owed_at, place, key)
    WHERE status = 'armed' AND test_clock IS NOT NULL;

CREATE INDEX keyed_subject ON timers.keyed_timers (subject, kind, occurrence);

-- SQL already checked: arming many timers with one SQL checks it once (the
-- save-time check takes a lock per call, which a bulk arm would run out of).
CREATE INDEX keyed_sql ON timers.keyed_timers (md5(sql));

CREATE INDEX keyed_fired_test_clock ON timers.keyed_timers (test_clock, fired_at)
    WHERE status = 'fired' AND test_clock IS NOT NULL;

-- Every arm, re-arm (with its cause), fire, supersede, hold, resume and void.
CREATE TABLE timers.keyed_events (
    id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    -- the time on the timer's clock (its test clock's, else the server's)
    clock_at  timestamptz,
    key       text COLLATE "C" NOT NULL,
    event     text NOT NULL CHECK (event IN ('armed', 'moved', 'held', 'resumed', 'repinned',
                                             'superseded', 'fired', 'void')),
    cause     text NOT NULL,
    actor     name NOT NULL DEFAULT current_user,
    detail    jsonb NOT NULL DEFAULT '{}'
);

CREATE INDEX keyed_events_key ON timers.keyed_events (key, id);
