-- pgtimers code: the next due time of a spec, across zones and DST; timers.next_runs.
--
-- Repeatable: applied whole on every install and upgrade, after the versioned
-- migrations (docs/design.md). Each object here is defined in this file only.

-- The first instant after `from` whose UTC offset differs from the offset at
-- `from`, searched up to `upto` (whole seconds); NULL when the offset at `upto`
-- is the same (assumes at most one change in the window).
CREATE OR REPLACE FUNCTION timers._offset_change(from_t timestamptz, upto timestamptz, zone text)
    RETURNS timestamptz
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    v_off interval := timers._utc_offset(from_t, zone);
    v_lo  timestamptz := date_trunc('second', from_t);
    v_hi  timestamptz := date_trunc('second', upto);
    v_mid timestamptz;
BEGIN
    IF timers._utc_offset(v_hi, zone) = v_off THEN
        RETURN NULL;
    END IF;
    -- invariant: offset(lo) = v_off, offset(hi) <> v_off
    WHILE v_hi - v_lo > interval '1 second' LOOP
        v_mid := date_trunc('second', v_lo + (v_hi - v_lo) / 2);
        IF timers._utc_offset(v_mid, zone) = v_off THEN
            v_lo := v_mid;
        ELSE
            v_hi := v_mid;
        END IF;
    END LOOP;
    RETURN v_hi;
END
$$;

-- The instant of a wall time in a zone. A repeated wall time (fall-back) gives
-- its first occurrence. A wall time in a gap (spring-forward) gives the end of
-- the gap when gap_end, else NULL.
CREATE OR REPLACE FUNCTION timers._local_to_utc(w timestamp, zone text, gap_end boolean DEFAULT true)
    RETURNS timestamptz
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    v_t1   timestamptz := w AT TIME ZONE zone;   -- PostgreSQL's pick (the later instant)
    v_t0   timestamptz;
    v_prev interval;
BEGIN
    IF w IS NULL THEN
        RETURN NULL;
    END IF;
    IF (v_t1 AT TIME ZONE zone) <> w THEN
        IF NOT gap_end THEN
            RETURN NULL;
        END IF;
        RETURN timers._offset_change(v_t1 - interval '3 hours', v_t1 + interval '3 hours', zone);
    END IF;
    -- fall-back: the offset a little before was larger, so the wall time came earlier too
    v_prev := timers._utc_offset(v_t1 - interval '3 hours', zone);
    IF v_prev > timers._utc_offset(v_t1, zone) THEN
        v_t0 := (w - v_prev) AT TIME ZONE 'UTC';
        IF v_t0 < v_t1 AND (v_t0 AT TIME ZONE zone) = w THEN
            RETURN v_t0;
        END IF;
    END IF;
    RETURN v_t1;
END
$$;

-- 'every N': the first grid point after `after`. With start_at: start_at + k*N.
-- Else the grid restarts at each local midnight (the first instant of the local
-- day) and steps in elapsed seconds; the last step of a day is cut at the next midnight.
CREATE OR REPLACE FUNCTION timers._next_every(seconds bigint, after timestamptz, zone text,
                                              start_at timestamptz DEFAULT NULL)
    RETURNS timestamptz
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    v_day   date;
    v_start timestamptz;
    v_end   timestamptz;
    v_k     numeric;
BEGIN
    IF start_at IS NOT NULL THEN
        IF after < start_at THEN
            RETURN start_at;
        END IF;
        v_k := floor(extract(epoch FROM after - start_at) / seconds) + 1;
        RETURN start_at + make_interval(secs => (v_k * seconds)::double precision);
    END IF;
    v_day := (after AT TIME ZONE zone)::date;
    v_start := timers._local_to_utc(v_day::timestamp, zone, true);
    WHILE v_start > after LOOP          -- (only with a midnight inside a repeated hour)
        v_day := v_day - 1;
        v_start := timers._local_to_utc(v_day::timestamp, zone, true);
    END LOOP;
    v_end := timers._local_to_utc((v_day + 1)::timestamp, zone, true);
    WHILE v_end <= after LOOP
        v_day := v_day + 1;
        v_start := v_end;
        v_end := timers._local_to_utc((v_day + 1)::timestamp, zone, true);
    END LOOP;
    v_k := floor(extract(epoch FROM after - v_start) / seconds) + 1;
    RETURN least(v_start + make_interval(secs => (v_k * seconds)::double precision), v_end);
END
$$;

-- The first day on or after from_day, within the month starting at month_first, that a
-- monthly spec runs on; NULL when none (a day 29-31 the month lacks is skipped).
CREATE OR REPLACE FUNCTION timers._monthly_day(spec jsonb, month_first date, from_day date) RETURNS date
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    v_last date := (month_first + interval '1 month' - interval '1 day')::date;
    v_nth  integer;
    v_dow  integer;
    v_day  date;
BEGIN
    IF spec ? 'nth' THEN
        v_nth := (spec->>'nth')::integer;
        v_dow := (spec->>'weekday')::integer;
        IF v_nth > 0 THEN
            v_day := month_first + (v_dow - extract(dow FROM month_first)::integer + 7) % 7 + 7 * (v_nth - 1);
        ELSE
            v_day := v_last - (extract(dow FROM v_last)::integer - v_dow + 7) % 7;
        END IF;
        RETURN CASE WHEN v_day >= from_day THEN v_day END;
    END IF;
    SELECT min(d) INTO v_day
      FROM (SELECT month_first + (x::integer - 1) AS d
              FROM jsonb_array_elements_text(coalesce(spec->'days', jsonb_build_array(spec->'day'))) x
             WHERE x::integer <= extract(day FROM v_last)::integer
            UNION ALL
            SELECT v_last - x::integer
              FROM jsonb_array_elements_text(coalesce(spec->'from_end', '[]')) x) c
     WHERE d >= from_day;
    RETURN v_day;
END
$$;

-- First day on or after `day` that a times-list spec runs on (NULL: none within a year,
-- or for the first/last trading day forms, within 24 months).
CREATE OR REPLACE FUNCTION timers._next_day(spec jsonb, day date) RETURNS date
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    v_mask  integer;
    v_dow   integer;
    v_month date;
    v_next  date;
BEGIN
    CASE spec->>'kind'
    WHEN 'daily' THEN
        RETURN day;
    WHEN 'weekly' THEN
        v_mask := (spec->>'dow_mask')::integer;
        v_dow := extract(dow FROM day)::integer;
        FOR k IN 0..6 LOOP
            IF (v_mask >> ((v_dow + k) % 7)) & 1 = 1 THEN
                RETURN day + k;
            END IF;
        END LOOP;
        RETURN NULL;
    WHEN 'monthly' THEN
        v_month := date_trunc('month', day)::date;
        FOR i IN 1..13 LOOP
            v_next := timers._monthly_day(spec, v_month, day);
            IF v_next IS NOT NULL THEN
                RETURN v_next;
            END IF;
            v_month := (v_month + interval '1 month')::date;
        END LOOP;
        RETURN NULL;
    WHEN 'trading' THEN
        IF NOT spec ? 'nth' THEN
            RETURN timers._next_trading_day(spec->>'calendar', day);
        END IF;
        -- the first/last trading day of each month: a month with too few is skipped
        v_month := date_trunc('month', day)::date;
        FOR i IN 1..24 LOOP
            v_next := timers._nth_trading_day(spec->>'calendar', v_month, (spec->>'nth')::integer);
            IF v_next >= day THEN
                RETURN v_next;
            END IF;
            v_month := (v_month + interval '1 month')::date;
        END LOOP;
        RETURN NULL;
    ELSE
        RAISE EXCEPTION 'schedule kind % has no day list', spec->>'kind' USING ERRCODE = '22023';
    END CASE;
END
$$;

-- Smallest wall time >= w0 of a times-list spec (daily, weekly, monthly, trading).
CREATE OR REPLACE FUNCTION timers._next_wall_times(spec jsonb, w0 timestamp) RETURNS timestamp
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    v_secs integer[] := ARRAY(SELECT jsonb_array_elements_text(spec->'secs')::integer);
    v_day  date := w0::date;
    v_tod  integer := ceil(extract(epoch FROM w0 - w0::date::timestamp))::integer;
    v_next date;
    v_s    integer;
BEGIN
    FOR i IN 1..3 LOOP
        v_next := timers._next_day(spec, v_day);
        IF v_next IS NULL THEN
            RETURN NULL;
        END IF;
        IF v_next > v_day THEN
            v_tod := 0;
        END IF;
        SELECT min(s) INTO v_s FROM unnest(v_secs) s WHERE s >= v_tod;
        IF v_s IS NOT NULL THEN
            RETURN v_next + make_interval(secs => v_s);
        END IF;
        v_day := v_next + 1;
        v_tod := 0;
    END LOOP;
    RETURN NULL;
END
$$;

-- Smallest wall time >= w0 (whole minutes) matching a cron spec. Jumps field by
-- field: month, then day, then hour, then minute, using bit masks; a year with
-- no match costs at most 13 steps. A day rule (L, W, #) is worked out per month,
-- where the day is chosen (timers._cron_month_days). Gives up (NULL) after 400 years, a full
-- Gregorian cycle, which parsing already guarantees never happens.
CREATE OR REPLACE FUNCTION timers._next_wall_cron(spec jsonb, w0 timestamp) RETURNS timestamp
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    c_min    constant bigint := (spec->>'minute_mask')::bigint;
    c_hour   constant bigint := (spec->>'hour_mask')::bigint;
    c_dom    constant bigint := (spec->>'dom_mask')::bigint;
    c_mon    constant bigint := (spec->>'month_mask')::bigint;
    c_dow    constant bigint := (spec->>'dow_mask')::bigint;
    c_or     constant boolean := (spec->>'day_or')::boolean;
    c_dlast  constant bigint := coalesce((spec->>'dom_last_mask')::bigint, 0);
    c_near   constant bigint := coalesce((spec->>'dom_near_mask')::bigint, 0);
    c_wlast  constant bigint := coalesce((spec->>'dow_last_mask')::bigint, 0);
    c_nth    constant bigint := coalesce((spec->>'dow_nth_mask')::bigint, 0);
    c_rules  constant boolean := c_dlast <> 0 OR c_near <> 0 OR c_wlast <> 0 OR c_nth <> 0;
    v_t      timestamp := date_trunc('minute', w0);
    v_y      integer;
    v_mo     integer;
    v_d      integer;
    v_h      integer;
    v_mi     integer;
    v_limit  integer;
    v_first  date;
    v_ndays  integer;
    v_w1     integer;
    v_week   bigint;
    v_days   bigint;
    v_x      bigint;
    v_b      integer;
BEGIN
    IF v_t < w0 THEN
        v_t := v_t + interval '1 minute';
    END IF;
    v_y := extract(year FROM v_t)::integer;
    v_mo := extract(month FROM v_t)::integer;
    v_d := extract(day FROM v_t)::integer;
    v_h := extract(hour FROM v_t)::integer;
    v_mi := extract(minute FROM v_t)::integer;
    v_limit := v_y + 400;
    LOOP
        IF v_y > v_limit THEN
            RETURN NULL;
        END IF;
        -- month
        v_x := c_mon & ~((1::bigint << v_mo) - 1);
        IF v_x = 0 THEN
            v_y := v_y + 1; v_mo := 1; v_d := 1; v_h := 0; v_mi := 0;
            CONTINUE;
        END IF;
        v_b := timers._lowbit(v_x);
        IF v_b <> v_mo THEN
            v_mo := v_b; v_d := 1; v_h := 0; v_mi := 0;
        END IF;
        -- day: the day-of-week mask laid over this month's days (bit d = day d);
        -- the day rules (L, W, #) are worked out for this month
        v_first := make_date(v_y, v_mo, 1);
        v_ndays := extract(day FROM (v_first + interval '1 month' - interval '1 day'))::integer;
        v_w1 := extract(dow FROM v_first)::integer;
        IF c_rules THEN
            v_x := timers._cron_month_days(c_dom, c_dow, c_or, c_dlast, c_near, c_wlast, c_nth, v_ndays, v_w1);
        ELSE
            v_week := (((c_dow >> v_w1) | (c_dow << (7 - v_w1))) & 127) << 1;
            v_days := v_week | (v_week << 7) | (v_week << 14) | (v_week << 21) | (v_week << 28);
            v_x := CASE WHEN c_or THEN c_dom | v_days ELSE c_dom & v_days END;
        END IF;
        v_x := v_x & ((1::bigint << (v_ndays + 1)) - 2) & ~((1::bigint << v_d) - 1);
        IF v_x = 0 THEN
            v_mo := v_mo + 1; v_d := 1; v_h := 0; v_mi := 0;
            IF v_mo > 12 THEN
                v_y := v_y + 1; v_mo := 1;
            END IF;
            CONTINUE;
        END IF;
        v_b := timers._lowbit(v_x);
        IF v_b <> v_d THEN
            v_d := v_b; v_h := 0; v_mi := 0;
        END IF;
        -- hour
        v_x := c_hour & ~((1::bigint << v_h) - 1);
        IF v_x = 0 THEN
            v_d := v_d + 1; v_h := 0; v_mi := 0;
            CONTINUE;
        END IF;
        v_b := timers._lowbit(v_x);
        IF v_b <> v_h THEN
            v_h := v_b; v_mi := 0;
        END IF;
        -- minute
        v_x := c_min & ~((1::bigint << v_mi) - 1);
        IF v_x = 0 THEN
            v_h := v_h + 1; v_mi := 0;
            CONTINUE;
        END IF;
        RETURN make_timestamp(v_y, v_mo, v_d, v_h, timers._lowbit(v_x), 0);
    END LOOP;
END
$$;

-- Smallest matching wall time >= w0 of any pattern spec (not 'every', not 'once').
CREATE OR REPLACE FUNCTION timers._next_wall(spec jsonb, w0 timestamp) RETURNS timestamp
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    v_t timestamp;
BEGIN
    CASE spec->>'kind'
    WHEN 'cron' THEN
        RETURN timers._next_wall_cron(spec, w0);
    WHEN 'hourly' THEN
        v_t := date_trunc('hour', w0) + make_interval(mins => (spec->>'minute')::integer);
        RETURN CASE WHEN v_t < w0 THEN v_t + interval '1 hour' ELSE v_t END;
    ELSE
        RETURN timers._next_wall_times(spec, w0);
    END CASE;
END
$$;

-- Next due time of a "wall" pattern: each matching wall time once, a time in a
-- gap at the end of the gap, a repeated time at its first occurrence.
CREATE OR REPLACE FUNCTION timers._next_due_wall(spec jsonb, after timestamptz, zone text)
    RETURNS timestamptz
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    v_w0 timestamp := after AT TIME ZONE zone;
    v_c  timestamp;
    v_x  timestamptz;
    v_wx timestamp;
BEGIN
    FOR i IN 1..50 LOOP
        v_c := timers._next_wall(spec, v_w0);
        IF v_c IS NULL THEN
            RETURN NULL;
        END IF;
        v_x := timers._local_to_utc(v_c, zone, true);
        IF v_x > after THEN
            RETURN v_x;
        END IF;
        -- v_c ran already: `after` is in the second pass of a repeated hour, or past a gap's end
        v_wx := v_x AT TIME ZONE zone;
        IF v_wx = v_c THEN
            -- every wall time up to after + (v_c's offset) maps to an instant <= after
            v_w0 := greatest(v_c + interval '1 second',
                             (after AT TIME ZONE 'UTC') + (v_c - (v_x AT TIME ZONE 'UTC')) + interval '1 microsecond');
        ELSE
            v_w0 := greatest(v_c + interval '1 second', v_wx);   -- past the whole gap
        END IF;
    END LOOP;
    RAISE EXCEPTION 'no due time found for % after % in %', spec->>'schedule', after, zone
        USING ERRCODE = 'XX000';
END
$$;

-- Next due time of an "elapsed" pattern: the first real instant after `after`
-- whose local time matches (a skipped hour has none, a repeated hour matches twice).
CREATE OR REPLACE FUNCTION timers._next_due_elapsed(spec jsonb, after timestamptz, zone text)
    RETURNS timestamptz
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    v_w0    timestamp := after AT TIME ZONE zone;
    v_c     timestamp;
    v_x     timestamptz;
    v_best  timestamptz;
    v_off   interval := timers._utc_offset(after, zone);
    v_t     timestamptz;
    v_found boolean := false;
BEGIN
    -- (a) the first occurrence of each matching wall time, in wall order
    FOR i IN 1..50 LOOP
        v_c := timers._next_wall(spec, v_w0);
        IF v_c IS NULL THEN
            v_found := true;
            EXIT;
        END IF;
        v_x := timers._local_to_utc(v_c, zone, false);
        IF v_x IS NULL THEN
            -- inside a gap: no such instant; go on at the end of the gap
            v_w0 := greatest(v_c + interval '1 second',
                             timers._local_to_utc(v_c, zone, true) AT TIME ZONE zone);
        ELSIF v_x > after THEN
            v_best := v_x;
            v_found := true;
            EXIT;
        ELSE
            v_w0 := greatest(v_c + interval '1 second',
                             (after AT TIME ZONE 'UTC') + (v_c - (v_x AT TIME ZONE 'UTC')) + interval '1 microsecond');
        END IF;
    END LOOP;
    IF NOT v_found THEN
        RAISE EXCEPTION 'no due time found for % after % in %', spec->>'schedule', after, zone
            USING ERRCODE = 'XX000';
    END IF;
    -- (b) `after` is in the hour after a fall-back: its wall times come again
    IF timers._utc_offset(after - interval '3 hours', zone) > v_off THEN
        v_c := timers._next_wall(spec, (after AT TIME ZONE zone) + interval '1 microsecond');
        v_x := (v_c - v_off) AT TIME ZONE 'UTC';
        IF v_c IS NOT NULL AND (v_x AT TIME ZONE zone) = v_c AND v_x > after THEN
            v_best := least(v_best, v_x);
        END IF;
    END IF;
    -- (c) a fall-back comes within 3 hours: the repeated wall times after it
    IF timers._utc_offset(after + interval '3 hours', zone) < v_off THEN
        v_t := timers._offset_change(after, after + interval '3 hours', zone);
        v_c := timers._next_wall(spec, v_t AT TIME ZONE zone);
        v_x := (v_c - timers._utc_offset(v_t, zone)) AT TIME ZONE 'UTC';
        IF v_c IS NOT NULL AND (v_x AT TIME ZONE zone) = v_c AND v_x > after THEN
            v_best := least(v_best, v_x);
        END IF;
    END IF;
    RETURN v_best;
END
$$;

-- The first due time of a spec strictly after `after` and not before start_at;
-- NULL when there is none. Wall times are read in `zone` (NULL: UTC).
-- end_at and max_runs are the caller's business.
CREATE OR REPLACE FUNCTION timers._next_due(spec jsonb, after timestamptz, zone text,
                                            start_at timestamptz DEFAULT NULL)
    RETURNS timestamptz
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_zone  text := coalesce(zone, 'UTC');
    v_after timestamptz := after;
    v_at    timestamptz;
BEGIN
    IF spec IS NULL OR after IS NULL OR NOT isfinite(after) THEN
        RETURN NULL;
    END IF;
    IF spec->>'kind' = 'after' THEN
        -- a follower has no due times of its own (timers.follow_dues holds them)
        RETURN NULL;
    END IF;
    IF spec->>'kind' = 'once' THEN
        v_at := (spec->>'at')::timestamptz;
        RETURN CASE WHEN v_at > after AND (start_at IS NULL OR v_at >= start_at) THEN v_at END;
    END IF;
    IF spec->>'kind' = 'every' THEN
        RETURN timers._next_every((spec->>'seconds')::bigint, after, v_zone, start_at);
    END IF;
    IF start_at IS NOT NULL AND start_at > after THEN
        v_after := start_at - interval '1 microsecond';
    END IF;
    CASE spec->>'clock'
    WHEN 'wall' THEN
        RETURN timers._next_due_wall(spec, v_after, v_zone);
    WHEN 'elapsed' THEN
        RETURN timers._next_due_elapsed(spec, v_after, v_zone);
    ELSE
        RAISE EXCEPTION 'not a schedule spec: %', spec USING ERRCODE = '22023';
    END CASE;
END
$$;

-- What a preview of the spec should say beside its due times, else NULL: the months a
-- day 29-31 skips, or a trading calendar that is missing (previewed as trading every day).
CREATE OR REPLACE FUNCTION timers._schedule_note(spec jsonb) RETURNS text
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    v_days text;
    v_why  text;
BEGIN
    IF spec->>'kind' = 'monthly' THEN
        SELECT string_agg(d::text, ' and ' ORDER BY d::integer),
               string_agg(CASE d::integer WHEN 29 THEN 'February of a common year has no 29th'
                                          WHEN 30 THEN 'February has no 30th'
                                          ELSE 'February, April, June, September and November have no 31st' END,
                          ', and ' ORDER BY d::integer)
          INTO v_days, v_why
          FROM jsonb_array_elements_text(coalesce(spec->'days', jsonb_build_array(spec->'day'))) d
         WHERE d::integer >= 29;
        IF v_days IS NOT NULL THEN
            RETURN format('"%s" skips %s in the months without %s (as cron does): %s; '
                          'write "last" for the last day of every month', spec->>'schedule',
                          CASE WHEN v_days LIKE '% and %' THEN 'days ' ELSE 'day ' END || v_days,
                          CASE WHEN v_days LIKE '% and %' THEN 'them' ELSE 'it' END,
                          v_why);
        END IF;
    ELSIF spec->>'kind' = 'trading'
          AND NOT EXISTS (SELECT 1 FROM timers.calendars c
                           WHERE lower(c.name) = lower(spec->>'calendar') COLLATE "default") THEN
        RETURN format('there is no calendar %s in database %s: this preview trades every day, '
                      'and timers.save refuses the schedule until the calendar is made',
                      timers._quoted(spec->>'calendar'), current_database());
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION timers.next_runs(schedule text, n integer, after timestamptz DEFAULT now(),
                                            timezone text DEFAULT NULL)
    RETURNS SETOF timestamptz
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_zone    text;
    v_spec    jsonb;
    v_t       timestamptz := next_runs.after;
    v_note    text;
    v_state   text;
    v_message text;
    v_detail  text;
    v_hint    text;
BEGIN
    IF n IS NULL OR n < 1 OR n > 1000 THEN
        RAISE EXCEPTION 'n must be from 1 to 1000, not %', coalesce(n::text, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    IF v_t IS NULL THEN
        RAISE EXCEPTION 'after must not be NULL' USING ERRCODE = '22023';
    END IF;
    PERFORM timers._check_time('after', v_t);
    v_zone := timers._check_zone(coalesce(next_runs.timezone,
                                          (SELECT s.value FROM timers.settings s WHERE s.key = 'timezone'),
                                          'UTC'));
    v_spec := timers._parse_schedule(next_runs.schedule, v_zone, v_t);
    v_note := timers._schedule_note(v_spec);
    IF v_note IS NOT NULL THEN
        RAISE NOTICE '%', v_note;
    END IF;
    FOR i IN 1..n LOOP
        v_t := timers._next_due(v_spec, v_t, v_zone);
        EXIT WHEN v_t IS NULL;
        RETURN NEXT v_t;
    END LOOP;
EXCEPTION WHEN OTHERS THEN
    -- the refusal as this call's own: one line, without the CONTEXT lines of the
    -- internal routines that raised it (same SQLSTATE, message, detail and hint)
    GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_message = MESSAGE_TEXT,
                            v_detail = PG_EXCEPTION_DETAIL, v_hint = PG_EXCEPTION_HINT;
    IF v_detail = '' AND v_hint = '' THEN
        RAISE EXCEPTION USING ERRCODE = v_state, MESSAGE = v_message;
    ELSIF v_detail = '' THEN
        RAISE EXCEPTION USING ERRCODE = v_state, MESSAGE = v_message, HINT = v_hint;
    ELSIF v_hint = '' THEN
        RAISE EXCEPTION USING ERRCODE = v_state, MESSAGE = v_message, DETAIL = v_detail;
    END IF;
    RAISE EXCEPTION USING ERRCODE = v_state, MESSAGE = v_message, DETAIL = v_detail, HINT = v_hint;
END
$$;

COMMENT ON FUNCTION timers.next_runs(text, integer, timestamptz, text) IS
    'The next n (1-1000) due times of a schedule string after `after` (default now()), read in '
    '`timezone` (default: the database''s timers.set_timezone zone, else UTC). '
    'Example: SELECT * FROM timers.next_runs(''weekdays 11:00'', 5, timezone => ''Asia/Kathmandu'').';

-- ---------------------------------------------------------------------------
-- Rights
-- ---------------------------------------------------------------------------
REVOKE ALL ON FUNCTION
    timers._offset_change(timestamp with time zone,timestamp with time zone,text),
    timers._local_to_utc(timestamp without time zone,text,boolean),
    timers._next_every(bigint,timestamp with time zone,text,timestamp with time zone),
    timers._monthly_day(jsonb,date,date),
    timers._next_day(jsonb,date),
    timers._next_wall_times(jsonb,timestamp without time zone),
    timers._next_wall_cron(jsonb,timestamp without time zone),
    timers._next_wall(jsonb,timestamp without time zone),
    timers._next_due_wall(jsonb,timestamp with time zone,text),
    timers._next_due_elapsed(jsonb,timestamp with time zone,text),
    timers._next_due(jsonb,timestamp with time zone,text,timestamp with time zone),
    timers._schedule_note(jsonb),
    timers.next_runs(text,integer,timestamp with time zone,text)
    FROM PUBLIC, pgtimers_reader, pgtimers_admin, pgtimers_runner;
GRANT EXECUTE ON FUNCTION
    timers._offset_change(timestamp with time zone,timestamp with time zone,text),
    timers._local_to_utc(timestamp without time zone,text,boolean),
    timers._next_every(bigint,timestamp with time zone,text,timestamp with time zone),
    timers._monthly_day(jsonb,date,date),
    timers._next_day(jsonb,date),
    timers._next_wall_times(jsonb,timestamp without time zone),
    timers._next_wall_cron(jsonb,timestamp without time zone),
    timers._next_wall(jsonb,timestamp without time zone),
    timers._next_due_wall(jsonb,timestamp with time zone,text),
    timers._next_due_elapsed(jsonb,timestamp with time zone,text),
    timers._next_due(jsonb,timestamp with time zone,text,timestamp with time zone),
    timers._schedule_note(jsonb),
    timers.next_runs(text,integer,timestamp with time zone,text)
    TO pgtimers_reader, pgtimers_runner;
