-- pgtimers code: webhook deliveries of the event outbox (timers.events), at least once.
--
-- Repeatable: applied whole on every install and upgrade, after the versioned
-- migrations (docs/design.md). Each object here is defined in this file only.
--
-- A webhook target is one [[notify]] section of a runner's config (its name in column
-- `target`: pgtimers/runner/notify_config.py). Each runner serving the database, for
-- each of its targets:
--   1. enqueues (timers._deliveries_enqueue): one timers.event_deliveries row per event
--      of the outbox the target wants, after the target's cursor (timers.notify_cursors);
--   2. claims (timers._deliveries_claim) the rows that are open and due, with SKIP LOCKED
--      and a lease, in a transaction of their own that commits before it POSTs;
--   3. after the POST, writes what came of it: timers._delivery_done (2xx) or
--      timers._delivery_failed (anything else: a retry with backoff, or, 24 hours after
--      the event, given up with the last error).
-- A runner killed during its POST leaves the lease, which ends: the row is claimable
-- again, by any runner, and the receiver gets the same delivery_id again.

-- A timer name pattern of [[notify]] `timers` as a LIKE pattern: `*` any characters,
-- `?` one character, everything else itself (no escape character in the glob).
CREATE OR REPLACE FUNCTION timers._glob_like(p_glob text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
SELECT replace(replace(replace(replace(replace(coalesce(p_glob, '*'),
           '\', '\\'), '%', '\%'), '_', '\_'), '*', '%'), '?', '_')
$$;

-- The delivery_id of event p_event to target p_target: the same on every redelivery, by
-- any runner, and different for each database, event and target (an md5 in the shape of
-- a uuid; the event's time is in it, so a database restored into another with the same
-- ids does not repeat another's ids).
CREATE OR REPLACE FUNCTION timers._delivery_id(p_event bigint, p_at timestamptz, p_target text)
    RETURNS uuid
    LANGUAGE sql STABLE
    AS $$
SELECT md5(concat_ws('/', current_database(), p_event::text,
                     to_char(p_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'), p_target))::uuid
$$;

-- For webhook target p_target: a delivery row per event of the outbox after its cursor
-- whose event is one of p_events (NULL: every event) and whose timer matches the glob
-- p_timers (NULL: every timer); the number of rows made. NULL when another runner is
-- doing it for this target right now (its cursor row is locked: SKIP LOCKED).
--
-- A target seen for the first time starts with the events of the last hour: a new
-- [[notify]] section tells of what just happened, not of the whole history.
--
-- The cursor trails the newest event by 10 minutes, and the events after it are looked
-- at again on each call (those already enqueued are left as they are): an event is
-- numbered when its transaction writes it and seen when that commits, so one numbered
-- before another can be seen after it; one whose transaction commits within 10 minutes
-- of writing it is never passed over. (timers._event writes events at the end of what
-- they report, just before the commit.)
CREATE OR REPLACE FUNCTION timers._deliveries_enqueue(
    p_target text, p_events text[], p_timers text, p_runner text) RETURNS integer
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    c_first_look constant interval := interval '1 hour';
    c_settle constant interval := interval '10 minutes';
    v_cursor bigint;
    v_like text := timers._glob_like(p_timers);
    v_made integer;
BEGIN
    IF p_target IS NULL OR p_target = '' THEN
        RAISE EXCEPTION 'a webhook target needs a name' USING ERRCODE = '22004';
    END IF;
    SELECT c.last_event_id INTO v_cursor
      FROM timers.notify_cursors c WHERE c.target = p_target
       FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        IF EXISTS (SELECT FROM timers.notify_cursors c WHERE c.target = p_target) THEN
            RETURN NULL;  -- locked: another runner enqueues for it now
        END IF;
        v_cursor := coalesce((SELECT e.id FROM timers.events e
                               WHERE e.at < clock_timestamp() - c_first_look
                               ORDER BY e.at DESC, e.id DESC LIMIT 1), 0);
        INSERT INTO timers.notify_cursors (target, last_event_id)
        VALUES (p_target, v_cursor)
        ON CONFLICT (target) DO NOTHING;
        IF NOT FOUND THEN
            RETURN NULL;  -- another runner made it a moment ago
        END IF;
    END IF;
    INSERT INTO timers.event_deliveries (event_id, target, delivery_id)
    SELECT e.id, p_target, timers._delivery_id(e.id, e.at, p_target)
      FROM timers.events e
     WHERE e.id > v_cursor
       AND (p_events IS NULL OR e.event = ANY (p_events))
       AND e.timer LIKE v_like
     ORDER BY e.id
    ON CONFLICT (event_id, target) DO NOTHING;
    GET DIAGNOSTICS v_made = ROW_COUNT;
    UPDATE timers.notify_cursors c
       SET last_event_id = greatest(c.last_event_id, coalesce(
               (SELECT max(e.id) FROM timers.events e
                 WHERE e.id > v_cursor AND e.at < clock_timestamp() - c_settle), 0)),
           seen_at = clock_timestamp()
     WHERE c.target = p_target;
    RETURN v_made;
END
$$;

-- Up to p_limit deliveries of the targets p_targets that are open (neither delivered nor
-- given up) and due (next_at passed: a first try, a retry whose backoff is over, or a
-- lease that ended because its runner died during the POST), oldest first, each with its
-- event. Each is leased to p_runner for p_lease (next_at moves to the lease's end, so
-- nobody else claims it meanwhile) and counts one more attempt. The caller commits this
-- before it POSTs; SKIP LOCKED: rows another runner is claiming are left to it.
CREATE OR REPLACE FUNCTION timers._deliveries_claim(
    p_targets text[], p_runner text, p_limit integer, p_lease interval)
    RETURNS TABLE (event_id bigint, target text, delivery_id uuid, attempts integer,
                   at timestamptz, event text, timer text, due_at timestamptz,
                   attempt integer, error text, sqlstate text, detail jsonb,
                   messages text)
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_now timestamptz := clock_timestamp();
BEGIN
    IF p_lease IS NULL OR p_lease <= interval '0' THEN
        RAISE EXCEPTION 'a delivery''s lease must be a positive interval, not %', p_lease
            USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    WITH due AS (
        SELECT d.event_id, d.target
          FROM timers.event_deliveries d
         WHERE d.delivered_at IS NULL AND d.given_up_at IS NULL
           AND d.next_at <= v_now
           AND d.target = ANY (p_targets)
         ORDER BY d.next_at, d.event_id
         LIMIT greatest(p_limit, 0)
           FOR UPDATE SKIP LOCKED
    ), leased AS (
        UPDATE timers.event_deliveries d
           SET attempts = d.attempts + 1,
               leased_until = v_now + p_lease,
               leased_by = p_runner,
               next_at = v_now + p_lease
          FROM due
         WHERE d.event_id = due.event_id AND d.target = due.target
        RETURNING d.event_id, d.target, d.delivery_id, d.attempts
    )
    SELECT l.event_id, l.target, l.delivery_id, l.attempts, e.at, e.event, e.timer,
           e.due_at, e.attempt, e.error, e.sqlstate, e.detail, e.messages
      FROM leased l JOIN timers.events e ON e.id = l.event_id
     ORDER BY l.event_id;
END
$$;

-- Delivery (p_event, p_target) was answered 2xx (p_status): delivered. Whoever POSTed
-- it, it is delivered (a runner whose lease ended may finish after another claimed it:
-- the receiver then had it twice, with the same delivery_id). False when it was already
-- delivered or given up.
CREATE OR REPLACE FUNCTION timers._delivery_done(
    p_event bigint, p_target text, p_runner text, p_status integer) RETURNS boolean
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    UPDATE timers.event_deliveries d
       SET delivered_at = clock_timestamp(), last_status = p_status,
           leased_until = NULL, leased_by = p_runner, next_at = clock_timestamp()
     WHERE d.event_id = p_event AND d.target = p_target
       AND d.delivered_at IS NULL AND d.given_up_at IS NULL;
    RETURN FOUND;
END
$$;

-- Delivery (p_event, p_target) by p_runner failed: p_status the HTTP status (NULL: no
-- answer: a timeout, a refused connection), p_error what went wrong. It is tried again
-- after a backoff that doubles with each attempt, from 2 seconds up to an hour, and at
-- the latest 24 hours after the event; a failure at or after those 24 hours gives it up
-- (undeliverable, with this error). Returns 'retrying' or 'undeliverable', and NULL
-- when it is no longer this runner's (delivered, given up, or claimed by another runner
-- after this one's lease ended: that one writes what comes of it).
CREATE OR REPLACE FUNCTION timers._delivery_failed(
    p_event bigint, p_target text, p_runner text, p_status integer, p_error text,
    OUT state text, OUT next_at timestamptz)
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    c_give_up constant interval := interval '24 hours';
    c_first constant double precision := 2;      -- seconds
    c_longest constant double precision := 3600;  -- seconds
    v_now timestamptz := clock_timestamp();
    v_at timestamptz;
    v_attempts integer;
BEGIN
    SELECT e.at, d.attempts INTO v_at, v_attempts
      FROM timers.event_deliveries d JOIN timers.events e ON e.id = d.event_id
     WHERE d.event_id = p_event AND d.target = p_target
       AND d.delivered_at IS NULL AND d.given_up_at IS NULL
       AND d.leased_by = p_runner
       FOR UPDATE OF d;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF v_now >= v_at + c_give_up THEN
        state := 'undeliverable';
        UPDATE timers.event_deliveries d
           SET given_up_at = v_now, last_status = p_status, last_error = coalesce(p_error, ''),
               leased_until = NULL, next_at = v_now
         WHERE d.event_id = p_event AND d.target = p_target;
        RETURN;
    END IF;
    state := 'retrying';
    next_at := least(
        v_now + make_interval(secs => least(c_first * power(2, greatest(v_attempts - 1, 0)),
                                            c_longest)),
        v_at + c_give_up);
    UPDATE timers.event_deliveries d
       SET next_at = _delivery_failed.next_at, last_status = p_status,
           last_error = coalesce(p_error, ''), leased_until = NULL
     WHERE d.event_id = p_event AND d.target = p_target;
END
$$;

-- Every webhook delivery: the event, where to, and how it went.
CREATE OR REPLACE VIEW timers.deliveries AS
SELECT d.event_id,
       e.event,
       e.timer,
       e.due_at,
       d.target,
       d.delivery_id,
       CASE WHEN d.delivered_at IS NOT NULL THEN 'delivered'
            WHEN d.given_up_at IS NOT NULL THEN 'undeliverable'
            WHEN d.attempts > 0 THEN 'retrying'
            ELSE 'pending' END AS state,
       d.attempts,
       CASE WHEN d.delivered_at IS NULL AND d.given_up_at IS NULL THEN d.next_at END AS next_at,
       d.delivered_at,
       d.given_up_at,
       d.last_status,
       d.last_error,
       e.at
  FROM timers.event_deliveries d
  JOIN timers.events e ON e.id = d.event_id;

COMMENT ON VIEW timers.deliveries IS
    'Webhook deliveries of events to the [[notify]] targets of the runners: state pending, retrying (attempts failed, next_at the next try), delivered, or undeliverable (given up 24 hours after the event, last_error the last failure). delivery_id is the same on every redelivery.';

COMMENT ON FUNCTION timers._deliveries_enqueue(text, text[], text, text) IS
    'Runner: make the delivery rows of a webhook target for the outbox events after its cursor (a new target starts with the last hour''s events).';
COMMENT ON FUNCTION timers._deliveries_claim(text[], text, integer, interval) IS
    'Runner: lease open, due deliveries (SKIP LOCKED) with their events; commit before POSTing.';

-- ---------------------------------------------------------------------------
-- Rights
-- ---------------------------------------------------------------------------
REVOKE ALL ON FUNCTION
    timers._glob_like(text),
    timers._delivery_id(bigint,timestamp with time zone,text),
    timers._deliveries_enqueue(text,text[],text,text),
    timers._deliveries_claim(text[],text,integer,interval),
    timers._delivery_done(bigint,text,text,integer),
    timers._delivery_failed(bigint,text,text,integer,text)
    FROM PUBLIC, pgtimers_reader, pgtimers_admin, pgtimers_runner;
GRANT EXECUTE ON FUNCTION
    timers._glob_like(text),
    timers._delivery_id(bigint,timestamp with time zone,text),
    timers._deliveries_enqueue(text,text[],text,text),
    timers._deliveries_claim(text[],text,integer,interval),
    timers._delivery_done(bigint,text,text,integer),
    timers._delivery_failed(bigint,text,text,integer,text)
    TO pgtimers_runner;
REVOKE ALL ON timers.deliveries FROM PUBLIC, pgtimers_reader, pgtimers_admin, pgtimers_runner;
GRANT SELECT ON timers.deliveries TO pgtimers_reader;
