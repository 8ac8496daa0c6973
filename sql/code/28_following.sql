-- pgtimers code: timers that wait for other timers (timers.save(..., schedule => 'after',
-- after => ARRAY[...]); docs/running.md, "Timers that wait for other timers"). A follower
-- has no due times of its own: each due time its upstream timers record is a row of
-- timers.follow_dues, written in the upstream's own transaction (timers._tell_followers,
-- from timers._attempt_recorded and timers._record_skips), ready once every upstream
-- committed successfully for it, or at once as skipped when one failed or skipped it. A
-- runner claims a ready row with its follower's row and runs it, marking the row done in
-- the run's transaction: once per follower and due time. That claim, run and record are
-- the fire path's, in 10_fire.sql (timers._claim_follow, _run_follow; _due_recorded records it).
--
-- Repeatable: applied whole on every install and upgrade, after the versioned
-- migrations (docs/design.md). Each object here is defined in this file only.

-- Check and write what timer f (just written by timers._save_one, its row locked)
-- follows: the timers named in p_after, by id (a rename keeps the links). A timer with
-- schedule 'after' follows at least one; a timer with a schedule of its own follows
-- none. An unknown name is P0002; a cycle (a timer following itself, or through others)
-- is 22023 naming its timers. When the list changes, the due times the follower was
-- still waiting for are dropped.
CREATE OR REPLACE FUNCTION timers._set_follows(f timers.timers, p_after text[]) RETURNS void
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_after text[] := coalesce(p_after, '{}');
    v_ids bigint[] := '{}';
    v_old bigint[];
    v_name text;
    v_id bigint;
    v_cycle text;
BEGIN
    IF f.spec->>'kind' = 'after' AND cardinality(v_after) = 0 THEN
        RAISE EXCEPTION 'timer % has schedule ''after'' but follows no timer: name the timers it waits for with after => ARRAY[''...'']',
            timers._quoted(f.name) USING ERRCODE = '22023';
    END IF;
    IF f.spec->>'kind' <> 'after' AND cardinality(v_after) > 0 THEN
        RAISE EXCEPTION 'timer % follows % but has schedule %: a timer that waits for others has schedule ''after''',
            timers._quoted(f.name), array_to_string(v_after, ', '), timers._quoted(f.schedule)
            USING ERRCODE = '22023',
                  HINT = 'Save it with schedule => ''after'': it runs once for each due time of the timers it follows.';
    END IF;
    IF f.spec->>'kind' = 'after' AND f.autonomous THEN
        RAISE EXCEPTION 'timer % cannot both wait for other timers and be autonomous', timers._quoted(f.name)
            USING ERRCODE = '0A000';
    END IF;
    IF cardinality(v_after) = 0 AND NOT EXISTS (SELECT 1 FROM timers.follows w WHERE w.follower_id = f.id) THEN
        RETURN;
    END IF;
    PERFORM 1 FROM timers.locks l WHERE l.name = 'follows' FOR UPDATE;
    FOREACH v_name IN ARRAY v_after LOOP
        IF v_name IS NULL THEN
            RAISE EXCEPTION 'after must name timers, not NULL' USING ERRCODE = '22004';
        END IF;
        SELECT t.id INTO v_id FROM timers.timers t WHERE lower(t.name) = lower(v_name) COLLATE "default";
        IF NOT FOUND THEN
            RAISE EXCEPTION 'timer % follows timer %, which does not exist', timers._quoted(f.name),
                timers._quoted(v_name) USING ERRCODE = 'P0002',
                HINT = 'Save the timers it follows first.';
        END IF;
        IF NOT v_id = ANY (v_ids) THEN
            v_ids := v_ids || v_id;
        END IF;
    END LOOP;
    v_cycle := timers._follow_cycle(f.id, v_ids);
    IF v_cycle IS NOT NULL THEN
        RAISE EXCEPTION 'timer % cannot follow %: that makes a cycle, %', timers._quoted(f.name),
            array_to_string(v_after, ', '), v_cycle
            USING ERRCODE = '22023', HINT = 'A timer follows only timers that do not wait for it.';
    END IF;
    SELECT coalesce(array_agg(w.upstream_id ORDER BY w.position), '{}') INTO v_old
      FROM timers.follows w WHERE w.follower_id = f.id;
    IF v_old = v_ids THEN
        RETURN;
    END IF;
    DELETE FROM timers.follows w WHERE w.follower_id = f.id;
    INSERT INTO timers.follows (follower_id, upstream_id, position)
    SELECT f.id, u, n FROM unnest(v_ids) WITH ORDINALITY AS x(u, n);
    DELETE FROM timers.follow_dues d WHERE d.follower_id = f.id AND d.state = 'waiting';
END
$$;

-- The cycle that timer p_id following p_ids would make, as 'a follows b follows ... a';
-- NULL when there is none. Walks up from p_ids along what is committed (the caller holds
-- the 'follows' lock).
CREATE OR REPLACE FUNCTION timers._follow_cycle(p_id bigint, p_ids bigint[]) RETURNS text
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    v_path bigint[];
BEGIN
    WITH RECURSIVE up(id, path) AS (
        SELECT u, ARRAY[p_id, u] FROM unnest(p_ids) AS u
        UNION ALL
        SELECT w.upstream_id, up.path || w.upstream_id
          FROM up JOIN timers.follows w ON w.follower_id = up.id
         WHERE up.id <> p_id AND NOT w.upstream_id = ANY (up.path[2:])
    )
    SELECT up.path INTO v_path FROM up WHERE up.id = p_id ORDER BY cardinality(up.path) LIMIT 1;
    IF v_path IS NULL THEN
        RETURN NULL;
    END IF;
    RETURN (SELECT string_agg(coalesce(t.name, x.id::text), ' follows ' ORDER BY x.n)
              FROM unnest(v_path) WITH ORDINALITY AS x(id, n) LEFT JOIN timers.timers t ON t.id = x.id);
END
$$;

-- The timers that follow timer t, when deleting it: refused (2BP01, naming them) unless
-- p_cascade, which takes t out of their lists (and drops the due times they waited for
-- it) and returns the names of those left following nothing, which the caller deletes
-- too. Empty when none follows it.
CREATE OR REPLACE FUNCTION timers._unfollow(t timers.timers, p_cascade boolean) RETURNS text[]
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_names text;
    v_orphans text[];
BEGIN
    IF NOT EXISTS (SELECT 1 FROM timers.follows w WHERE w.upstream_id = t.id) THEN
        RETURN '{}';
    END IF;
    IF NOT p_cascade THEN
        SELECT string_agg(timers._quoted(f.name), ', ' ORDER BY f.name) INTO v_names
          FROM timers.follows w JOIN timers.timers f ON f.id = w.follower_id WHERE w.upstream_id = t.id;
        RAISE EXCEPTION 'timer % is followed by %: deleting it would leave them waiting', timers._quoted(t.name), v_names
            USING ERRCODE = '2BP01',
                  HINT = format('timers.delete(%L, cascade => true) takes it out of what they follow (and deletes a timer that follows nothing else); or save them with after => ARRAY[...] without it first.', t.name);
    END IF;
    PERFORM 1 FROM timers.locks l WHERE l.name = 'follows' FOR UPDATE;
    DELETE FROM timers.follows w WHERE w.upstream_id = t.id;
    DELETE FROM timers.follow_dues d WHERE d.state = 'waiting' AND t.id = ANY (d.waiting_for);
    SELECT coalesce(array_agg(f.name ORDER BY f.name), '{}') INTO v_orphans
      FROM timers.timers f
     WHERE f.spec->>'kind' = 'after' AND f.id <> t.id
       AND NOT EXISTS (SELECT 1 FROM timers.follows w WHERE w.follower_id = f.id);
    RETURN v_orphans;
END
$$;

-- Tell the followers of timer t (its row locked by the caller: its run's transaction)
-- how its due time p_due ended: p_ok, it committed successfully (the follower's row of
-- that due time waits for one upstream less, and is ready when none is left); else it
-- failed for good or was skipped, which p_reason says, naming t and the due time (the
-- follower's due time is skipped with it). An attempt that failed with a retry to come
-- says nothing: the followers wait for the retry. A follower's row still waiting for t at
-- an earlier due time is skipped (t has gone past it without a run for it), and so is a
-- new row waiting for an upstream that has gone past the due time or is off. Rows done that
-- every upstream has gone past are dropped. Runners are told when a row is ready.
CREATE OR REPLACE FUNCTION timers._tell_followers(
    t timers.timers, p_due timestamptz, p_ok boolean, p_reason text) RETURNS void
    LANGUAGE plpgsql
    AS $$
DECLARE
    f record;
    v_wait bigint[];
    v_stale text;
    v_ready boolean := false;
    v_n integer;
BEGIN
    FOR f IN SELECT w.follower_id AS id FROM timers.follows w WHERE w.upstream_id = t.id ORDER BY w.follower_id LOOP
        IF p_ok THEN
            SELECT coalesce(array_agg(w.upstream_id ORDER BY w.position), '{}') INTO v_wait
              FROM timers.follows w WHERE w.follower_id = f.id AND w.upstream_id <> t.id;
            -- an upstream that has gone past p_due (and has no retry of it to come), or is
            -- off (the due times would wait for it while it is)
            SELECT format('%s did not run at due time %s%s', u.name, timers._iso(p_due),
                          CASE WHEN NOT u.enabled THEN ' (it is off)' ELSE '' END) INTO v_stale
              FROM timers.timers u
             WHERE u.id = ANY (v_wait)
               AND (NOT u.enabled OR u.last_due_at >= p_due AND u.retry_due_at IS DISTINCT FROM p_due)
             ORDER BY u.name LIMIT 1;
            INSERT INTO timers.follow_dues AS d (follower_id, due_at, waiting_for, skip_reason, state, ready_at)
            VALUES (f.id, p_due, v_wait, v_stale,
                    CASE WHEN v_stale IS NOT NULL OR v_wait = '{}' THEN 'ready' ELSE 'waiting' END,
                    CASE WHEN v_stale IS NOT NULL OR v_wait = '{}' THEN clock_timestamp() END)
            ON CONFLICT (follower_id, due_at) DO UPDATE
               SET waiting_for = array_remove(d.waiting_for, t.id),
                   state = CASE WHEN array_remove(d.waiting_for, t.id) = '{}' THEN 'ready' ELSE 'waiting' END,
                   ready_at = CASE WHEN array_remove(d.waiting_for, t.id) = '{}' THEN clock_timestamp() END
             WHERE d.state = 'waiting';
        ELSE
            INSERT INTO timers.follow_dues AS d (follower_id, due_at, waiting_for, skip_reason, state, ready_at)
            VALUES (f.id, p_due, '{}', p_reason, 'ready', clock_timestamp())
            ON CONFLICT (follower_id, due_at) DO UPDATE
               SET skip_reason = EXCLUDED.skip_reason, state = 'ready', ready_at = EXCLUDED.ready_at
             WHERE d.state = 'waiting';
        END IF;
        UPDATE timers.follow_dues d
           SET skip_reason = format('%s did not run at due time %s', t.name, timers._iso(d.due_at)),
               state = 'ready', ready_at = clock_timestamp()
         WHERE d.follower_id = f.id AND d.state = 'waiting' AND d.due_at < p_due AND t.id = ANY (d.waiting_for);
        DELETE FROM timers.follow_dues d
         WHERE d.follower_id = f.id AND d.state = 'done' AND d.due_at < p_due
           AND NOT EXISTS (SELECT 1 FROM timers.follows w JOIN timers.timers u ON u.id = w.upstream_id
                            WHERE w.follower_id = f.id AND u.id <> t.id
                              AND (u.last_due_at IS NULL OR u.last_due_at <= d.due_at));
        SELECT count(*) INTO v_n FROM timers.follow_dues d WHERE d.follower_id = f.id AND d.state = 'ready';
        v_ready := v_ready OR v_n > 0;
    END LOOP;
    IF v_ready THEN
        PERFORM timers._notify('follow', t.name);
    END IF;
END
$$;

-- The skipped due times p_dues (from p_first to p_last) of timer t told to its
-- followers (timers._record_skips): each follower's due time is skipped too.
CREATE OR REPLACE FUNCTION timers._tell_followers_skipped(
    t timers.timers, p_dues timestamptz[], p_first timestamptz, p_last timestamptz, p_reason text)
    RETURNS void
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_due timestamptz;
BEGIN
    FOREACH v_due IN ARRAY coalesce(p_dues, '{}') LOOP
        PERFORM timers._tell_followers(t, v_due, false,
            format('%s skipped due time %s: %s', t.name, timers._iso(v_due), p_reason));
    END LOOP;
    -- the due times between that the list leaves out (many skipped at once)
    UPDATE timers.follow_dues d
       SET skip_reason = format('%s skipped due time %s: %s', t.name, timers._iso(d.due_at), p_reason),
           state = 'ready', ready_at = clock_timestamp()
     WHERE d.state = 'waiting' AND d.due_at BETWEEN p_first AND p_last AND t.id = ANY (d.waiting_for)
       AND d.follower_id IN (SELECT w.follower_id FROM timers.follows w WHERE w.upstream_id = t.id);
END
$$;

-- The names of the timers timer p_id follows, in the order given; NULL when none (the
-- 'after' of timers.export and timers.apply).
CREATE OR REPLACE FUNCTION timers._follow_names(p_id bigint) RETURNS text[]
    LANGUAGE sql STABLE
    AS $$
        SELECT array_agg(t.name ORDER BY w.position)
          FROM timers.follows w JOIN timers.timers t ON t.id = w.upstream_id
         WHERE w.follower_id = p_id
    $$;

-- The timers of a declared set (timers.apply's spec->'timer') in its order, except that a
-- timer comes after those of the set it follows (its after names them). What is left of a
-- cycle comes last, as given: the save refuses it.
CREATE OR REPLACE FUNCTION timers._follow_order(p_timers jsonb) RETURNS SETOF jsonb
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    v_left jsonb[] := ARRAY(SELECT e FROM jsonb_array_elements(p_timers) e);
    v_next jsonb[];
    v_names text[];
    e jsonb;
BEGIN
    LOOP
        v_names := ARRAY(SELECT lower(x->>'name') FROM unnest(v_left) x WHERE jsonb_typeof(x) = 'object');
        v_next := '{}';
        FOREACH e IN ARRAY v_left LOOP
            IF jsonb_typeof(e) = 'object' AND jsonb_typeof(e->'after') = 'array' AND EXISTS (
                   SELECT 1 FROM jsonb_array_elements(e->'after') a
                    WHERE jsonb_typeof(a) = 'string' AND lower(a #>> '{}') = ANY (v_names)) THEN
                v_next := v_next || e;
            ELSE
                RETURN NEXT e;
            END IF;
        END LOOP;
        IF cardinality(v_next) = 0 THEN
            RETURN;
        END IF;
        IF cardinality(v_next) = cardinality(v_left) THEN
            RETURN QUERY SELECT x FROM unnest(v_next) x;
            RETURN;
        END IF;
        v_left := v_next;
    END LOOP;
END
$$;

-- How many timers deep timer p_id follows others: 0 for one that follows none, else one
-- more than the deepest it follows (at most 1000).
CREATE OR REPLACE FUNCTION timers._follow_depth(p_id bigint) RETURNS integer
    LANGUAGE sql STABLE
    AS $$
        WITH RECURSIVE up(id, d) AS (
            SELECT p_id, 0
            UNION ALL
            SELECT w.upstream_id, up.d + 1 FROM up JOIN timers.follows w ON w.follower_id = up.id
             WHERE up.d < 1000
        )
        SELECT max(up.d)::integer FROM up
    $$;

-- What timer p_name follows and what follows it, each with its last result (timers.status):
-- for the console's timer page (GET /api/timers/NAME/history). [{name, relation: "follows"
-- | "followed_by", last_ok, last_due_ms, last_run_ms, last_error}]. Readers may read the
-- ids and names of timers.timers for it.
CREATE OR REPLACE FUNCTION timers._follow_links(p_name text) RETURNS jsonb
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
        WITH me AS (
            SELECT x.id FROM timers.timers x WHERE lower(x.name) = lower(p_name) COLLATE "default"
        ), l AS (
            SELECT w.upstream_id AS id, 'follows' AS relation, w.position
              FROM timers.follows w, me WHERE w.follower_id = me.id
            UNION ALL
            SELECT w.follower_id, 'followed_by', 0 FROM timers.follows w, me WHERE w.upstream_id = me.id
        )
        SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'name', t.name, 'relation', l.relation, 'last_ok', s.last_ok,
                   'last_due_ms', s.last_due_ms, 'last_run_ms', s.last_run_ms,
                   'last_error', s.last_error) ORDER BY l.relation DESC, l.position, t.name), '[]')
          FROM l JOIN timers.timers t ON t.id = l.id JOIN timers.status s ON s.name = t.name
    $$;

-- ---------------------------------------------------------------------------
-- Rights
-- ---------------------------------------------------------------------------
REVOKE ALL ON FUNCTION
    timers._set_follows(timers.timers,text[]),
    timers._follow_cycle(bigint,bigint[]),
    timers._unfollow(timers.timers,boolean),
    timers._tell_followers(timers.timers,timestamp with time zone,boolean,text),
    timers._tell_followers_skipped(timers.timers,timestamp with time zone[],timestamp with time zone,timestamp with time zone,text),
    timers._follow_links(text),
    timers._follow_names(bigint),
    timers._follow_order(jsonb),
    timers._follow_depth(bigint)
    FROM PUBLIC, pgtimers_reader, pgtimers_admin, pgtimers_runner;
GRANT EXECUTE ON FUNCTION
    timers._tell_followers(timers.timers,timestamp with time zone,boolean,text),
    timers._tell_followers_skipped(timers.timers,timestamp with time zone[],timestamp with time zone,timestamp with time zone,text)
    TO pgtimers_runner;
GRANT EXECUTE ON FUNCTION
    timers._follow_links(text),
    timers._follow_names(bigint)
    TO pgtimers_reader, pgtimers_runner;
