-- pgtimers code: the histograms of runs' durations and lateness that each timer's row
-- keeps (took_counts, late_counts: counts per bucket; took_sum_ms, late_sum_ms), which
-- GET /metrics sums by database (view timers.metrics), and the webhook deliveries still
-- owed (view timers.events_undelivered).
--
-- Repeatable: applied whole on every install and upgrade, after the versioned
-- migrations (docs/design.md). Each object here is defined in this file only.

-- The upper bounds, in milliseconds, of the duration buckets; the last bucket (14th) has
-- none (+Inf).
CREATE OR REPLACE FUNCTION timers._duration_buckets() RETURNS bigint[]
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    RETURN ARRAY[5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 60000, 300000]::bigint[];
END
$$;

-- The upper bounds, in milliseconds, of the lateness buckets; the last bucket (14th) has
-- none (+Inf).
CREATE OR REPLACE FUNCTION timers._lateness_buckets() RETURNS bigint[]
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    RETURN ARRAY[10, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 300000, 3600000]::bigint[];
END
$$;

-- The bucket (1-based) of p_ms among p_bounds: the first bound it does not exceed, else the
-- last bucket (one more than the bounds).
CREATE OR REPLACE FUNCTION timers._bucket(p_ms bigint, p_bounds bigint[]) RETURNS integer
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $$
BEGIN
    -- width_bucket counts the bounds <= its operand; a whole p_ms is <= bound b when p_ms - 1 < b
    RETURN width_bucket(greatest(coalesce(p_ms, 0), 0) - 1, p_bounds) + 1;
END
$$;

-- Each timer's run histograms (counts per bucket, not cumulative; the last bucket is
-- +Inf), which timers.status leaves out. A view, as timers.status: readers never read
-- timers.timers itself. GET /metrics sums it by database (a per-timer histogram would
-- multiply the series by the timers).
CREATE OR REPLACE VIEW timers.metrics AS
SELECT t.name,
       t.took_counts,
       t.took_sum_ms,
       t.late_counts,
       t.late_sum_ms
  FROM timers.timers t
 -- the timers of timers.status (one deleted while running is gone already)
 WHERE NOT EXISTS (SELECT 1 FROM timers.pending_changes pc
                    WHERE pc.timer_id = t.id AND pc.action = 'delete');

COMMENT ON VIEW timers.metrics IS
    'One row per timer: the histograms of the durations and lateness of its runs: took_counts and late_counts per bucket (bounds in ms: timers._duration_buckets(), timers._lateness_buckets(); the last bucket is +Inf), took_sum_ms, late_sum_ms.';

-- The events a webhook target has not received, by state: pending (not delivered yet,
-- still retried) and undeliverable (given up); an event counts once in each state some
-- target has it in. Both rows always, 0 when none.
CREATE OR REPLACE VIEW timers.events_undelivered AS
SELECT s.state,
       (SELECT count(DISTINCT d.event_id)
          FROM timers.event_deliveries d
         WHERE d.delivered_at IS NULL
           AND (d.given_up_at IS NOT NULL) = (s.state = 'undeliverable')) AS events
  FROM (VALUES ('pending'), ('undeliverable')) s (state);

COMMENT ON VIEW timers.events_undelivered IS
    'Events a webhook target has not received: state pending (still retried) or undeliverable (given up after 24 hours), each event once per state some target has it in.';

REVOKE ALL ON FUNCTION
    timers._duration_buckets(),
    timers._lateness_buckets(),
    timers._bucket(bigint,bigint[])
    FROM PUBLIC, pgtimers_reader, pgtimers_admin, pgtimers_runner;
GRANT EXECUTE ON FUNCTION
    timers._duration_buckets(),
    timers._lateness_buckets(),
    timers._bucket(bigint,bigint[])
    TO pgtimers_reader, pgtimers_runner, pgtimers_admin;
REVOKE ALL ON timers.metrics, timers.events_undelivered
    FROM PUBLIC, pgtimers_reader, pgtimers_admin, pgtimers_runner;
GRANT SELECT ON timers.metrics, timers.events_undelivered TO pgtimers_reader, pgtimers_runner;
