-- pgtimers code: the schedule grammar: parse and check a schedule string into a spec.
--
-- Repeatable: applied whole on every install and upgrade, after the versioned
-- migrations (docs/design.md). Each object here is defined in this file only.

-- The list of valid forms every bad-schedule error ends with.
CREATE OR REPLACE FUNCTION timers._schedule_examples() RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
        SELECT 'use a schedule like "every 10s", "every 5m", "every 2h", "hourly", "hourly :15", '
               '"daily 16:00", "daily 02:00,13:30", "weekdays 11:00", "sun-thu 11:00", '
               '"mon,wed,fri 09:30", "monthly 1 02:00", "trading nepse 15:05" (the trading days of '
               'calendar nepse), "cron 0 9 * * 1-5", "once 2027-01-04 09:00" or "in 30m"'::text
    $$;

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

-- Raise the internal "bad part" signal; _parse_schedule wraps it into the message.
CREATE OR REPLACE FUNCTION timers._schedule_fail(reason text DEFAULT NULL) RETURNS void
    LANGUAGE plpgsql VOLATILE
    AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = 'PT001', MESSAGE = coalesce(reason, '');
END
$$;

-- Seconds of the day of a wall time 'HH:MM' or 'HH:MM:SS'.
CREATE OR REPLACE FUNCTION timers._parse_time(tok text) RETURNS integer
    LANGUAGE plpgsql IMMUTABLE
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

-- 'every 10s|5m|2h': 1 second to 24 hours; '7 mins' and the like get what to write.
CREATE OR REPLACE FUNCTION timers._parse_every(arg text) RETURNS jsonb
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    m      text[] := regexp_match(lower(coalesce(arg, '')), '^([0-9]{1,9})([smh])$');
    v_near text[];
    v_secs bigint;
BEGIN
    IF m IS NULL THEN
        -- a near miss ('7 mins', '30sec', '2 hours'): name the form meant
        v_near := regexp_match(lower(coalesce(arg, '')),
                               '^([0-9]{1,9}) ?(s|secs?|seconds?|m|mins?|minutes?|h|hrs?|hours?)$');
        IF v_near IS NOT NULL THEN
            PERFORM timers._schedule_fail(format('did you mean "every %s%s"?', v_near[1], left(v_near[2], 1)));
        END IF;
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
        IF lower(v_item) ~ '^(l|lw|l-[0-9]+|[0-9]+[lw]|[a-z0-9]+#[0-9]+|[$])$' THEN
            PERFORM timers._schedule_fail(format(
                '''%s'' in the %s field: L, W, # and $ belong in the day-of-month field (L, L-3, 15W, LW, $) '
                'or the day-of-week field (5L, 2#3)', v_item, what));
        END IF;
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

-- The day rules of a day field (the forms croniter and Quartz add to cron), split from
-- its plain items. Day of month: L and pg_cron's $ (the last day), L-n (the n-th day
-- before the last, n 1-30), dW (the weekday nearest day d within the month, d 1-31),
-- LW (the last weekday). Day of week: wL (the last weekday w of the month), w#k (the
-- k-th, k 1-5); w is 0-7 or a name. Returns {plain: the other items joined by ',',
-- last: bit n = L-n (day of month) or bit w = wL (day of week), near: bit d = dW
-- (LW = 31W: a day past the month's end is its last day, as croniter reads it),
-- nth: bit 7*(k-1)+w = w#k}.
CREATE OR REPLACE FUNCTION timers._parse_cron_rules(field text, what text) RETURNS jsonb
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    v_days  constant text[] := ARRAY['sun','mon','tue','wed','thu','fri','sat'];
    v_dom   constant boolean := what = 'day of month';
    v_item  text;
    v_low   text;
    m       text[];
    v_plain text[] := ARRAY[]::text[];
    v_last  bigint := 0;
    v_near  bigint := 0;
    v_nth   bigint := 0;
    v_n     integer;
    v_w     integer;
BEGIN
    FOREACH v_item IN ARRAY string_to_array(field, ',') LOOP
        v_low := lower(v_item);
        IF v_dom AND v_low !~ '^[0-9*/-]*$' THEN
            m := regexp_match(v_low, '^(?:(l|[$])|l-([0-9]{1,4})|(lw)|([0-9]{1,4})w)$');
            IF m IS NULL THEN
                PERFORM timers._schedule_fail(format(
                    '''%s'' in the day-of-month field: write L or $ (the last day), L-3 (the third day before '
                    'the last), 15W (the weekday nearest the 15th) or LW (the last weekday), each on its own '
                    'between commas', v_item));
            ELSIF m[1] IS NOT NULL THEN
                v_last := v_last | 1;
            ELSIF m[2] IS NOT NULL THEN
                v_n := m[2]::integer;
                IF v_n NOT BETWEEN 1 AND 30 THEN
                    PERFORM timers._schedule_fail(format(
                        '''%s'' in the day-of-month field: L-n counts 1 to 30 days back from the last day',
                        v_item));
                END IF;
                v_last := v_last | (1::bigint << v_n);
            ELSE
                v_n := coalesce(m[4]::integer, 31);
                IF v_n NOT BETWEEN 1 AND 31 THEN
                    PERFORM timers._schedule_fail(format(
                        '''%s'' in the day-of-month field: W takes a day of month 1-31 (15W), or L (LW)', v_item));
                END IF;
                v_near := v_near | (1::bigint << v_n);
            END IF;
        ELSIF NOT v_dom AND v_low ~ '[#l$]|^[0-9]*w$' THEN
            m := regexp_match(v_low, '^([0-9]{1,4}|[a-z]{3})(?:(l)|#([0-9]{1,4}))$');
            v_w := CASE WHEN m IS NULL THEN NULL
                        WHEN m[1] ~ '^[0-9]+$' AND m[1]::integer <= 7 THEN m[1]::integer % 7
                        ELSE array_position(v_days, m[1]) - 1 END;
            IF m IS NULL THEN
                PERFORM timers._schedule_fail(format(
                    '''%s'' in the day-of-week field: write 5L (the last Friday of the month) or 2#3 (its third '
                    'Tuesday), each on its own between commas; L alone and W belong in the day-of-month field',
                    v_item));
            ELSIF v_w IS NULL THEN
                PERFORM timers._schedule_fail(format(
                    '''%s'' in the day-of-week field: ''%s'' is not a day of week (0-7 or sun-sat)', v_item, m[1]));
            ELSIF m[2] IS NOT NULL THEN
                v_last := v_last | (1::bigint << v_w);
            ELSIF m[3]::integer NOT BETWEEN 1 AND 5 THEN
                PERFORM timers._schedule_fail(format(
                    '''%s'' in the day-of-week field: the week of the month after # is 1-5', v_item));
            ELSE
                v_nth := v_nth | (1::bigint << (7 * (m[3]::integer - 1) + v_w));
            END IF;
        ELSE
            v_plain := v_plain || v_item;
        END IF;
    END LOOP;
    RETURN jsonb_build_object('plain', array_to_string(v_plain, ','), 'last', v_last, 'near', v_near, 'nth', v_nth);
END
$$;

-- The days of one month a cron expression runs on (bit d = day d): the month has
-- ndays days and its 1st is weekday w1 (0 = Sunday). dom and dow are the plain
-- masks; the day rules: dom_last (bit n = L-n), dom_near (bit d = dW, a d past the
-- end is the last day), dow_last (bit w = the last weekday w), dow_nth (bit
-- 7*(k-1)+w = the k-th weekday w). The planner calls it once per month it looks at.
CREATE OR REPLACE FUNCTION timers._cron_month_days(dom bigint, dow bigint, day_or boolean,
                                                   dom_last bigint, dom_near bigint, dow_last bigint,
                                                   dow_nth bigint, ndays integer, w1 integer)
    RETURNS bigint
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $$
DECLARE
    v_week bigint := (((dow >> w1) | (dow << (7 - w1))) & 127) << 1;
    v_dom  bigint := dom;
    v_dow  bigint := v_week | (v_week << 7) | (v_week << 14) | (v_week << 21) | (v_week << 28);
    v_m    bigint;
    v_b    integer;
    v_d    integer;
    v_wd   integer;
BEGIN
    v_m := dom_last;
    WHILE v_m <> 0 LOOP
        v_b := timers._lowbit(v_m);
        v_m := v_m & (v_m - 1);
        IF ndays - v_b >= 1 THEN
            v_dom := v_dom | (1::bigint << (ndays - v_b));
        END IF;
    END LOOP;
    v_m := dom_near;
    WHILE v_m <> 0 LOOP
        v_d := least(timers._lowbit(v_m), ndays);
        v_m := v_m & (v_m - 1);
        v_wd := (w1 + v_d - 1) % 7;
        -- Saturday: the Friday before, or Monday the 3rd when the 1st is a Saturday;
        -- Sunday: the Monday after, or the Friday before when it is the last day
        v_d := CASE WHEN v_wd = 6 THEN CASE WHEN v_d > 1 THEN v_d - 1 ELSE v_d + 2 END
                    WHEN v_wd = 0 THEN CASE WHEN v_d < ndays THEN v_d + 1 ELSE v_d - 2 END
                    ELSE v_d END;
        v_dom := v_dom | (1::bigint << v_d);
    END LOOP;
    v_m := dow_last;
    WHILE v_m <> 0 LOOP
        v_b := timers._lowbit(v_m);
        v_m := v_m & (v_m - 1);
        v_dow := v_dow | (1::bigint << (ndays - ((w1 + ndays - 1 - v_b + 7) % 7)));
    END LOOP;
    v_m := dow_nth;
    WHILE v_m <> 0 LOOP
        v_b := timers._lowbit(v_m);
        v_m := v_m & (v_m - 1);
        -- a 5th past the month's end is cut off with the other days past it below
        v_dow := v_dow | (1::bigint << (1 + (v_b % 7 - w1 + 7) % 7 + 7 * (v_b / 7)));
    END LOOP;
    RETURN CASE WHEN day_or THEN v_dom | v_dow ELSE v_dom & v_dow END
           & ((1::bigint << (ndays + 1)) - 2);
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
--           when either matches (Vixie cron); otherwise both must match. A day
--           rule that croniter does not OR (dW and LW beside a restricted day of
--           week, wL and w#k beside a restricted day of month: it keeps only the
--           rule's days there) is refused in that case rather than read either way.
--   clock:  'elapsed' when the minute or hour field starts with '*' (Vixie's
--           wildcard jobs), else 'wall'.
--   dom_last_mask, dom_near_mask, dow_last_mask, dow_nth_mask: the day rules
--           (_parse_cron_rules), present only when the expression has one.
CREATE OR REPLACE FUNCTION timers._parse_cron(expr text) RETURNS jsonb
    LANGUAGE plpgsql IMMUTABLE
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
    v_domr   jsonb;
    v_dowr   jsonb;
    v_rules  jsonb := '{}';
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
    v_domr := timers._parse_cron_rules(f[3], 'day of month');
    v_dom  := CASE WHEN v_domr->>'plain' = '' THEN 0
                   ELSE timers._parse_cron_field(v_domr->>'plain', 'day of month', 1, 31) END;
    v_mon  := timers._parse_cron_field(f[4], 'month', 1, 12, v_months);
    v_dowr := timers._parse_cron_rules(f[5], 'day of week');
    v_dow  := CASE WHEN v_dowr->>'plain' = '' THEN 0
                   ELSE timers._parse_cron_field(v_dowr->>'plain', 'day of week', 0, 7, v_days) END;
    v_day_or := left(f[3], 1) <> '*' AND left(f[5], 1) <> '*';
    IF (v_domr->>'last')::bigint <> 0 THEN
        v_rules := v_rules || jsonb_build_object('dom_last_mask', (v_domr->>'last')::bigint);
    END IF;
    IF (v_domr->>'near')::bigint <> 0 THEN
        v_rules := v_rules || jsonb_build_object('dom_near_mask', (v_domr->>'near')::bigint);
        IF v_day_or THEN
            PERFORM timers._schedule_fail(format(
                '''%s'' in the day-of-month field takes no day of week beside it: write * in the day-of-week '
                'field (with both fields restricted cron runs on either, and croniter would keep only the W days)',
                (SELECT i FROM unnest(string_to_array(f[3], ',')) i WHERE i ~* 'w' LIMIT 1)));
        END IF;
    END IF;
    IF (v_dowr->>'last')::bigint <> 0 THEN
        v_rules := v_rules || jsonb_build_object('dow_last_mask', (v_dowr->>'last')::bigint);
    END IF;
    IF (v_dowr->>'nth')::bigint <> 0 THEN
        v_rules := v_rules || jsonb_build_object('dow_nth_mask', (v_dowr->>'nth')::bigint);
    END IF;
    IF v_day_or AND ((v_dowr->>'last')::bigint <> 0 OR (v_dowr->>'nth')::bigint <> 0) THEN
        PERFORM timers._schedule_fail(format(
            '''%s'' in the day-of-week field takes no day of month beside it: write * in the day-of-month '
            'field (with both fields restricted cron runs on either, and croniter would keep only the %s days)',
            (SELECT i FROM unnest(string_to_array(f[5], ',')) i WHERE i ~* '[#l]' LIMIT 1),
            CASE WHEN (v_dowr->>'nth')::bigint <> 0 THEN '#' ELSE 'L' END));
    END IF;
    -- a day-of-month the months never have can never match (unless day_or adds weekdays)
    IF v_rules = '{}' AND NOT v_day_or AND NOT EXISTS (
        SELECT 1 FROM generate_series(1, 12) mo, generate_series(1, 31) d
         WHERE (v_mon >> mo) & 1 = 1 AND (v_dom >> d) & 1 = 1 AND d <= v_maxday[mo]) THEN
        PERFORM timers._schedule_fail(format('day of month %s never occurs in month %s', f[3], f[4]));
    END IF;
    -- with a day rule: some month must have a day that matches (in the 400-year
    -- cycle each month starts on each weekday, February also in leap years)
    IF v_rules <> '{}' AND NOT EXISTS (
        SELECT 1 FROM generate_series(1, 12) mo, generate_series(0, 6) w1,
                      unnest(CASE WHEN mo = 2 THEN ARRAY[28, 29] ELSE ARRAY[v_maxday[mo]] END) nd
         WHERE (v_mon >> mo) & 1 = 1
           AND timers._cron_month_days(v_dom, v_dow, v_day_or,
                                       coalesce((v_rules->>'dom_last_mask')::bigint, 0),
                                       coalesce((v_rules->>'dom_near_mask')::bigint, 0),
                                       coalesce((v_rules->>'dow_last_mask')::bigint, 0),
                                       coalesce((v_rules->>'dow_nth_mask')::bigint, 0), nd, w1) <> 0) THEN
        PERFORM timers._schedule_fail(CASE
            WHEN f[5] = '*' THEN format('day of month %s never occurs in month %s', f[3], f[4])
            ELSE format('day of month %s and day of week %s never fall on one day in month %s', f[3], f[5], f[4]) END);
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
        'clock', CASE WHEN left(f[1], 1) = '*' OR left(f[2], 1) = '*' THEN 'elapsed' ELSE 'wall' END) || v_rules;
END
$$;

-- A one-shot at an instant -> once spec. The stored text is the wall time in the
-- zone; an instant that is the second pass of a repeated wall time keeps its offset.
CREATE OR REPLACE FUNCTION timers._once_spec(instant timestamptz, zone text) RETURNS jsonb
    LANGUAGE plpgsql IMMUTABLE
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

-- 'monthly' arguments (w: the words after it) -> monthly spec, naming the bad part:
--   D[,D...] T    days of the month: 1-31 ('day' for one of 1-31, as before; 29-31 skip
--                 the months without them, as cron does), 'last', '-N' or 'last-N' (N days
--                 before the last: -1 is the day before the last, 1 to 27 back)
--                 -> "days": [1, 15], "from_end": [0, 3] (0 = the last day)
--   Nth DAY T     1st-4th or last weekday of the month -> "nth": 1..4 or -1, "weekday": 0..6
CREATE OR REPLACE FUNCTION timers._parse_monthly(w text[]) RETURNS jsonb
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    v_nw    integer := coalesce(cardinality(w), 0);
    v_a     text := lower(coalesce(w[1], ''));
    v_tok   text;
    v_n     integer;
    v_dow   integer;
    v_days  integer[] := '{}';
    v_back  integer[] := '{}';
    m       text[];
    c_ords  constant text[] := ARRAY['1st', '2nd', '3rd', '4th'];
    c_words constant text[] := ARRAY['first', 'second', 'third', 'fourth'];
BEGIN
    IF v_nw = 0 THEN
        PERFORM timers._schedule_fail('a day of the month and a time are missing, as in "monthly 1 02:00"');
    END IF;
    IF v_a ~ '^[0-9]+(st|nd|rd|th)$' OR v_a = ANY (c_words)
       OR (v_a = 'last' AND v_nw >= 2 AND w[2] !~ '^[0-9]') THEN
        -- the Nth weekday of the month
        v_n := CASE WHEN v_a = 'last' THEN -1 ELSE array_position(c_ords, v_a) END;
        IF v_a = ANY (c_words) THEN
            PERFORM timers._schedule_fail(format('did you mean "%s"?', c_ords[array_position(c_words, v_a)]));
        ELSIF v_n IS NULL THEN
            PERFORM timers._schedule_fail(format(
                '''%s'' is not a week of the month: use 1st, 2nd, 3rd, 4th or last (not every month has a 5th)', w[1]));
        END IF;
        IF v_nw < 2 THEN
            PERFORM timers._schedule_fail(format('a day like tue is missing after ''%s''', w[1]));
        END IF;
        v_dow := timers._dow_number(w[2]);
        IF v_dow IS NULL THEN
            PERFORM timers._schedule_fail(format('''%s'' is not a day (days: sun mon tue wed thu fri sat)%s', w[2],
                CASE WHEN timers._dow_number(left(w[2], 3)) IS NOT NULL
                     THEN format('; did you mean "%s"?', lower(left(w[2], 3))) ELSE '' END));
        END IF;
        IF v_nw < 3 THEN
            PERFORM timers._schedule_fail(format('a time like 09:30 is missing after ''%s %s''', w[1], w[2]));
        ELSIF v_nw > 3 THEN
            PERFORM timers._schedule_fail(format('''%s'' after the time is not part of a monthly schedule', w[4]));
        END IF;
        RETURN jsonb_build_object('kind', 'monthly', 'nth', v_n, 'weekday', v_dow) || timers._times_spec(w[3]);
    END IF;
    -- days of the month
    IF w[1] ~ ':' THEN
        PERFORM timers._schedule_fail('a day of the month is missing before the time, as in "monthly 1 02:00"');
    END IF;
    FOREACH v_tok IN ARRAY string_to_array(v_a, ',') LOOP
        IF v_tok ~ '^[0-9]{1,4}$' THEN
            IF v_tok::integer NOT BETWEEN 1 AND 31 THEN
                PERFORM timers._schedule_fail(format('day %s is out of range 1-31 (or write last)', v_tok::integer));
            END IF;
            v_days := v_days || v_tok::integer;
        ELSIF v_tok = 'last' THEN
            v_back := v_back || 0;
        ELSE
            m := regexp_match(v_tok, '^(?:last)?-([0-9]{1,4})$');
            IF m IS NULL THEN
                PERFORM timers._schedule_fail(format(
                    '''%s'' is not a day of the month: use 1-31, last, or -1 to -27 (days before the last)', v_tok));
            END IF;
            IF m[1]::integer NOT BETWEEN 1 AND 27 THEN
                PERFORM timers._schedule_fail(format(
                    '%s is out of range -1 to -27 (days before the last; -1 is the day before the last)', v_tok));
            END IF;
            v_back := v_back || m[1]::integer;
        END IF;
    END LOOP;
    IF v_nw < 2 THEN
        PERFORM timers._schedule_fail(format('a time like 09:30 is missing after ''%s''', w[1]));
    ELSIF v_nw > 2 THEN
        PERFORM timers._schedule_fail(format('''%s'' after the time is not part of a monthly schedule', w[3]));
    END IF;
    IF cardinality(v_days) = 1 AND cardinality(v_back) = 0 THEN
        -- one day of the month: the spec as it always was
        RETURN jsonb_build_object('kind', 'monthly', 'day', v_days[1]) || timers._times_spec(w[2]);
    END IF;
    RETURN jsonb_build_object('kind', 'monthly',
                              'days', to_jsonb(ARRAY(SELECT DISTINCT d FROM unnest(v_days) d ORDER BY d)),
                              'from_end', to_jsonb(ARRAY(SELECT DISTINCT d FROM unnest(v_back) d ORDER BY d)))
           || timers._times_spec(w[2]);
END
$$;

-- 'trading' arguments (w: the words after it) -> trading spec:
--   CAL T                  every trading day of calendar CAL
--   CAL first|last|last-N T  the first, last, or N-before-the-last trading day of each
--                          month -> "nth": 1, -1, -(N+1); a month with too few is skipped
CREATE OR REPLACE FUNCTION timers._parse_trading(w text[]) RETURNS jsonb
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    v_nw  integer := coalesce(cardinality(w), 0);
    v_b   text := lower(coalesce(w[2], ''));
    v_nth integer;
    m     text[];
BEGIN
    IF v_nw = 0 OR w[1] ~ '^[0-9:,]+$' THEN
        PERFORM timers._schedule_fail();
    END IF;
    IF v_nw = 2 AND v_b ~ '^[0-9]' THEN
        RETURN jsonb_build_object('kind', 'trading', 'calendar', w[1]) || timers._times_spec(w[2]);
    END IF;
    IF v_nw = 1 THEN
        PERFORM timers._schedule_fail(format('a time like 09:30 is missing after the calendar ''%s''', w[1]));
    END IF;
    m := regexp_match(v_b, '^(first|last)(?:-([0-9]{1,4}))?$');
    IF m IS NULL OR (m[1] = 'first' AND m[2] IS NOT NULL) THEN
        PERFORM timers._schedule_fail(format(
            '''%s'' is not a day of the month: use first, last or last-N (N trading days before the last, 1-20)', w[2]));
    END IF;
    IF coalesce(m[2], '1')::integer NOT BETWEEN 1 AND 20 THEN
        PERFORM timers._schedule_fail(format('%s is out of range last-1 to last-20', w[2]));
    END IF;
    IF v_nw = 2 THEN
        PERFORM timers._schedule_fail(format('a time like 09:30 is missing after ''%s''', w[2]));
    ELSIF v_nw > 3 THEN
        PERFORM timers._schedule_fail(format('''%s'' after the time is not part of a trading schedule', w[4]));
    END IF;
    v_nth := CASE WHEN m[1] = 'first' THEN 1 ELSE -1 - coalesce(m[2], '0')::integer END;
    RETURN jsonb_build_object('kind', 'trading', 'calendar', w[1], 'nth', v_nth) || timers._times_spec(w[3]);
END
$$;

-- A schedule written as pg_cron takes it, without a pgtimers keyword (w: its words):
-- a bare 5-field cron -> 'cron M H DoM Mon DoW', pg_cron's 'N seconds' (1 to 59) ->
-- 'every Ns'. What is near but not either gets the reason (PT001) and what to write.
CREATE OR REPLACE FUNCTION timers._pg_cron_form(w text[]) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    v_nw   integer := coalesce(cardinality(w), 0);
    v_unit text := lower(coalesce(w[2], ''));
    v_n    bigint;
BEGIN
    IF v_nw = 2 AND w[1] ~ '^[0-9]{1,9}$' AND v_unit !~ '^[0-9*]' THEN
        v_n := w[1]::bigint;
        IF v_unit IN ('second', 'seconds') THEN
            IF v_n BETWEEN 1 AND 59 THEN
                RETURN format('every %ss', v_n);
            END IF;
            PERFORM timers._schedule_fail(format(
                '"N seconds" takes 1 to 59 seconds, as in pg_cron%s',
                CASE WHEN v_n BETWEEN 60 AND 86400 THEN format('; did you mean "every %ss"?', v_n) ELSE '' END));
        ELSIF v_unit IN ('minute', 'minutes', 'min', 'mins', 'hour', 'hours', 'hr', 'hrs') THEN
            PERFORM timers._schedule_fail(format('did you mean "every %s%s"?', v_n, left(v_unit, 1)));
        END IF;
        PERFORM timers._schedule_fail(format(
            '''%s'' is not a unit; an interval is written "every %ss", "every %sm" or "every %sh"',
            w[2], v_n, v_n, v_n));
    END IF;
    IF v_nw = 1 AND lower(w[1]) ~ '^[0-9]{1,9}[smhd]$' THEN
        PERFORM timers._schedule_fail(format('did you mean "every %s" (or "in %s" for one run)?',
                                             lower(w[1]), lower(w[1])));
    END IF;
    IF v_nw = 6 THEN
        PERFORM timers._schedule_fail(
            'a cron schedule has 5 fields (minute hour day-of-month month day-of-week), not 6: '
            'there is no seconds or year field; for a run every N seconds write "every Ns"');
    END IF;
    IF v_nw <> 5 THEN
        PERFORM timers._schedule_fail(format(
            'a cron schedule has 5 fields (minute hour day-of-month month day-of-week), got %s', v_nw));
    END IF;
    RETURN 'cron ' || array_to_string(w, ' ');
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
            IF v_nw NOT IN (2, 3) THEN PERFORM timers._schedule_fail(); END IF;
            v_spec := timers._parse_every(array_to_string(w[2:], ' '));
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
            v_spec := timers._parse_monthly(w[2:]);
        ELSIF v_first = 'trading' THEN
            v_spec := timers._parse_trading(w[2:]);
        ELSIF v_first = 'cron' THEN
            v_spec := timers._parse_cron(array_to_string(w[2:], ' '));
        ELSIF v_first ~ '^[0-9*]' THEN
            -- pg_cron's habits (a bare cron, 'N seconds'), stored in the pgtimers form
            v_word := CASE WHEN v_nw = 1 THEN w[1]
                           WHEN v_nw = 2 AND w[2] !~ '^[0-9*]' THEN lower(w[2])
                           ELSE 'cron' END;
            w := string_to_array(timers._pg_cron_form(w), ' ');
            v_word := w[1];
            v_spec := CASE WHEN w[1] = 'every' THEN timers._parse_every(w[2])
                           ELSE timers._parse_cron(array_to_string(w[2:], ' ')) END
                      || jsonb_build_object('schedule', array_to_string(w, ' '));
        ELSIF v_first LIKE '@%' AND v_nw = 1 THEN
            v_spec := timers._parse_cron(w[1]);
        ELSIF v_first = 'after' THEN
            -- a follower: no due times of its own, those of the timers it follows (its
            -- save's after => ARRAY[...]; timers._check_after)
            IF v_nw <> 1 THEN
                PERFORM timers._schedule_fail('''after'' is the whole schedule of a timer that waits for others; name them with after => ARRAY[...]');
            END IF;
            v_spec := jsonb_build_object('kind', 'after', 'schedule', 'after');
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

-- ---------------------------------------------------------------------------
-- Rights
-- ---------------------------------------------------------------------------
REVOKE ALL ON FUNCTION
    timers._schedule_examples(),
    timers._check_zone(text),
    timers._schedule_fail(text),
    timers._parse_time(text),
    timers._parse_times(text),
    timers._dow_number(text),
    timers._parse_days(text),
    timers._times_spec(text),
    timers._parse_every(text),
    timers._parse_cron_field(text,text,integer,integer,text[]),
    timers._parse_cron_rules(text,text),
    timers._cron_month_days(bigint,bigint,boolean,bigint,bigint,bigint,bigint,integer,integer),
    timers._mask_values(bigint),
    timers._parse_cron(text),
    timers._once_spec(timestamp with time zone,text),
    timers._parse_once(text,text),
    timers._parse_in(text,text,timestamp with time zone),
    timers._parse_monthly(text[]),
    timers._parse_trading(text[]),
    timers._pg_cron_form(text[]),
    timers._parse_schedule(text,text,timestamp with time zone)
    FROM PUBLIC, pgtimers_reader, pgtimers_admin, pgtimers_runner;
GRANT EXECUTE ON FUNCTION
    timers._schedule_examples(),
    timers._check_zone(text),
    timers._schedule_fail(text),
    timers._parse_time(text),
    timers._parse_times(text),
    timers._dow_number(text),
    timers._parse_days(text),
    timers._times_spec(text),
    timers._parse_every(text),
    timers._parse_cron_field(text,text,integer,integer,text[]),
    timers._parse_cron_rules(text,text),
    timers._cron_month_days(bigint,bigint,boolean,bigint,bigint,bigint,bigint,integer,integer),
    timers._mask_values(bigint),
    timers._parse_cron(text),
    timers._once_spec(timestamp with time zone,text),
    timers._parse_once(text,text),
    timers._parse_in(text,text,timestamp with time zone),
    timers._parse_monthly(text[]),
    timers._parse_trading(text[]),
    timers._pg_cron_form(text[]),
    timers._parse_schedule(text,text,timestamp with time zone)
    TO pgtimers_reader, pgtimers_runner;
