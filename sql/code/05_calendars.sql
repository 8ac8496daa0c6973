-- pgtimers code: trading calendars: week eras, holidays, extra days, and the calls that
-- change them.
--
-- Repeatable: applied whole on every install and upgrade, after the versioned
-- migrations (docs/design.md). Each object here is defined in this file only.

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

-- The nth trading day of the month starting at month_first (nth 1: the first; -1: the
-- last; -3: two before the last); NULL when the month has fewer. A missing calendar
-- trades every day, as in _next_trading_day.
CREATE OR REPLACE FUNCTION timers._nth_trading_day(p_calendar text, month_first date, nth integer) RETURNS date
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    v_last date := (month_first + interval '1 month' - interval '1 day')::date;
    v_day  date;
    v_k    integer := 0;
BEGIN
    IF nth > 0 THEN
        v_day := month_first - 1;
        FOR i IN 1..nth LOOP
            v_day := timers._next_trading_day(p_calendar, v_day + 1);
            IF v_day IS NULL OR v_day > v_last THEN
                RETURN NULL;
            END IF;
        END LOOP;
        RETURN v_day;
    END IF;
    v_day := v_last;
    WHILE v_day >= month_first LOOP
        IF coalesce(timers._trading_day(p_calendar, v_day), true) THEN
            v_k := v_k + 1;
            IF v_k = -nth THEN
                RETURN v_day;
            END IF;
        END IF;
        v_day := v_day - 1;
    END LOOP;
    RETURN NULL;
END
$$;

-- A week as text ('mon-fri', 'sun-thu', 'mon,wed,fri', 'fri-sun', 'weekdays', 'none')
-- as a mask: bit 0 = Sunday .. bit 6 = Saturday.
CREATE OR REPLACE FUNCTION timers._parse_week(p_week text) RETURNS smallint
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    v_text text := lower(regexp_replace(coalesce(p_week, ''), '\s+', '', 'g'));
BEGIN
    IF v_text = 'none' THEN
        RETURN 0;
    ELSIF v_text = '' THEN
        RETURN NULL;
    END IF;
    -- The schedule grammar's day lists ('mon-fri', 'fri-sun', 'mon,wed,fri', 'weekdays').
    RETURN timers._parse_days(v_text);
EXCEPTION WHEN SQLSTATE 'PT001' THEN  -- _parse_days' internal 'not a day list'
    RETURN NULL;  -- _week_mask says what a week looks like
END
$$;

-- A week as a day mask, else 22023 naming the bad part.
CREATE OR REPLACE FUNCTION timers._week_mask(p_week text) RETURNS smallint
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    v_mask smallint := timers._parse_week(p_week);
BEGIN
    IF v_mask IS NULL THEN
        RAISE EXCEPTION 'bad week ''%''; use days like ''mon-fri'', ''sun-thu'', ''mon,wed,fri'', ''fri-sun'', ''weekdays'' or ''none'' (days: sun mon tue wed thu fri sat)', p_week
            USING ERRCODE = '22023';
    END IF;
    RETURN v_mask;
END
$$;

-- The mask back as text, for reading: 62 -> 'mon,tue,wed,thu,fri'.
CREATE OR REPLACE FUNCTION timers._week_text(p_mask smallint) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
        SELECT coalesce(string_agg(d, ',' ORDER BY i), 'none')
          FROM unnest(ARRAY['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat']) WITH ORDINALITY AS x(d, i)
         WHERE p_mask & (1 << (i - 1)::integer) <> 0
    $$;

-- A calendar name by the name rules, else 22023.
CREATE OR REPLACE FUNCTION timers._check_calendar_name(p_name text) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF p_name IS NULL OR p_name !~ '^[A-Za-z0-9_-]{1,64}$' THEN
        RAISE EXCEPTION 'bad calendar name %: use 1 to 64 letters, digits, "_" and "-"', timers._quoted(p_name)
            USING ERRCODE = '22023';
    END IF;
    RETURN p_name;
END
$$;

-- The stored name of a calendar (names compare case-insensitively); raises when missing.
CREATE OR REPLACE FUNCTION timers._calendar(p_name text) RETURNS text
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    v_name text;
BEGIN
    SELECT c.name INTO v_name FROM timers.calendars c WHERE lower(c.name) = lower(p_name) COLLATE "default";
    IF v_name IS NULL THEN
        RAISE EXCEPTION 'there is no calendar % in database %', timers._quoted(p_name), current_database()
            USING ERRCODE = 'P0002',
                  HINT = format('Make it with SELECT timers.save_calendar(%s, ''mon-fri'');', timers._quoted(p_name));
    END IF;
    RETURN v_name;
END
$$;

-- A day outside the calendar's known range is an error, never a guess.
CREATE OR REPLACE FUNCTION timers._calendar_known(p_name text, p_day date) RETURNS void
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    c timers.calendars;
BEGIN
    SELECT * INTO c FROM timers.calendars WHERE lower(name) = lower(p_name) COLLATE "default";
    IF (c.valid_from IS NOT NULL AND p_day < c.valid_from)
       OR (c.valid_until IS NOT NULL AND p_day > c.valid_until) THEN
        RAISE EXCEPTION 'calendar ''%'' is known from % until %, not on %', c.name,
            coalesce(c.valid_from::text, 'the start'), coalesce(c.valid_until::text, 'the end'), p_day
            USING ERRCODE = '22023',
                  HINT = 'Import a newer range (pgtimers calendar import) or widen it with timers.save_calendar(name, week, valid_from, valid_until).';
    END IF;
END
$$;

-- Raised by a run (timers._execute) that follows calendar p_calendar when the calendar is
-- gone or does not know the day of p_due_at in zone p_zone: the run fails with this
-- message instead of guessing. p_keyed: the run is a keyed timer's (the hint differs).
CREATE OR REPLACE FUNCTION timers._calendar_ready(
    p_calendar text, p_due_at timestamptz, p_zone text, p_keyed boolean)
    RETURNS void
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM timers.calendars WHERE lower(name) = lower(p_calendar) COLLATE "default") THEN
        RAISE EXCEPTION 'calendar ''%'' does not exist', p_calendar
            USING ERRCODE = 'P0002',
                  HINT = CASE WHEN p_keyed
                    THEN 'Make the calendar again with timers.save_calendar (its edit re-rolls the timer), or move the timer.'
                    ELSE 'Make the calendar again with timers.save_calendar, or give the timer another schedule.' END;
    END IF;
    PERFORM timers._calendar_known(p_calendar, (p_due_at AT TIME ZONE p_zone)::date);
END
$$;

-- Re-plan every armed timer that follows the calendar. A due time already owed
-- is re-checked from just before it, so an edit moves it rather than losing it.
-- Rows being run are skipped: the run plans its next time when it commits.
CREATE OR REPLACE FUNCTION timers._replan_calendar(p_name text) RETURNS integer
    LANGUAGE plpgsql
    AS $$
DECLARE
    t timers.timers;
    v_now timestamptz;
    v_count integer := 0;
BEGIN
    FOR t IN
        SELECT * FROM timers.timers
         WHERE spec->>'kind' = 'trading' AND lower(spec->>'calendar') = lower(p_name)
           AND enabled AND NOT expired
         FOR UPDATE SKIP LOCKED
    LOOP
        v_now := timers._now(t.test_clock);
        UPDATE timers.timers
           SET next_due_at = timers._plan(t, CASE WHEN t.next_due_at <= v_now
                                                  THEN t.next_due_at - interval '1 microsecond'
                                                  ELSE v_now END)
         WHERE id = t.id;
        v_count := v_count + 1;
    END LOOP;
    IF v_count > 0 THEN
        PERFORM timers._notify('calendar', p_name);
    END IF;
    RETURN v_count;
END
$$;

-- A readable summary of a calendar.
CREATE OR REPLACE FUNCTION timers._calendar_json(p_name text) RETURNS jsonb
    LANGUAGE sql STABLE
    AS $$
        SELECT jsonb_build_object(
            'name', c.name,
            'valid_from', c.valid_from,
            'valid_until', c.valid_until,
            'weeks', coalesce((SELECT jsonb_agg(jsonb_build_object(
                        'from_day', CASE WHEN w.from_day = '-infinity' THEN NULL ELSE w.from_day END,
                        'week', timers._week_text(w.days)) ORDER BY w.from_day)
                    FROM timers.calendar_weeks w WHERE w.calendar = c.name), '[]'),
            'holidays', (SELECT count(*) FROM timers.calendar_days d WHERE d.calendar = c.name AND NOT d.trading),
            'trading_days', (SELECT count(*) FROM timers.calendar_days d WHERE d.calendar = c.name AND d.trading),
            'timers', (SELECT count(*) FROM timers.timers t
                        WHERE t.spec->>'kind' = 'trading' AND lower(t.spec->>'calendar') = lower(c.name)))
          FROM timers.calendars c WHERE lower(c.name) = lower(p_name) COLLATE "default"
    $$;

-- After an edit of calendar p_name: plan its timers again, re-roll its keyed timers, and
-- audit.
CREATE OR REPLACE FUNCTION timers._calendar_changed(p_actor name, p_action text, p_name text, p_detail jsonb)
    RETURNS void
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_keyed integer;
BEGIN
    UPDATE timers.calendars SET updated_at = now() WHERE lower(name) = lower(p_name) COLLATE "default";
    PERFORM timers._replan_calendar(p_name);
    v_keyed := timers._keyed_reroll(p_actor, p_name);
    PERFORM timers._audit(p_actor, p_action, p_name,
        p_detail || CASE WHEN v_keyed > 0 THEN jsonb_build_object('keyed_rerolled', v_keyed) ELSE '{}' END);
END
$$;

-- ---------------------------------------------------------------- definer bodies
CREATE OR REPLACE FUNCTION timers._save_calendar(p_actor name, p_name text, p_week text,
                                                 p_valid_from date, p_valid_until date)
    RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_mask smallint;
    v_name text;
    v_created boolean;
BEGIN
    PERFORM timers._take_ticket(p_actor, 'save a calendar');
    v_mask := timers._week_mask(p_week);
    PERFORM timers._check_calendar_name(p_name);
    IF p_valid_from IS NOT NULL AND p_valid_until IS NOT NULL AND p_valid_until < p_valid_from THEN
        RAISE EXCEPTION 'valid_until % is before valid_from %', p_valid_until, p_valid_from USING ERRCODE = '22023';
    END IF;
    SELECT name INTO v_name FROM timers.calendars WHERE lower(name) = lower(p_name) COLLATE "default" FOR UPDATE;
    v_created := v_name IS NULL;
    IF v_created THEN
        INSERT INTO timers.calendars (name, valid_from, valid_until)
        VALUES (p_name, p_valid_from, p_valid_until) RETURNING name INTO v_name;
    ELSE
        UPDATE timers.calendars SET valid_from = p_valid_from, valid_until = p_valid_until
         WHERE name = v_name;
    END IF;
    -- The base era, in force before any dated one.
    INSERT INTO timers.calendar_weeks (calendar, from_day, days) VALUES (v_name, '-infinity', v_mask)
    ON CONFLICT (calendar, from_day) DO UPDATE SET days = EXCLUDED.days;
    PERFORM timers._calendar_changed(p_actor, 'save_calendar', v_name, jsonb_build_object(
        'created', v_created, 'week', timers._week_text(v_mask),
        'valid_from', p_valid_from, 'valid_until', p_valid_until));
    RETURN timers._calendar_json(v_name);
END
$$;

-- The body of timers.set_calendar_week (p_actor proven by its ticket).
CREATE OR REPLACE FUNCTION timers._set_calendar_week(p_actor name, p_name text, p_from_day date, p_week text)
    RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_name text;
    v_mask smallint;
BEGIN
    PERFORM timers._take_ticket(p_actor, 'change a calendar');
    v_name := timers._calendar(p_name);
    v_mask := timers._week_mask(p_week);
    IF p_from_day IS NULL THEN
        RAISE EXCEPTION 'from_day is NULL: give the first day of the new week, like ''2026-07-17''' USING ERRCODE = '22004';
    END IF;
    INSERT INTO timers.calendar_weeks (calendar, from_day, days) VALUES (v_name, p_from_day, v_mask)
    ON CONFLICT (calendar, from_day) DO UPDATE SET days = EXCLUDED.days;
    PERFORM timers._calendar_changed(p_actor, 'set_calendar_week', v_name,
        jsonb_build_object('from_day', p_from_day, 'week', timers._week_text(v_mask)));
    RETURN timers._calendar_json(v_name);
END
$$;

-- The body of timers.add_holiday and timers.add_trading_day.
CREATE OR REPLACE FUNCTION timers._set_calendar_day(p_actor name, p_name text, p_day date,
                                                    p_trading boolean, p_note text)
    RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_name text;
BEGIN
    PERFORM timers._take_ticket(p_actor, 'change a calendar');
    v_name := timers._calendar(p_name);
    IF p_day IS NULL OR NOT isfinite(p_day) THEN
        RAISE EXCEPTION 'day is %: give a date like ''2027-01-04''', coalesce(p_day::text, 'NULL') USING ERRCODE = '22004';
    END IF;
    INSERT INTO timers.calendar_days (calendar, day, trading, note)
    VALUES (v_name, p_day, p_trading, coalesce(p_note, ''))
    ON CONFLICT (calendar, day) DO UPDATE SET trading = EXCLUDED.trading, note = EXCLUDED.note;
    PERFORM timers._calendar_changed(p_actor, CASE WHEN p_trading THEN 'add_trading_day' ELSE 'add_holiday' END,
        v_name, jsonb_build_object('day', p_day, 'note', coalesce(p_note, '')));
    RETURN timers._calendar_json(v_name);
END
$$;

-- The body of timers.remove_day.
CREATE OR REPLACE FUNCTION timers._remove_day(p_actor name, p_name text, p_day date) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_name text;
BEGIN
    PERFORM timers._take_ticket(p_actor, 'change a calendar');
    v_name := timers._calendar(p_name);
    DELETE FROM timers.calendar_days WHERE calendar = v_name AND day = p_day;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'calendar ''%'' has no holiday or extra trading day on %', v_name, p_day
            USING ERRCODE = 'P0002';
    END IF;
    PERFORM timers._calendar_changed(p_actor, 'remove_day', v_name, jsonb_build_object('day', p_day));
    RETURN timers._calendar_json(v_name);
END
$$;

-- The body of timers.drop_calendar: its timers stay, and fail until it is back.
CREATE OR REPLACE FUNCTION timers._drop_calendar(p_actor name, p_name text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_name text;
    v_timers bigint;
BEGIN
    PERFORM timers._take_ticket(p_actor, 'drop a calendar');
    v_name := timers._calendar(p_name);
    DELETE FROM timers.calendars WHERE name = v_name;
    -- Its timers are now due every day and each run fails until the calendar is back.
    v_timers := timers._replan_calendar(v_name);
    PERFORM timers._audit(p_actor, 'drop_calendar', v_name, jsonb_build_object('timers', v_timers));
    RETURN jsonb_build_object('dropped', true, 'timers', v_timers);
END
$$;

-- ---------------------------------------------------------------- public API
CREATE OR REPLACE FUNCTION timers.save_calendar(name text, week text DEFAULT 'mon-fri',
                                                valid_from date DEFAULT NULL, valid_until date DEFAULT NULL)
    RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM timers._require_admin('save a calendar');
    RETURN timers._save_calendar(current_user, save_calendar.name, save_calendar.week,
                                 save_calendar.valid_from, save_calendar.valid_until);
END
$$;

COMMENT ON FUNCTION timers.save_calendar(text, text, date, date) IS
    'Create a trading calendar, or set its base week and known range (valid_from .. valid_until; NULL = open). Needs pgtimers_admin.';

CREATE OR REPLACE FUNCTION timers.set_calendar_week(name text, from_day date, week text) RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM timers._require_admin('change a calendar');
    RETURN timers._set_calendar_week(current_user, set_calendar_week.name, set_calendar_week.from_day,
                                     set_calendar_week.week);
END
$$;

COMMENT ON FUNCTION timers.set_calendar_week(text, date, text) IS
    'From from_day on, the calendar trades on these days (an era), until a later era starts. Needs pgtimers_admin.';

CREATE OR REPLACE FUNCTION timers.add_holiday(name text, day date, note text DEFAULT '') RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM timers._require_admin('change a calendar');
    RETURN timers._set_calendar_day(current_user, add_holiday.name, add_holiday.day, false, add_holiday.note);
END
$$;

COMMENT ON FUNCTION timers.add_holiday(text, date, text) IS
    'A day the calendar does not trade; its timers are re-planned at once. Needs pgtimers_admin.';

CREATE OR REPLACE FUNCTION timers.add_trading_day(name text, day date, note text DEFAULT '') RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM timers._require_admin('change a calendar');
    RETURN timers._set_calendar_day(current_user, add_trading_day.name, add_trading_day.day, true,
                                    add_trading_day.note);
END
$$;

COMMENT ON FUNCTION timers.add_trading_day(text, date, text) IS
    'An extra trading day, e.g. a make-up Saturday; its timers are re-planned at once. Needs pgtimers_admin.';

CREATE OR REPLACE FUNCTION timers.remove_day(name text, day date) RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM timers._require_admin('change a calendar');
    RETURN timers._remove_day(current_user, remove_day.name, remove_day.day);
END
$$;

COMMENT ON FUNCTION timers.remove_day(text, date) IS
    'Remove a holiday or extra trading day; the week decides that day again. Needs pgtimers_admin.';

CREATE OR REPLACE FUNCTION timers.drop_calendar(name text) RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM timers._require_admin('drop a calendar');
    RETURN timers._drop_calendar(current_user, drop_calendar.name);
END
$$;

COMMENT ON FUNCTION timers.drop_calendar(text) IS
    'Drop a calendar. Its timers become due every day and each run fails until the calendar is made again. Needs pgtimers_admin.';

CREATE OR REPLACE FUNCTION timers.is_trading_day(name text, day date) RETURNS boolean
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_name text := timers._calendar(is_trading_day.name);
BEGIN
    PERFORM timers._calendar_known(v_name, is_trading_day.day);
    RETURN timers._trading_day(v_name, is_trading_day.day);
END
$$;

COMMENT ON FUNCTION timers.is_trading_day(text, date) IS
    'Whether the calendar trades on the day; an error outside the calendar''s known range.';

CREATE OR REPLACE FUNCTION timers.trading_days(name text, from_day date, to_day date) RETURNS SETOF date
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_name text := timers._calendar(trading_days.name);
BEGIN
    IF from_day IS NULL OR to_day IS NULL OR to_day < from_day OR to_day - from_day > 366 * 100 THEN
        RAISE EXCEPTION 'bad range % .. %: give from_day <= to_day, at most 100 years apart', from_day, to_day
            USING ERRCODE = '22023';
    END IF;
    PERFORM timers._calendar_known(v_name, from_day);
    PERFORM timers._calendar_known(v_name, to_day);
    RETURN QUERY
        SELECT d::date FROM generate_series(from_day, to_day, interval '1 day') AS g(d)
         WHERE timers._trading_day(v_name, d::date);
END
$$;

COMMENT ON FUNCTION timers.trading_days(text, date, date) IS
    'The trading days of a calendar from from_day to to_day, inclusive.';

-- The last open day of a calendar on or before p_day (NULL when none within 400 days).
CREATE OR REPLACE FUNCTION timers._prev_trading_day(p_calendar text, p_day date) RETURNS date
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    v_day date := p_day;
BEGIN
    FOR i IN 1..400 LOOP
        IF timers._trading_day(p_calendar, v_day) THEN
            RETURN v_day;
        END IF;
        v_day := v_day - 1;
    END LOOP;
    RETURN NULL;
END
$$;

-- ---------------------------------------------------------------------------
-- Rights
-- ---------------------------------------------------------------------------
REVOKE ALL ON FUNCTION
    timers._trading_day(text,date),
    timers._next_trading_day(text,date),
    timers._nth_trading_day(text,date,integer),
    timers._parse_week(text),
    timers._week_mask(text),
    timers._week_text(smallint),
    timers._check_calendar_name(text),
    timers._calendar(text),
    timers._calendar_known(text,date),
    timers._calendar_ready(text,timestamp with time zone,text,boolean),
    timers._replan_calendar(text),
    timers._calendar_json(text),
    timers._calendar_changed(name,text,text,jsonb),
    timers._save_calendar(name,text,text,date,date),
    timers._set_calendar_week(name,text,date,text),
    timers._set_calendar_day(name,text,date,boolean,text),
    timers._remove_day(name,text,date),
    timers._drop_calendar(name,text),
    timers.save_calendar(text,text,date,date),
    timers.set_calendar_week(text,date,text),
    timers.add_holiday(text,date,text),
    timers.add_trading_day(text,date,text),
    timers.remove_day(text,date),
    timers.drop_calendar(text),
    timers.is_trading_day(text,date),
    timers.trading_days(text,date,date),
    timers._prev_trading_day(text,date)
    FROM PUBLIC, pgtimers_reader, pgtimers_admin, pgtimers_runner;
GRANT EXECUTE ON FUNCTION
    timers._trading_day(text,date),
    timers._next_trading_day(text,date),
    timers._nth_trading_day(text,date,integer)
    TO pgtimers_reader, pgtimers_runner;
GRANT EXECUTE ON FUNCTION
    timers._parse_week(text),
    timers._week_mask(text),
    timers._week_text(smallint),
    timers._check_calendar_name(text),
    timers._calendar(text),
    timers._calendar_known(text,date),
    timers._calendar_ready(text,timestamp with time zone,text,boolean),
    timers._replan_calendar(text),
    timers._calendar_json(text),
    timers._calendar_changed(name,text,text,jsonb),
    timers.save_calendar(text,text,date,date),
    timers.set_calendar_week(text,date,text),
    timers.add_holiday(text,date,text),
    timers.add_trading_day(text,date,text),
    timers.remove_day(text,date),
    timers.drop_calendar(text),
    timers.is_trading_day(text,date),
    timers.trading_days(text,date,date)
    TO PUBLIC;
GRANT EXECUTE ON FUNCTION
    timers._save_calendar(name,text,text,date,date),
    timers._set_calendar_week(name,text,date,text),
    timers._set_calendar_day(name,text,date,boolean,text),
    timers._remove_day(name,text,date),
    timers._drop_calendar(name,text)
    TO pgtimers_admin;
