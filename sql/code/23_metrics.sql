-- pgtimers code: the histograms of runs' durations and lateness that each timer's row
-- keeps (took_counts, late_counts: counts per bucket; took_sum_ms, late_sum_ms), which
-- GET /metrics sums by database.
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
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    -- width_bucket counts the bounds <= its operand; a whole p_ms is <= bound b when p_ms - 1 < b
    RETURN width_bucket(greatest(coalesce(p_ms, 0), 0) - 1, p_bounds) + 1;
END
$$;

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
