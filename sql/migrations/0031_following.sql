-- pgtimers migration 0031: timers that wait for other timers (timers.save(..., after =>
-- ARRAY[...]), docs/running.md "Timers that wait for other timers"). A follower's links
-- name its upstream timers by id, so a renamed timer keeps them; each due time an
-- upstream records for a follower is a row of timers.follow_dues, written in the same
-- transaction as the upstream's record, and claimed by a runner like a run-now request.
--
-- Versioned: applied once, in order, and frozen once released (docs/design.md).

-- One row per (follower, upstream): the timers a follower waits for, in the order given.
-- No foreign key to the upstream, nor from timers.follow_dues to the follower: a key's
-- check would lock the other timer's row, and so wait for its run to end; the delete of a
-- timer removes its rows (timers._unfollow).
CREATE TABLE timers.follows (
    follower_id bigint NOT NULL REFERENCES timers.timers (id) ON DELETE CASCADE,
    upstream_id bigint NOT NULL,
    position    integer NOT NULL,
    PRIMARY KEY (follower_id, upstream_id)
);
CREATE INDEX follows_upstream ON timers.follows (upstream_id);

-- One row per (follower, due time) that an upstream has recorded: waiting for the
-- upstreams still to succeed for it, ready to run (or to be recorded as skipped, with
-- skip_reason), done (kept until every upstream has passed the due time, so that a late
-- word of one of them queues nothing twice).
CREATE TABLE timers.follow_dues (
    follower_id bigint NOT NULL,
    due_at      timestamptz NOT NULL,
    waiting_for bigint[] NOT NULL,
    skip_reason text,
    state       text NOT NULL DEFAULT 'waiting' CHECK (state IN ('waiting', 'ready', 'done')),
    queued_at   timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    ready_at    timestamptz,
    PRIMARY KEY (follower_id, due_at)
);
CREATE INDEX follow_dues_ready ON timers.follow_dues (ready_at, follower_id, due_at)
    WHERE state = 'ready';

-- One change of what timers follow at a time: a cycle is looked for in what is committed.
INSERT INTO timers.locks (name, note)
VALUES ('follows', 'one change of what timers follow at a time: the cycle check sees the others');

-- A timer's definition from jsonb gained after: a changed return type, which CREATE OR
-- REPLACE cannot make. The code (sql/code/09_timers_api.sql) creates it again.
DROP FUNCTION IF EXISTS timers._timer_args(jsonb);
