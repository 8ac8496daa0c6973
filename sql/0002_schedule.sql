-- pgtimers 0002_schedule: the schedule engine, in PL/pgSQL.
--
--   timers._parse_schedule(schedule, zone, now)  validate + normalize  -> spec jsonb
--   timers._next_due(spec, after, zone, start_at) first due time > after -> timestamptz
--   timers.next_runs(schedule, n, after, timezone) public preview
--
-- How DST is handled (docs/schedules.md says it for users):
--   * "wall" schedules name a wall-clock time (daily, weekdays, weekly, monthly,
--     trading, once, and cron whose minute AND hour fields do not start with '*'):
--     a wall time inside a spring-forward gap runs once, at the end of the gap;
--     a wall time repeated by a fall-back runs once, at its first occurrence.
--   * "elapsed" schedules repeat through the day (hourly, and cron whose minute or
--     hour field starts with '*', as Vixie cron decides): they run at every real
--     instant whose local time matches, so a skipped hour has no runs and a
--     repeated hour runs again - the spacing in real time stays regular.
--   * "every N": a grid that restarts at each local midnight (the first instant
--     of the local day) and steps in elapsed time; with start_at, a plain elapsed
--     grid counted from start_at.
-- Offsets are read from PostgreSQL's tz database; a zone is assumed to change its
-- offset at most once within 3 hours (true of every zone since 1970).
--
-- Internal functions raise SQLSTATE PT001 with a bare reason; _parse_schedule
-- turns it into the user-facing 22023 message. Nothing here writes anything.

-------------------------------------------------------------------------------
-- Small pure helpers (SQL, fully qualified, so the planner inlines them)
-------------------------------------------------------------------------------

-- UTC offset of a zone at an instant (e.g. +05:45 for Asia/Kathmandu).
CREATE OR REPLACE FUNCTION timers._utc_offset(t timestamptz, zone text) RETURNS interval
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT pg_catalog.timezone(zone, t) OPERATOR(pg_catalog.-) pg_catalog.timezone('UTC', t) $$;

-- Index of the lowest set bit of a non-negative bigint (NULL for 0).
CREATE OR REPLACE FUNCTION timers._lowbit(x bigint) RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
        SELECT CASE WHEN x OPERATOR(pg_catalog.=) 0 THEN NULL
                    ELSE pg_catalog.bit_count(((x OPERATOR(pg_catalog.&) (OPERATOR(pg_catalog.-) x))
                                                OPERATOR(pg_catalog.-) 1)::bit(64))::integer END
    $$;

-- The list of valid forms every bad-schedule error ends with.
CREATE OR REPLACE FUNCTION timers._schedule_examples() RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
        SELECT 'use a schedule like "every 10s", "every 5m", "every 2h", "hourly", "hourly :15", '
               '"daily 16:00", "daily 02:00,13:30", "weekdays 11:00", "sun-thu 11:00", '
               '"mon,wed,fri 09:30", "monthly 1 02:00", "trading nepse 15:05" (the trading days of '
               'calendar nepse), "cron 0 9 * * 1-5", "once 2027-01-04 09:00" or "in 30m"'::text
    $$;

-------------------------------------------------------------------------------
-- Zones
-------------------------------------------------------------------------------

-- The canonical name of a time zone PostgreSQL knows ('asia/kathmandu' ->
-- 'Asia/Kathmandu'), else 22023. POSIX offset strings ('UTC+3') are refused, and
-- so are the few zone names PostgreSQL reads as fixed-offset abbreviations in
-- AT TIME ZONE ('CET', 'EET', ...), since wall times would then ignore DST.
CREATE OR REPLACE FUNCTION timers._check_zone(zone text) RETURNS text
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    -- set_config below is undone when the function returns, because of this SET clause
    SET TimeZone = 'UTC'
    AS $$
DECLARE
    v_name text;
    v_why  text := '';
    v_t    timestamptz;
BEGIN
    IF zone IS NOT NULL AND btrim(zone) <> '' THEN
        BEGIN
            PERFORM set_config('TimeZone', btrim(zone), true);
            v_name := current_setting('TimeZone');
            -- the session reading (zone file) must agree with AT TIME ZONE's reading
            FOREACH v_t IN ARRAY ARRAY['2025-01-15 12:00+00', '2025-07-15 12:00+00']::timestamptz[] LOOP
                IF v_t::timestamp <> (v_t AT TIME ZONE v_name) THEN
                    v_why := ' (PostgreSQL reads it as a fixed-offset abbreviation, without DST)';
                END IF;
            END LOOP;
        EXCEPTION WHEN invalid_parameter_value THEN
            v_name := NULL;
        END;
        -- a POSIX spec ('UTC+3', '<+0545>-5:45') is accepted by PostgreSQL but is no zone name
        IF v_name IS NOT NULL AND v_name ~ '[0-9<>]'
           AND NOT EXISTS (SELECT 1 FROM pg_timezone_names n WHERE n.name = v_name) THEN
            v_name := NULL;
        END IF;
    END IF;
    IF v_name IS NULL OR v_why <> '' THEN
        RAISE EXCEPTION 'unknown time zone ''%''%; use a name like ''UTC'', ''Asia/Kathmandu'' or ''America/New_York''',
            coalesce(zone, ''), v_why
            USING ERRCODE = '22023';
    END IF;
    RETURN v_name;
END
$$;

-- The first instant after `from` whose UTC offset differs from the offset at
-- `from`, searched up to `upto` (whole seconds); NULL when the offset at `upto`
-- is the same (assumes at most one change in the window).
CREATE OR REPLACE FUNCTION timers._offset_change(from_t timestamptz, upto timestamptz, zone text)
    RETURNS timestamptz
    LANGUAGE plpgsql IMMUTABLE
    SET search_path = pg_catalog, pg_temp
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
    SET search_path = pg_catalog, pg_temp
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

-------------------------------------------------------------------------------
-- Trading calendars
-------------------------------------------------------------------------------

-- Whether a calendar trades on a day: its exception row (holiday / extra day)
-- if any, else the bit of the week era in force. NULL when the calendar is missing.
CREATE OR REPLACE FUNCTION timers._trading_day(calendar text, day date) RETURNS boolean
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_name    text;
    v_trading boolean;
    v_mask    integer;
BEGIN
    SELECT c.name INTO v_name FROM timers.calendars c WHERE lower(c.name) = lower(_trading_day.calendar) COLLATE "default";
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    SELECT x.trading INTO v_trading
      FROM timers.calendar_days x
     WHERE x.calendar = v_name AND x.day = _trading_day.day;
    IF FOUND THEN
        RETURN v_trading;
    END IF;
    SELECT w.days INTO v_mask
      FROM timers.calendar_weeks w
     WHERE w.calendar = v_name AND w.from_day <= _trading_day.day
     ORDER BY w.from_day DESC
     LIMIT 1;
    RETURN coalesce((v_mask >> extract(dow FROM _trading_day.day)::integer) & 1 = 1, false);
END
$$;

-- The first trading day on or after from_day (NULL when none comes within 400
-- steps: a step is a day of the week era, a holiday, or a jump over a stretch
-- with no trading weekday to the next extra day or era). A missing calendar
-- trades every day. Cost: three index scans, then array walking; exception rows
-- are fetched 16 at a time.
CREATE OR REPLACE FUNCTION timers._next_trading_day(calendar text, from_day date) RETURNS date
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_name    text;
    v_from    date[];
    v_masks   integer[];
    v_eras    integer;
    v_era     integer := 0;          -- index of the era in force on v_day (0: none yet)
    v_xday    date[];
    v_xtrade  boolean[];
    v_xn      integer;
    v_j       integer;
    v_day     date := from_day;
    v_next    date;
    v_steps   integer := 0;
    c_batch   constant integer := 16;
BEGIN
    SELECT c.name INTO v_name FROM timers.calendars c WHERE lower(c.name) = lower(_next_trading_day.calendar) COLLATE "default";
    IF NOT FOUND THEN
        RETURN from_day;
    END IF;
    SELECT array_agg(w.from_day ORDER BY w.from_day), array_agg(w.days::integer ORDER BY w.from_day)
      INTO v_from, v_masks
      FROM timers.calendar_weeks w
     WHERE w.calendar = v_name;
    v_eras := coalesce(cardinality(v_from), 0);
    LOOP
        SELECT array_agg(x.day ORDER BY x.day), array_agg(x.trading ORDER BY x.day), count(*)
          INTO v_xday, v_xtrade, v_xn
          FROM (SELECT d.day, d.trading
                  FROM timers.calendar_days d
                 WHERE d.calendar = v_name AND d.day >= v_day
                 ORDER BY d.day
                 LIMIT c_batch) x;
        v_j := 1;
        LOOP
            IF v_j > v_xn AND v_xn = c_batch THEN
                EXIT;  -- more exception rows may follow: fetch the next batch from v_day
            END IF;
            v_steps := v_steps + 1;
            IF v_steps > 400 THEN
                RETURN NULL;
            END IF;
            IF v_j <= v_xn AND v_xday[v_j] = v_day THEN
                IF v_xtrade[v_j] THEN
                    RETURN v_day;
                END IF;
                v_j := v_j + 1;
                v_day := v_day + 1;
                CONTINUE;
            END IF;
            WHILE v_era < v_eras AND v_from[v_era + 1] <= v_day LOOP
                v_era := v_era + 1;
            END LOOP;
            IF v_era > 0 AND v_masks[v_era] & 127 <> 0 THEN
                IF (v_masks[v_era] >> extract(dow FROM v_day)::integer) & 1 = 1 THEN
                    RETURN v_day;
                END IF;
                v_day := v_day + 1;
            ELSE
                -- no trading weekday until the next era: jump to the next exception row or era
                v_next := CASE WHEN v_j <= v_xn THEN v_xday[v_j] END;
                IF v_era < v_eras THEN
                    v_next := least(v_next, v_from[v_era + 1]);
                END IF;
                IF v_next IS NULL THEN
                    RETURN NULL;
                END IF;
                v_day := v_next;
            END IF;
        END LOOP;
    END LOOP;
END
$$;

-------------------------------------------------------------------------------
-- Parsing
-------------------------------------------------------------------------------

-- Raise the internal "bad part" signal; _parse_schedule wraps it into the message.
CREATE OR REPLACE FUNCTION timers._schedule_fail(reason text DEFAULT NULL) RETURNS void
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = 'PT001', MESSAGE = coalesce(reason, '');
END
$$;

-- Seconds of the day of a wall time 'HH:MM' or 'HH:MM:SS'.
CREATE OR REPLACE FUNCTION timers._parse_time(tok text) RETURNS integer
    LANGUAGE plpgsql IMMUTABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    m text[] := regexp_match(tok, '^([0-9]{1,2}):([0-9]{2})(?::([0-9]{2}))?$');
BEGIN
    IF m IS NULL THEN
        PERFORM timers._schedule_fail(format('''%s'' is not a time like 09:30', tok));
    END IF;
    IF m[1]::integer > 23 THEN
        PERFORM timers._schedule_fail(format('hour %s is out of range 0-23', m[1]::integer));
    END IF;
    IF m[2]::integer > 59 THEN
        PERFORM timers._schedule_fail(format('minute %s is out of range 0-59', m[2]::integer));
    END IF;
    IF coalesce(m[3], '0')::integer > 59 THEN
        PERFORM timers._schedule_fail(format('second %s is out of range 0-59', m[3]::integer));
    END IF;
    RETURN m[1]::integer * 3600 + m[2]::integer * 60 + coalesce(m[3], '0')::integer;
END
$$;

-- A comma list of wall times -> sorted distinct seconds of the day.
CREATE OR REPLACE FUNCTION timers._parse_times(list text) RETURNS integer[]
    LANGUAGE plpgsql IMMUTABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_tok  text;
    v_secs integer[] := '{}';
BEGIN
    IF list IS NULL OR list = '' THEN
        PERFORM timers._schedule_fail('a time like 09:30 is missing');
    END IF;
    FOREACH v_tok IN ARRAY string_to_array(list, ',') LOOP
        v_secs := v_secs || timers._parse_time(v_tok);
    END LOOP;
    RETURN ARRAY(SELECT DISTINCT s FROM unnest(v_secs) s ORDER BY s);
END
$$;

-- Day-of-week number (0 = Sunday) of a day name, NULL when it is none.
CREATE OR REPLACE FUNCTION timers._dow_number(tok text) RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
        SELECT pg_catalog.array_position(ARRAY['sun','mon','tue','wed','thu','fri','sat'],
                                         pg_catalog.lower(tok)) OPERATOR(pg_catalog.-) 1
    $$;

-- A day list ('mon,wed,fri', 'sun-thu', 'fri-sun', 'weekdays') -> bit mask, bit 0 = Sunday.
-- Ranges may wrap past Saturday.
CREATE OR REPLACE FUNCTION timers._parse_days(list text) RETURNS integer
    LANGUAGE plpgsql IMMUTABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_tok  text;
    v_ends text[];
    v_a    integer;
    v_b    integer;
    v_mask integer := 0;
BEGIN
    IF lower(list) = 'weekdays' THEN
        RETURN 62;  -- mon..fri
    END IF;
    FOREACH v_tok IN ARRAY string_to_array(list, ',') LOOP
        v_ends := string_to_array(v_tok, '-');
        IF cardinality(v_ends) NOT IN (1, 2) THEN
            PERFORM timers._schedule_fail(format('''%s'' is not a day or a range of days like mon-fri', v_tok));
        END IF;
        v_a := timers._dow_number(v_ends[1]);
        v_b := timers._dow_number(v_ends[cardinality(v_ends)]);
        IF v_a IS NULL OR v_b IS NULL THEN
            PERFORM timers._schedule_fail(format('''%s'' is not a day (days: sun mon tue wed thu fri sat)',
                                                 CASE WHEN v_a IS NULL THEN v_ends[1] ELSE v_ends[2] END));
        END IF;
        LOOP
            v_mask := v_mask | (1 << v_a);
            EXIT WHEN v_a = v_b;
            v_a := (v_a + 1) % 7;
        END LOOP;
    END LOOP;
    RETURN v_mask;
END
$$;

-- Times-of-day part of a spec: {"times": ["02:00", ...], "secs": [7200, ...], "clock": "wall"}.
CREATE OR REPLACE FUNCTION timers._times_spec(list text) RETURNS jsonb
    LANGUAGE plpgsql IMMUTABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_secs integer[] := timers._parse_times(list);
BEGIN
    RETURN jsonb_build_object(
        'times', (SELECT jsonb_agg(CASE WHEN s % 60 = 0
                                        THEN to_char(make_interval(secs => s), 'HH24:MI')
                                        ELSE to_char(make_interval(secs => s), 'HH24:MI:SS') END
                                   ORDER BY s)
                    FROM unnest(v_secs) s),
        'secs', to_jsonb(v_secs),
        'clock', 'wall');
END
$$;

-- 'every 10s|5m|2h': 1 second to 24 hours.
CREATE OR REPLACE FUNCTION timers._parse_every(arg text) RETURNS jsonb
    LANGUAGE plpgsql IMMUTABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    m      text[] := regexp_match(lower(coalesce(arg, '')), '^([0-9]{1,9})([smh])$');
    v_secs bigint;
BEGIN
    IF m IS NULL THEN
        PERFORM timers._schedule_fail();
    END IF;
    v_secs := m[1]::bigint * CASE m[2] WHEN 's' THEN 1 WHEN 'm' THEN 60 ELSE 3600 END;
    IF v_secs < 1 OR v_secs > 86400 THEN
        PERFORM timers._schedule_fail(format('the interval %s is not from 1s to 24h', arg));
    END IF;
    RETURN jsonb_build_object('kind', 'every', 'seconds', v_secs, 'clock', 'elapsed');
END
$$;

-- One cron field -> bit mask of its values. `what` names the field in errors,
-- lo..hi is its range (day of week: 0..7, 7 = Sunday), names the word values.
-- Items: *, */s, a, a-b, a-b/s, a/s (= a-<last>/s). Ranges must go forward.
CREATE OR REPLACE FUNCTION timers._parse_cron_field(field text, what text, lo integer, hi integer,
                                                    names text[] DEFAULT NULL)
    RETURNS bigint
    LANGUAGE plpgsql IMMUTABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_item text;
    m      text[];
    v_last integer := CASE WHEN hi = 7 THEN 6 ELSE hi END;  -- '*' and 'a/s' of day of week stop at sat
    v_vals integer[];
    v_tok  text;
    v_a    integer;
    v_b    integer;
    v_step integer;
    v_mask bigint := 0;
BEGIN
    FOREACH v_item IN ARRAY string_to_array(field, ',') LOOP
        m := regexp_match(lower(v_item), '^(\*|[a-z0-9]+)(?:-([a-z0-9]+))?(?:/([0-9]+))?$');
        IF m IS NULL THEN
            PERFORM timers._schedule_fail(format('''%s'' is not a valid %s field', field, what));
        END IF;
        -- the values at both ends of the item
        v_vals := ARRAY[]::integer[];
        FOREACH v_tok IN ARRAY ARRAY[m[1], m[2]] LOOP
            IF v_tok IS NULL OR v_tok = '*' THEN
                v_vals := v_vals || NULL::integer;
            ELSIF v_tok ~ '^[0-9]{1,4}$' THEN
                IF v_tok::integer < lo OR v_tok::integer > hi THEN
                    PERFORM timers._schedule_fail(format('%s %s is out of range %s-%s', what, v_tok::integer, lo, hi));
                END IF;
                v_vals := v_vals || v_tok::integer;
            ELSIF names IS NOT NULL AND array_position(names, v_tok) IS NOT NULL THEN
                v_vals := v_vals || (array_position(names, v_tok) - 1 + lo);
            ELSE
                PERFORM timers._schedule_fail(format('''%s'' is not a %s', v_tok, what));
            END IF;
        END LOOP;
        IF m[1] = '*' AND m[2] IS NOT NULL THEN
            PERFORM timers._schedule_fail(format('''%s'' is not a valid %s field', field, what));
        END IF;
        v_step := CASE WHEN m[3] IS NULL THEN 1 WHEN length(m[3]) > 4 THEN 0 ELSE m[3]::integer END;
        IF v_step < 1 OR v_step > hi - lo + 1 THEN
            PERFORM timers._schedule_fail(format('step %s in the %s field is out of range 1-%s', m[3], what, hi - lo + 1));
        END IF;
        v_a := coalesce(v_vals[1], lo);
        IF hi = 7 AND v_a = 7 AND m[2] IS NULL THEN
            v_a := 0;  -- 7 is Sunday, also as the start of '7/s' (= 0/s)
        END IF;
        v_b := CASE WHEN m[1] = '*' THEN v_last
                    WHEN m[2] IS NOT NULL THEN v_vals[2]
                    WHEN m[3] IS NOT NULL THEN greatest(v_last, v_a)
                    ELSE v_a END;
        IF v_a > v_b THEN
            PERFORM timers._schedule_fail(format('the %s range %s goes backwards', what, v_item));
        END IF;
        FOR v IN v_a .. v_b BY v_step LOOP
            v_mask := v_mask | (1::bigint << v);
        END LOOP;
    END LOOP;
    IF hi = 7 AND v_mask & 128 <> 0 THEN
        v_mask := (v_mask & 127) | 1;  -- 7 is Sunday
    END IF;
    RETURN v_mask;
END
$$;

-- Sorted values of a bit mask.
CREATE OR REPLACE FUNCTION timers._mask_values(mask bigint) RETURNS jsonb
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
        SELECT COALESCE(pg_catalog.jsonb_agg(v ORDER BY v), '[]'::jsonb)
          FROM pg_catalog.generate_series(0, 62) v
         WHERE (mask OPERATOR(pg_catalog.>>) v) OPERATOR(pg_catalog.&) 1 OPERATOR(pg_catalog.=) 1
    $$;

-- 'M H DoM Mon DoW' (or an @alias) -> cron spec with bit masks.
--   day_or: both day fields restricted (neither starts with '*'): a day matches
--           when either matches (Vixie cron); otherwise both must match.
--   clock:  'elapsed' when the minute or hour field starts with '*' (Vixie's
--           wildcard jobs), else 'wall'.
CREATE OR REPLACE FUNCTION timers._parse_cron(expr text) RETURNS jsonb
    LANGUAGE plpgsql IMMUTABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_expr   text := coalesce(expr, '');
    f        text[];
    v_min    bigint;
    v_hour   bigint;
    v_dom    bigint;
    v_mon    bigint;
    v_dow    bigint;
    v_day_or boolean;
    v_months constant text[] := ARRAY['jan','feb','mar','apr','may','jun','jul','aug','sep','oct','nov','dec'];
    v_days   constant text[] := ARRAY['sun','mon','tue','wed','thu','fri','sat'];
    v_maxday constant integer[] := ARRAY[31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
BEGIN
    v_expr := CASE lower(v_expr)
        WHEN '@yearly' THEN '0 0 1 1 *' WHEN '@annually' THEN '0 0 1 1 *'
        WHEN '@monthly' THEN '0 0 1 * *' WHEN '@weekly' THEN '0 0 * * 0'
        WHEN '@daily' THEN '0 0 * * *' WHEN '@midnight' THEN '0 0 * * *'
        WHEN '@hourly' THEN '0 * * * *'
        ELSE v_expr END;
    IF v_expr LIKE '@%' THEN
        PERFORM timers._schedule_fail(format('''%s'' is not one of @hourly, @daily, @weekly, @monthly, @yearly', v_expr));
    END IF;
    f := string_to_array(v_expr, ' ');
    IF coalesce(cardinality(f), 0) <> 5 THEN
        PERFORM timers._schedule_fail(format('cron needs 5 fields (minute hour day-of-month month day-of-week), got %s',
                                             coalesce(cardinality(f), 0)));
    END IF;
    v_min  := timers._parse_cron_field(f[1], 'minute', 0, 59);
    v_hour := timers._parse_cron_field(f[2], 'hour', 0, 23);
    v_dom  := timers._parse_cron_field(f[3], 'day of month', 1, 31);
    v_mon  := timers._parse_cron_field(f[4], 'month', 1, 12, v_months);
    v_dow  := timers._parse_cron_field(f[5], 'day of week', 0, 7, v_days);
    v_day_or := left(f[3], 1) <> '*' AND left(f[5], 1) <> '*';
    -- a day-of-month the months never have can never match (unless day_or adds weekdays)
    IF NOT v_day_or AND NOT EXISTS (
        SELECT 1 FROM generate_series(1, 12) mo, generate_series(1, 31) d
         WHERE (v_mon >> mo) & 1 = 1 AND (v_dom >> d) & 1 = 1 AND d <= v_maxday[mo]) THEN
        PERFORM timers._schedule_fail(format('day of month %s never occurs in month %s', f[3], f[4]));
    END IF;
    RETURN jsonb_build_object(
        'kind', 'cron',
        'expr', v_expr,
        'minute', timers._mask_values(v_min),
        'hour', timers._mask_values(v_hour),
        'dom', timers._mask_values(v_dom),
        'month', timers._mask_values(v_mon),
        'dow', timers._mask_values(v_dow),
        'minute_mask', v_min, 'hour_mask', v_hour, 'dom_mask', v_dom,
        'month_mask', v_mon, 'dow_mask', v_dow,
        'day_or', v_day_or,
        'clock', CASE WHEN left(f[1], 1) = '*' OR left(f[2], 1) = '*' THEN 'elapsed' ELSE 'wall' END);
END
$$;

-- A one-shot at an instant -> once spec. The stored text is the wall time in the
-- zone; an instant that is the second pass of a repeated wall time keeps its offset.
CREATE OR REPLACE FUNCTION timers._once_spec(instant timestamptz, zone text) RETURNS jsonb
    LANGUAGE plpgsql IMMUTABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_wall timestamp := instant AT TIME ZONE zone;
    v_text text := 'once ' || to_char(v_wall, 'YYYY-MM-DD HH24:MI:SS');
    v_off  interval;
BEGIN
    IF timers._local_to_utc(v_wall, zone) <> instant THEN
        v_off := timers._utc_offset(instant, zone);
        v_text := v_text || CASE WHEN v_off < interval '0' THEN '-' ELSE '+' END
                         || to_char(abs(extract(epoch FROM v_off)::integer) * interval '1 second', 'HH24:MI');
    END IF;
    RETURN jsonb_build_object('kind', 'once', 'schedule', v_text,
                              'at', to_char(instant AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'));
END
$$;

-- 'once 2027-01-04 09:00[:SS][Z|+05:45]': a wall time in the zone (or at the given offset).
CREATE OR REPLACE FUNCTION timers._parse_once(arg text, zone text) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    m      text[] := regexp_match(coalesce(arg, ''),
                         '^([0-9]{4})-([0-9]{2})-([0-9]{2})[ Tt]([0-9:]+)(Z|z|[+-][0-9]{2}(?::?[0-9]{2})?)?$');
    v_day  date;
    v_secs integer;
    v_wall timestamp;
    v_at   timestamptz;
BEGIN
    IF m IS NULL THEN
        PERFORM timers._schedule_fail();
    END IF;
    BEGIN
        v_day := make_date(m[1]::integer, m[2]::integer, m[3]::integer);
    EXCEPTION WHEN datetime_field_overflow OR invalid_datetime_format THEN
        PERFORM timers._schedule_fail(format('%s-%s-%s is not a date', m[1], m[2], m[3]));
    END;
    v_secs := timers._parse_time(m[4]);
    v_wall := v_day + make_interval(secs => v_secs);
    IF m[5] IS NULL THEN
        v_at := timers._local_to_utc(v_wall, zone, true);
    ELSE
        v_at := (to_char(v_wall, 'YYYY-MM-DD HH24:MI:SS') || upper(m[5]))::timestamptz;
    END IF;
    RETURN jsonb_build_object('kind', 'once',
                              'at', to_char(v_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'));
END
$$;

-- 'in 30m' / 'in 2h' / 'in 45s' / 'in 1d': a one-shot counted from now (whole seconds).
CREATE OR REPLACE FUNCTION timers._parse_in(arg text, zone text, now timestamptz) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    m      text[] := regexp_match(lower(coalesce(arg, '')), '^([0-9]{1,9})([smhd])$');
    v_secs bigint;
BEGIN
    IF m IS NULL THEN
        PERFORM timers._schedule_fail();
    END IF;
    v_secs := m[1]::bigint * CASE m[2] WHEN 's' THEN 1 WHEN 'm' THEN 60 WHEN 'h' THEN 3600 ELSE 86400 END;
    IF v_secs < 1 OR v_secs > 36500::bigint * 86400 THEN
        PERFORM timers._schedule_fail(format('the delay %s is not from 1s to 36500d', arg));
    END IF;
    IF now IS NULL THEN
        PERFORM timers._schedule_fail('"in" needs the current time');
    END IF;
    RETURN timers._once_spec(date_trunc('second', now + make_interval(secs => v_secs)), zone);
END
$$;

-- Validate and normalize a schedule. Returns the spec (see docs/schedules.md):
-- always "kind" and "schedule" (the text to store), plus what _next_due needs.
-- Errors: SQLSTATE 22023, 'bad "<first word>" schedule ''<text>''[: reason]; use a schedule like ...'.
CREATE OR REPLACE FUNCTION timers._parse_schedule(schedule text, zone text, now timestamptz) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_text  text;
    w       text[];
    v_first text;
    v_word  text;
    v_nw    integer;
    v_spec  jsonb;
    v_zone  text := coalesce(zone, 'UTC');
    v_why   text;
BEGIN
    -- trim, one space between words, none around commas
    v_text := regexp_replace(regexp_replace(btrim(coalesce(schedule, ''), E' \t\r\n'), '\s+', ' ', 'g'),
                             ' ?, ?', ',', 'g');
    w := string_to_array(v_text, ' ');
    v_nw := coalesce(cardinality(w), 0);
    v_first := lower(coalesce(w[1], ''));
    v_word := w[1];
    BEGIN
        IF v_text = '' THEN
            v_word := '';
            PERFORM timers._schedule_fail('the schedule is empty');
        ELSIF v_first = 'every' THEN
            IF v_nw <> 2 THEN PERFORM timers._schedule_fail(); END IF;
            v_spec := timers._parse_every(w[2]);
        ELSIF v_first = 'hourly' THEN
            IF v_nw > 2 OR (v_nw = 2 AND w[2] !~ '^:[0-9]{1,2}$') THEN PERFORM timers._schedule_fail(); END IF;
            IF v_nw = 2 AND substr(w[2], 2)::integer > 59 THEN
                PERFORM timers._schedule_fail(format('minute %s is out of range 0-59', substr(w[2], 2)::integer));
            END IF;
            v_spec := jsonb_build_object('kind', 'hourly',
                                         'minute', CASE WHEN v_nw = 2 THEN substr(w[2], 2)::integer ELSE 0 END,
                                         'clock', 'elapsed');
        ELSIF v_first = 'daily' THEN
            IF v_nw <> 2 THEN PERFORM timers._schedule_fail(); END IF;
            v_spec := jsonb_build_object('kind', 'daily') || timers._times_spec(w[2]);
        ELSIF v_first = 'monthly' THEN
            IF v_nw <> 3 OR w[2] !~ '^[0-9]{1,2}$' THEN PERFORM timers._schedule_fail(); END IF;
            IF w[2]::integer NOT BETWEEN 1 AND 28 THEN
                PERFORM timers._schedule_fail(format('day %s is out of range 1-28 (so that no month is skipped)',
                                                     w[2]::integer));
            END IF;
            v_spec := jsonb_build_object('kind', 'monthly', 'day', w[2]::integer) || timers._times_spec(w[3]);
        ELSIF v_first = 'trading' THEN
            IF v_nw <> 3 OR w[2] ~ '^[0-9:,]+$' THEN PERFORM timers._schedule_fail(); END IF;
            v_spec := jsonb_build_object('kind', 'trading', 'calendar', w[2]) || timers._times_spec(w[3]);
        ELSIF v_first = 'cron' THEN
            v_spec := timers._parse_cron(array_to_string(w[2:], ' '));
        ELSIF v_first LIKE '@%' AND v_nw = 1 THEN
            v_spec := timers._parse_cron(w[1]);
        ELSIF v_first = 'once' THEN
            v_spec := timers._parse_once(array_to_string(w[2:], ' '), v_zone);
        ELSIF v_first = 'in' THEN
            IF v_nw <> 2 THEN PERFORM timers._schedule_fail(); END IF;
            v_spec := timers._parse_in(w[2], v_zone, now);
        ELSIF v_first IN ('weekly', 'weekdays') OR timers._dow_number(left(v_first, 3)) IS NOT NULL THEN
            IF v_first = 'weekly' THEN
                w := w[2:];
                v_nw := v_nw - 1;
            END IF;
            IF v_nw <> 2 THEN PERFORM timers._schedule_fail(); END IF;
            v_spec := jsonb_build_object('kind', 'weekly', 'dow_mask', timers._parse_days(w[1]))
                      || timers._times_spec(w[2]);
            v_spec := v_spec || jsonb_build_object('dow', timers._mask_values((v_spec->>'dow_mask')::bigint));
        ELSE
            v_word := v_text;
            PERFORM timers._schedule_fail();
        END IF;
    EXCEPTION WHEN SQLSTATE 'PT001' THEN
        v_why := nullif(SQLERRM, '');
        RAISE EXCEPTION 'bad "%" schedule ''%''%; %', v_word, v_text,
            CASE WHEN v_why IS NULL THEN '' ELSE ': ' || v_why END, timers._schedule_examples()
            USING ERRCODE = '22023';
    END;
    -- the text to store: as written (normalized), except 'in' which becomes 'once ...'
    IF NOT v_spec ? 'schedule' THEN
        v_spec := v_spec || jsonb_build_object('schedule', v_text);
    END IF;
    RETURN v_spec;
END
$$;

-------------------------------------------------------------------------------
-- Next due time
-------------------------------------------------------------------------------

-- 'every N': the first grid point after `after`. With start_at: start_at + k*N.
-- Else the grid restarts at each local midnight (the first instant of the local
-- day) and steps in elapsed seconds; the last step of a day is cut at the next midnight.
CREATE OR REPLACE FUNCTION timers._next_every(seconds bigint, after timestamptz, zone text,
                                              start_at timestamptz DEFAULT NULL)
    RETURNS timestamptz
    LANGUAGE plpgsql IMMUTABLE
    SET search_path = pg_catalog, pg_temp
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

-- First day on or after `day` that a times-list spec runs on (NULL: none within a year).
CREATE OR REPLACE FUNCTION timers._next_day(spec jsonb, day date) RETURNS date
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_mask integer;
    v_dow  integer;
    v_dom  integer;
    v_y    integer;
    v_m    integer;
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
        v_dom := (spec->>'day')::integer;
        v_y := extract(year FROM day)::integer;
        v_m := extract(month FROM day)::integer;
        IF extract(day FROM day)::integer > v_dom THEN
            v_m := v_m + 1;
            IF v_m > 12 THEN
                v_m := 1;
                v_y := v_y + 1;
            END IF;
        END IF;
        RETURN make_date(v_y, v_m, v_dom);
    WHEN 'trading' THEN
        RETURN timers._next_trading_day(spec->>'calendar', day);
    ELSE
        RAISE EXCEPTION 'schedule kind % has no day list', spec->>'kind' USING ERRCODE = '22023';
    END CASE;
END
$$;

-- Smallest wall time >= w0 of a times-list spec (daily, weekly, monthly, trading).
CREATE OR REPLACE FUNCTION timers._next_wall_times(spec jsonb, w0 timestamp) RETURNS timestamp
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
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
-- no match costs at most 13 steps. Gives up (NULL) after 400 years, a full
-- Gregorian cycle, which parsing already guarantees never happens.
CREATE OR REPLACE FUNCTION timers._next_wall_cron(spec jsonb, w0 timestamp) RETURNS timestamp
    LANGUAGE plpgsql IMMUTABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    c_min    constant bigint := (spec->>'minute_mask')::bigint;
    c_hour   constant bigint := (spec->>'hour_mask')::bigint;
    c_dom    constant bigint := (spec->>'dom_mask')::bigint;
    c_mon    constant bigint := (spec->>'month_mask')::bigint;
    c_dow    constant bigint := (spec->>'dow_mask')::bigint;
    c_or     constant boolean := (spec->>'day_or')::boolean;
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
        -- day: the day-of-week mask laid over this month's days (bit d = day d)
        v_first := make_date(v_y, v_mo, 1);
        v_ndays := extract(day FROM (v_first + interval '1 month' - interval '1 day'))::integer;
        v_w1 := extract(dow FROM v_first)::integer;
        v_week := (((c_dow >> v_w1) | (c_dow << (7 - v_w1))) & 127) << 1;
        v_days := v_week | (v_week << 7) | (v_week << 14) | (v_week << 21) | (v_week << 28);
        v_x := CASE WHEN c_or THEN c_dom | v_days ELSE c_dom & v_days END;
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
    SET search_path = pg_catalog, pg_temp
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
    SET search_path = pg_catalog, pg_temp
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
    SET search_path = pg_catalog, pg_temp
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

-------------------------------------------------------------------------------
-- Public preview
-------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION timers.next_runs(schedule text, n integer, after timestamptz DEFAULT now(),
                                            timezone text DEFAULT NULL)
    RETURNS SETOF timestamptz
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_zone text;
    v_spec jsonb;
    v_t    timestamptz := next_runs.after;
BEGIN
    IF n IS NULL OR n < 1 OR n > 1000 THEN
        RAISE EXCEPTION 'n must be from 1 to 1000, not %', coalesce(n::text, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    IF v_t IS NULL THEN
        RAISE EXCEPTION 'after must not be NULL' USING ERRCODE = '22023';
    END IF;
    v_zone := timers._check_zone(coalesce(next_runs.timezone,
                                          (SELECT s.value FROM timers.settings s WHERE s.key = 'timezone'),
                                          'UTC'));
    v_spec := timers._parse_schedule(next_runs.schedule, v_zone, v_t);
    FOR i IN 1..n LOOP
        v_t := timers._next_due(v_spec, v_t, v_zone);
        EXIT WHEN v_t IS NULL;
        RETURN NEXT v_t;
    END LOOP;
END
$$;

COMMENT ON FUNCTION timers.next_runs(text, integer, timestamptz, text) IS
    'The next n (1-1000) due times of a schedule string after `after` (default now()), read in '
    '`timezone` (default: the database''s timers.set_timezone zone, else UTC). '
    'Example: SELECT * FROM timers.next_runs(''weekdays 11:00'', 5, timezone => ''Asia/Kathmandu'').';

-------------------------------------------------------------------------------
-- Rights: functions are executable by PUBLIC by default; narrow that.
-------------------------------------------------------------------------------
REVOKE ALL ON FUNCTION
    timers._utc_offset(timestamptz, text),
    timers._lowbit(bigint),
    timers._schedule_examples(),
    timers._check_zone(text),
    timers._offset_change(timestamptz, timestamptz, text),
    timers._local_to_utc(timestamp, text, boolean),
    timers._trading_day(text, date),
    timers._next_trading_day(text, date),
    timers._schedule_fail(text),
    timers._parse_time(text),
    timers._parse_times(text),
    timers._dow_number(text),
    timers._parse_days(text),
    timers._times_spec(text),
    timers._parse_every(text),
    timers._parse_cron_field(text, text, integer, integer, text[]),
    timers._mask_values(bigint),
    timers._parse_cron(text),
    timers._once_spec(timestamptz, text),
    timers._parse_once(text, text),
    timers._parse_in(text, text, timestamptz),
    timers._parse_schedule(text, text, timestamptz),
    timers._next_every(bigint, timestamptz, text, timestamptz),
    timers._next_day(jsonb, date),
    timers._next_wall_times(jsonb, timestamp),
    timers._next_wall_cron(jsonb, timestamp),
    timers._next_wall(jsonb, timestamp),
    timers._next_due_wall(jsonb, timestamptz, text),
    timers._next_due_elapsed(jsonb, timestamptz, text),
    timers._next_due(jsonb, timestamptz, text, timestamptz),
    timers.next_runs(text, integer, timestamptz, text)
FROM PUBLIC;

GRANT EXECUTE ON FUNCTION
    timers._utc_offset(timestamptz, text),
    timers._lowbit(bigint),
    timers._schedule_examples(),
    timers._check_zone(text),
    timers._offset_change(timestamptz, timestamptz, text),
    timers._local_to_utc(timestamp, text, boolean),
    timers._trading_day(text, date),
    timers._next_trading_day(text, date),
    timers._schedule_fail(text),
    timers._parse_time(text),
    timers._parse_times(text),
    timers._dow_number(text),
    timers._parse_days(text),
    timers._times_spec(text),
    timers._parse_every(text),
    timers._parse_cron_field(text, text, integer, integer, text[]),
    timers._mask_values(bigint),
    timers._parse_cron(text),
    timers._once_spec(timestamptz, text),
    timers._parse_once(text, text),
    timers._parse_in(text, text, timestamptz),
    timers._parse_schedule(text, text, timestamptz),
    timers._next_every(bigint, timestamptz, text, timestamptz),
    timers._next_day(jsonb, date),
    timers._next_wall_times(jsonb, timestamp),
    timers._next_wall_cron(jsonb, timestamp),
    timers._next_wall(jsonb, timestamp),
    timers._next_due_wall(jsonb, timestamptz, text),
    timers._next_due_elapsed(jsonb, timestamptz, text),
    timers._next_due(jsonb, timestamptz, text, timestamptz)
TO pgtimers_reader, pgtimers_runner;

GRANT EXECUTE ON FUNCTION timers.next_runs(text, integer, timestamptz, text) TO pgtimers_reader, pgtimers_runner;
