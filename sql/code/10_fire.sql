-- pgtimers code: a fire, top-down: the runner's batch (timers._fire_many), one fire
-- (timers._fire: the claim, then the run of what it claimed), the claims, the kinds of
-- run (a scheduled due time, a retry, a run-now request, a backfill's due time, a keyed
-- timer), the one routine that runs a timer's SQL (timers._execute, whose outcome is a
-- timers.run_outcome), and the records of an attempt. Each routine calls only those
-- below it, and the due-time arithmetic of 10_due_times.sql.
--
-- A call whose value is not needed is assigned to v_nil (`v_nil := f(...)`) on the path a
-- fire takes, not PERFORMed: PL/pgSQL evaluates a simple expression without starting the
-- executor, which PERFORM does for each call (a few microseconds, many times a fire).
--
-- Repeatable: applied whole on every install and upgrade, after the versioned
-- migrations (docs/design.md). Each object here is defined in this file only.

-- Fire one after another in one round trip, each in its own transaction (COMMIT after
-- each fire, as the runner's own COMMIT would): until nothing is left to fire, p_max
-- fires, or p_budget_ms have gone by, or a fire needs the runner (a timer with a time
-- limit of its own: "claim"; a run whose machinery raised: "failed"). result: {fired,
-- results (the fires that failed, skipped, paused or need the runner, in order), more
-- (whether the last look found something)}. The other arguments are timers._fire's, and
-- the runner's own session settings, which each fire's transaction puts back before
-- its COMMIT (timers._session_reset): the next fire starts from the runner's session,
-- whatever this one's SQL left. p_late: the runner's word on a while the server refused
-- its work, for the reasons of due times found late (timers._late_reason). A procedure
-- that COMMITs can pin no search_path: its body names everything with its schema. The
-- time limit is the CALL's statement_timeout, which runs from the CALL's start:
-- p_budget_ms keeps a run's own limit within that of its start.
CREATE OR REPLACE PROCEDURE timers._fire_many(
    p_runner pg_catalog.text, p_skip pg_catalog.int8[], p_skip_keyed pg_catalog.int8[],
    p_keyed_only pg_catalog.bool, p_timeout_ms pg_catalog.int8, p_max pg_catalog.int4,
    p_budget_ms pg_catalog.int4, p_mark pg_catalog.text DEFAULT NULL,
    p_session_names pg_catalog.text[] DEFAULT NULL, p_session_values pg_catalog.text[] DEFAULT NULL,
    p_late pg_catalog.jsonb DEFAULT NULL, INOUT result pg_catalog.jsonb DEFAULT NULL)
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_nil pg_catalog.text;  -- what a call whose value is not needed returns (not PERFORM: see the top)
    v_one pg_catalog.jsonb;
    v_fired pg_catalog.int4 := 0;
    v_kept pg_catalog.jsonb := '[]';
    v_until pg_catalog.timestamptz := pg_catalog.clock_timestamp()
        OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => p_budget_ms OPERATOR(pg_catalog./) 1000.0);
    -- keyed fires in a row: each found no run-now request, due timer or follower due time
    -- before it, and the next 15 do not ask again (a fire's claims of those kinds cost more
    -- than the keyed timer's own claim); the 16th asks, and so does a fire that finds no
    -- keyed timer, so what comes due meanwhile waits for 16 keyed fires at most
    v_keyed_run pg_catalog.int4 := 0;
    v_keyed_only pg_catalog.bool;
BEGIN
    -- autonomous runs that will never report back are recorded first (their own commit)
    IF EXISTS (SELECT FROM timers.autonomous_runs) THEN
        v_kept := timers._autonomous_sweep(p_runner);
        IF pg_catalog.jsonb_array_length(v_kept) OPERATOR(pg_catalog.>) 0 THEN
            COMMIT;
            v_fired := pg_catalog.jsonb_array_length(v_kept);
        END IF;
    END IF;
    LOOP
        IF p_late IS NOT NULL THEN
            v_nil := pg_catalog.set_config('pgtimers.late', p_late::pg_catalog.text, true);
        END IF;
        v_keyed_only := p_keyed_only OR v_keyed_run OPERATOR(pg_catalog.%) 16 OPERATOR(pg_catalog.<>) 0;
        v_one := timers._fire(p_runner, p_skip, p_skip_keyed, v_keyed_only, p_timeout_ms, p_mark);
        IF v_one IS NULL AND v_keyed_only AND NOT p_keyed_only THEN
            v_keyed_run := 0;  -- no keyed timer left: ask every kind before the batch ends
            CONTINUE;
        END IF;
        EXIT WHEN v_one IS NULL;
        v_keyed_run := CASE WHEN v_one OPERATOR(pg_catalog.->>) 'kind' OPERATOR(pg_catalog.=) 'keyed'
                            THEN v_keyed_run OPERATOR(pg_catalog.+) 1 ELSE 0 END;
        v_nil := timers._session_reset(p_session_names, p_session_values);
        COMMIT;
        v_fired := v_fired OPERATOR(pg_catalog.+) 1;
        IF timers._fire_kept(v_one) THEN
            v_kept := v_kept OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_array(v_one);
        END IF;
        EXIT WHEN timers._fire_stops(v_one) OR v_fired OPERATOR(pg_catalog.>=) p_max
               OR pg_catalog.clock_timestamp() OPERATOR(pg_catalog.>=) v_until;
    END LOOP;
    result := pg_catalog.jsonb_build_object('fired', v_fired, 'results', v_kept, 'more', v_one IS NOT NULL);
END
$$;

-- Whether a fire's result needs the runner before the next fire: a claim to run with
-- its own time limit, a failure of the run's machinery, a run that yielded (waited too
-- long for a lock: the next fire would claim it again; the runner holds it back), an
-- autonomous timer's attempt, committed as started, that the runner runs now
-- (timers._autonomous_start).
CREATE OR REPLACE FUNCTION timers._fire_stops(p_result jsonb) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    RETURN p_result ?| ARRAY['claim', 'failed', 'yielded', 'autonomous'];
END
$$;

-- Whether timers._fire_many hands a fire's result to the runner: it failed, skipped or
-- paused something, ran a timer the runner held back (timers._ran_after_yield), or the
-- runner must act on it (timers._fire_stops). A run that went well is only counted.
CREATE OR REPLACE FUNCTION timers._fire_kept(p_result jsonb) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    RETURN p_result->>'ok' = 'false' OR jsonb_array_length(coalesce(p_result->'skipped', '[]')) > 0
        OR p_result->>'paused' = 'true' OR p_result->>'gave_up' IS NOT NULL
        OR p_result ? 'ran_after_yield' OR timers._fire_stops(p_result) OR p_result = '{}';
END
$$;

-- One fire, the runner's whole round trip: claim the oldest run-now request, else
-- the due timer that fires first (timers._claim_due), else a follower's released due
-- time (timers._claim_follow, run as a timer's: timers._run_due), else (or only, with
-- p_keyed_only) the next keyed timer in tick order, else a backfill's next due time
-- (timers._claim_backfill), and run it, in the caller's
-- transaction. p_timeout_ms is the time limit the caller's statement runs under; a
-- timer whose own timeout differs is not run here but answered as a claim,
-- {"claim": "timer"|"request"|"backfill", "id", "due_at", "timeout_ms"}, which the
-- runner runs with its own limit (timers._run_due, _run_request or _run_backfill). A
-- run whose machinery raised answers {"failed": kind, "id" (a backfill: its timer's),
-- "sqlstate", "error"}. p_skip and p_skip_keyed: ids to leave alone for a while
-- (their run raised). NULL: nothing to do. Before it runs anything (or answers a claim)
-- it tells the runner what it claimed (timers._say_claimed, marked p_mark), so that a
-- run that ends the runner's session is known (timers._run_lost).
CREATE OR REPLACE FUNCTION timers._fire(
    p_runner text, p_skip bigint[], p_skip_keyed bigint[], p_keyed_only boolean, p_timeout_ms bigint,
    p_mark text DEFAULT NULL)
    RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_nil text;  -- what a call whose value is not needed returns (not PERFORM: see the top)
    v_kind text;
    v_id bigint;
    v_at timestamptz;  -- the due time (a timer) or the owed time (a keyed timer)
    v_timer bigint;  -- a backfill's timer
    c record;
    v_timeout interval;
    v_timeout_ms bigint;
    v_result jsonb;
    v_group text;
    v_full text[] := '{}';  -- run groups found full by this fire's claims
BEGIN
  -- a claim that finds its timer's run group full (PGT02, timers._group_claim) is rolled
  -- back with the block, and the next claim passes over that group's timers
  LOOP
    v_kind := NULL;
    v_timer := NULL;
    v_group := NULL;
    -- Claim and run in one block (a subtransaction): a row locked by the transaction
    -- around a subtransaction that then updates it gets a MultiXact for its xmax, which
    -- keeps its dead index entries from being marked dead, so that every later claim
    -- walks them again (0.4 ms a claim after a few thousand fires).
    BEGIN
        IF NOT p_keyed_only THEN
            SELECT q.id, t.timeout, t.run_group INTO v_id, v_timeout, v_group
              FROM timers.run_requests q LEFT JOIN timers.timers t ON t.id = q.timer_id
             WHERE q.finished_at IS NULL AND q.requested_at > now() - interval '5 minutes'
               -- an autonomous run of the timer under way: the request waits for it
               AND NOT EXISTS (SELECT 1 FROM timers.autonomous_runs o WHERE o.timer_id = q.timer_id)
               AND (t.run_group IS NULL OR t.run_group <> ALL (v_full))
             ORDER BY q.id
             LIMIT 1
               FOR UPDATE OF q SKIP LOCKED;
            v_kind := CASE WHEN FOUND THEN 'request' END;
            IF v_group IS NOT NULL AND v_kind IS NOT NULL THEN
                v_nil := timers._group_claim(v_group);
            END IF;
            IF v_kind IS NULL THEN
                c := timers._claim_due(p_skip, v_full);
                IF c.id IS NULL THEN
                    -- a follower's due time that its upstream timers have released
                    c := timers._claim_follow(p_skip, v_full);
                END IF;
                v_id := c.id;
                v_at := c.due_at;
                v_timeout := c.timeout;
                v_group := c.run_group;
                v_kind := CASE WHEN v_id IS NOT NULL THEN 'timer' END;
            END IF;
        END IF;
        IF v_kind IS NULL THEN
            SELECT k.id, k.owed_at INTO v_id, v_at FROM timers._keyed_claim(p_skip_keyed) k;
            v_kind := CASE WHEN FOUND THEN 'keyed' END;
        END IF;
        IF v_kind IS NULL AND NOT p_keyed_only THEN
            -- last: a backfill's next due time (never before what is due now)
            c := timers._claim_backfill(p_skip, v_full);
            v_id := c.id;
            v_timer := c.timer_id;
            v_timeout := c.timeout;
            v_group := c.run_group;
            v_kind := CASE WHEN v_id IS NOT NULL THEN 'backfill' END;
        END IF;
        IF v_kind IS NULL THEN
            RETURN NULL;
        END IF;
        v_nil := timers._say_claimed(p_mark, v_kind, v_id, v_at);
        IF v_kind <> 'keyed' THEN
            v_timeout_ms := timers._ms(coalesce(v_timeout, timers._run_timeout()));
            IF v_timeout_ms <> p_timeout_ms THEN
                RETURN jsonb_build_object('claim', v_kind, 'id', v_id, 'timeout_ms', v_timeout_ms,
                                          'due_at', v_at, 'timer_id', v_timer);
            END IF;
        END IF;
        IF v_kind = 'request' THEN
            v_result := timers._run_request(v_id, p_runner);
        ELSIF v_kind = 'timer' THEN
            v_result := timers._run_due(v_id, v_at, p_runner);
        ELSIF v_kind = 'backfill' THEN
            v_result := timers._run_backfill(v_id, p_runner);
        ELSE
            v_result := timers._keyed_fire(v_id, v_at, p_runner);
        END IF;
        IF v_group IS NOT NULL THEN
            -- the run's slot frees with its commit: the group's waiting timers start then
            v_nil := timers._group_freed(v_group);
        END IF;
    EXCEPTION
        WHEN SQLSTATE 'PGT02' THEN
            -- its run group is full: claim again, past that group's timers
            GET STACKED DIAGNOSTICS v_group = PG_EXCEPTION_DETAIL;
            IF v_group = ANY (v_full) THEN
                -- (never: the claims pass over the groups in v_full) no loop, whatever
                RETURN jsonb_build_object('failed', 'claim', 'id', coalesce(v_id, 0), 'sqlstate', 'PGT02',
                                          'error', format('run group %s claimed again', v_group));
            END IF;
            v_full := v_full || v_group;
            CONTINUE;
        WHEN OTHERS THEN
            -- the run's own machinery failed (not its SQL, whose errors are recorded): say
            -- which, so that the runner leaves it alone for a while instead of a hot loop
            -- (id 0: the claim itself failed, nothing was claimed; never null, which a runner
            -- of the previous release cannot read)
            RETURN jsonb_build_object('failed', coalesce(v_kind, 'claim'), 'id', coalesce(v_timer, v_id, 0),
                                      'sqlstate', SQLSTATE, 'error', timers._cut(SQLERRM));
    END;
    RETURN coalesce(v_result, '{}');
  END LOOP;
END
$$;

-- Tell the runner, before a run, what its session is about to run: a notice 'pgtimers:
-- claimed' whose detail is {mark, kind, id, due_at, at}. A notice reaches the runner at
-- once, ahead of anything the run does, so when the run ends the session (a FATAL error,
-- the session terminated, the server gone) the runner still knows which run it was and
-- records it (timers._run_lost). p_mark is the runner's secret for its connection (a
-- timer's SQL cannot read it, so it cannot pass for a claim); NULL (a runner of an older
-- version) says nothing. client_min_messages is the runner's (notice) here: the run's
-- settings come after. A runner that says its mark also reads what the run says: for
-- the rest of the transaction, timers._execute tells it which run starts
-- (pgtimers.run_notices), so that the notices after belong to that run.
CREATE OR REPLACE FUNCTION timers._say_claimed(p_mark text, p_kind text, p_id bigint, p_at timestamptz)
    RETURNS void
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    v_nil text;  -- what a call whose value is not needed returns (not PERFORM: see the top)
BEGIN
    IF p_mark IS NOT NULL THEN
        RAISE NOTICE 'pgtimers: claimed' USING DETAIL = jsonb_build_object(
            'mark', p_mark, 'kind', p_kind, 'id', p_id, 'due_at', p_at,
            'at', clock_timestamp())::text;
        v_nil := set_config('pgtimers.run_notices', 'on', true);
    END IF;
END
$$;

-- Claim (lock, SKIP LOCKED) the timer that fires first among those due: on the server's
-- clock higher priority first, then the earlier fire time, then the one that ran longest
-- ago (never first), then the lower id; then test clocks. The last run breaks ties so
-- that overload is shared: with catch_up 'skip' a timer passed over is next due at the
-- same fire time as those that ran, and would lose to the same lower ids each time.
-- due_at is the due time its run runs (a retry's, else the next). Each step reads one
-- index: timers with a priority (rare) have timers_due_ranked, the rest timers_due (in
-- this order, no sort). A timer of a run group in p_full is passed over; one of another
-- group is claimed with a slot of its group, or raises PGT02 (timers._group_claim: the
-- caller claims again with that group in p_full).
CREATE OR REPLACE FUNCTION timers._claim_due(
    p_skip bigint[], p_full text[] DEFAULT '{}', OUT id bigint, OUT due_at timestamptz, OUT timeout interval,
    OUT run_group text)
    LANGUAGE plpgsql
    -- index scans whatever the statistics say (a table that grew since its last
    -- ANALYZE must not make every claim a scan and sort of all that is due; no JIT)
    SET enable_seqscan = off SET enable_bitmapscan = off SET jit = off
    AS $$
DECLARE
    v_nil text;  -- what a call whose value is not needed returns (not PERFORM: see the top)
BEGIN
    <<claim>>
    BEGIN
        SELECT t.id, coalesce(t.retry_due_at, t.next_due_at), t.timeout, t.run_group
          INTO id, due_at, timeout, run_group
          FROM timers.timers t
         WHERE t.fire_at <= now() AND t.test_clock IS NULL AND t.priority <> 0 AND t.priority > 0
           AND t.id <> ALL (p_skip)
           AND NOT (t.autonomous AND EXISTS (SELECT 1 FROM timers.autonomous_runs o WHERE o.timer_id = t.id))
           AND (t.run_group IS NULL OR t.run_group <> ALL (p_full))
         ORDER BY t.priority DESC, t.fire_at, t.last_run_at NULLS FIRST, t.id
         LIMIT 1
           FOR UPDATE SKIP LOCKED;
        EXIT claim WHEN FOUND;
        SELECT t.id, coalesce(t.retry_due_at, t.next_due_at), t.timeout, t.run_group
          INTO id, due_at, timeout, run_group
          FROM timers.timers t
         WHERE t.fire_at <= now() AND t.test_clock IS NULL AND t.priority = 0 AND t.id <> ALL (p_skip)
           AND NOT (t.autonomous AND EXISTS (SELECT 1 FROM timers.autonomous_runs o WHERE o.timer_id = t.id))
           AND (t.run_group IS NULL OR t.run_group <> ALL (p_full))
         ORDER BY t.fire_at, t.last_run_at NULLS FIRST, t.id
         LIMIT 1
           FOR UPDATE SKIP LOCKED;
        EXIT claim WHEN FOUND;
        SELECT t.id, coalesce(t.retry_due_at, t.next_due_at), t.timeout, t.run_group
          INTO id, due_at, timeout, run_group
          FROM timers.timers t
         WHERE t.fire_at <= now() AND t.test_clock IS NULL AND t.priority <> 0 AND t.priority < 0
           AND t.id <> ALL (p_skip)
           AND NOT (t.autonomous AND EXISTS (SELECT 1 FROM timers.autonomous_runs o WHERE o.timer_id = t.id))
           AND (t.run_group IS NULL OR t.run_group <> ALL (p_full))
         ORDER BY t.priority DESC, t.fire_at, t.last_run_at NULLS FIRST, t.id
         LIMIT 1
           FOR UPDATE SKIP LOCKED;
        EXIT claim WHEN FOUND;
        SELECT t.id, coalesce(t.retry_due_at, t.next_due_at), t.timeout, t.run_group
          INTO id, due_at, timeout, run_group
          FROM timers.timers t JOIN timers.test_clocks c ON c.name = t.test_clock
         WHERE t.test_clock IS NOT NULL AND t.fire_at IS NOT NULL AND t.fire_at <= c.now
           AND t.id <> ALL (p_skip)
           AND NOT (t.autonomous AND EXISTS (SELECT 1 FROM timers.autonomous_runs o WHERE o.timer_id = t.id))
           AND (t.run_group IS NULL OR t.run_group <> ALL (p_full))
         ORDER BY t.priority DESC, t.fire_at, t.last_run_at NULLS FIRST, t.id
         LIMIT 1
           FOR UPDATE OF t SKIP LOCKED;
    END claim;
    -- a timer of a run group: a slot of its group, or PGT02 (timers._group_claim)
    IF id IS NOT NULL AND run_group IS NOT NULL THEN
        v_nil := timers._group_claim(run_group);
    END IF;
END
$$;

-- Claim the next keyed timer in tick order on a clock whose fire lock (a row of
-- timers.locks, 'keyed_fire:' and the clock's name) this transaction can take,
-- held until commit. No row when nothing is owed. p_skip: ids to leave alone for a
-- while (their fire raised).
CREATE OR REPLACE FUNCTION timers._keyed_claim(p_skip bigint[])
    RETURNS TABLE (id bigint, owed_at timestamptz, timeout_ms bigint)
    LANGUAGE plpgsql
    -- index scans whatever the statistics say (a table that grew since its last
    -- ANALYZE must not make every claim a scan and sort of all that is due; no JIT)
    SET enable_seqscan = off SET enable_bitmapscan = off SET jit = off
    AS $$
DECLARE
    c record;
    v_skip bigint[] := coalesce(p_skip, '{}');
BEGIN
    -- the server's clock (index keyed_due), then each test clock (index keyed_due_test_clock)
    IF EXISTS (SELECT 1 FROM timers.keyed_timers k
                WHERE k.status = 'armed' AND k.test_clock IS NULL AND k.owed_at <= now()
                  AND k.id <> ALL (v_skip))
       AND EXISTS (SELECT 1 FROM timers.locks l WHERE l.name = 'keyed_fire:' FOR UPDATE SKIP LOCKED) THEN
        RETURN QUERY
            SELECT k.id, k.owed_at, timers._ms(timers._run_timeout())
              FROM timers.keyed_timers k
             WHERE k.status = 'armed' AND k.test_clock IS NULL AND k.owed_at <= now()
               AND k.id <> ALL (v_skip)
             ORDER BY k.owed_at, k.place, k.key
             LIMIT 1
               FOR UPDATE OF k SKIP LOCKED;
        IF FOUND THEN
            RETURN;
        END IF;
    END IF;
    FOR c IN SELECT tc.name, tc.now FROM timers.test_clocks tc ORDER BY tc.name LOOP
        CONTINUE WHEN NOT EXISTS (
            SELECT 1 FROM timers.keyed_timers k
             WHERE k.status = 'armed' AND k.test_clock = c.name AND k.owed_at <= c.now
               AND k.id <> ALL (v_skip));
        CONTINUE WHEN NOT EXISTS (SELECT 1 FROM timers.locks l
                                   WHERE l.name = 'keyed_fire:' || c.name FOR UPDATE SKIP LOCKED);
        RETURN QUERY
            SELECT k.id, k.owed_at, timers._ms(timers._run_timeout())
              FROM timers.keyed_timers k
             WHERE k.status = 'armed' AND k.test_clock = c.name AND k.owed_at <= c.now
               AND k.id <> ALL (v_skip)
             ORDER BY k.owed_at, k.place, k.key
             LIMIT 1
               FOR UPDATE OF k SKIP LOCKED;
        IF FOUND THEN
            RETURN;
        END IF;
    END LOOP;
END
$$;

-- Claim (lock, SKIP LOCKED) the oldest running backfill whose timer is not running now,
-- with its timer's row: one due time at a time per timer, never beside its other runs;
-- a run group's as timers._claim_due's (p_full: groups passed over).
CREATE OR REPLACE FUNCTION timers._claim_backfill(
    p_skip bigint[], p_full text[] DEFAULT '{}', OUT id bigint, OUT timer_id bigint, OUT timeout interval,
    OUT run_group text)
    LANGUAGE plpgsql
    -- index scans whatever the statistics say (a table that grew since its last
    -- ANALYZE must not make every claim a scan and sort of all that is due; no JIT)
    SET enable_seqscan = off SET enable_bitmapscan = off SET jit = off
    AS $$
DECLARE
    v_nil text;  -- what a call whose value is not needed returns (not PERFORM: see the top)
BEGIN
    SELECT b.id, t.id, t.timeout, t.run_group INTO id, timer_id, timeout, run_group
      FROM timers.backfill_jobs b JOIN timers.timers t ON t.id = b.timer_id
     WHERE b.state = 'running' AND t.id <> ALL (p_skip)
       AND (t.run_group IS NULL OR t.run_group <> ALL (p_full))
     ORDER BY b.id
     LIMIT 1
       FOR UPDATE OF b, t SKIP LOCKED;
    IF FOUND AND run_group IS NOT NULL THEN
        v_nil := timers._group_claim(run_group);
    END IF;
END
$$;

-- Claim (lock, SKIP LOCKED) the follower due time that has been ready longest, with its
-- follower's row: not a follower whose own retry is pending (its due times keep their
-- order behind it), nor one in p_skip, nor one of a run group in p_full; one of another
-- group is claimed with a slot of it, or raises PGT02 (as timers._claim_due). Reads the
-- index follow_dues_ready.
CREATE OR REPLACE FUNCTION timers._claim_follow(
    p_skip bigint[], p_full text[] DEFAULT '{}', OUT id bigint, OUT due_at timestamptz,
    OUT timeout interval, OUT run_group text)
    LANGUAGE plpgsql
    SET enable_seqscan = off SET enable_bitmapscan = off SET jit = off
    AS $$
DECLARE
    v_nil text;  -- what a call whose value is not needed returns
BEGIN
    SELECT t.id, d.due_at, t.timeout, t.run_group INTO id, due_at, timeout, run_group
      FROM timers.follow_dues d JOIN timers.timers t ON t.id = d.follower_id
     WHERE d.state = 'ready' AND t.retry_at IS NULL AND t.id <> ALL (p_skip)
       AND (t.run_group IS NULL OR t.run_group <> ALL (p_full))
     ORDER BY d.ready_at, d.follower_id, d.due_at
     LIMIT 1
       FOR UPDATE OF d, t SKIP LOCKED;
    -- a follower in a run group: a slot of it, or PGT02 (timers._group_claim)
    IF FOUND AND run_group IS NOT NULL THEN
        v_nil := timers._group_claim(run_group);
    END IF;
END
$$;

-- Record a run whose session ended while it ran (the runner saw the claim, timers.
-- _say_claimed, then lost the connection): as a failed attempt of what was claimed,
-- p_lost {error, sqlstate, at: when it was claimed}, by the same routine that runs it
-- (its retries, pause_after and skips follow), in the caller's transaction. NULL when
-- there is nothing to record: the run committed (its due time moved on), or it is still
-- running (its row is locked), or it is gone.
CREATE OR REPLACE FUNCTION timers._run_lost(
    p_kind text, p_id bigint, p_due timestamptz, p_runner text, p_lost jsonb) RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    IF p_lost IS NULL OR NOT p_lost ?& ARRAY['error', 'sqlstate', 'at'] THEN
        RAISE EXCEPTION 'a lost run needs its error, sqlstate and the time it was claimed (at)'
            USING ERRCODE = '22023';
    END IF;
    RETURN CASE p_kind
        WHEN 'timer' THEN timers._run_due(p_id, p_due, p_runner, p_lost)
        WHEN 'request' THEN timers._run_request(p_id, p_runner, p_lost)
        WHEN 'backfill' THEN timers._run_backfill(p_id, p_runner, p_lost)
        WHEN 'keyed' THEN timers._keyed_fire(p_id, p_due, p_runner, p_lost) END;
END
$$;

-- The whole run of one due time, in the caller's transaction: its first attempt, or (a
-- retry of it is due) the next one. The runner has claimed the row (timers._fire) and
-- set statement_timeout; this locks it again (a no-op for the claimer), so it is also
-- safe to call on its own. Returns NULL when the due time is not this caller's to run
-- (run by someone else, being run, no longer due), else what happened, as jsonb.
CREATE OR REPLACE FUNCTION timers._run_due(
    p_id bigint, p_due timestamptz, p_runner text, p_lost jsonb DEFAULT NULL)
    RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_nil text;  -- what a call whose value is not needed returns (not PERFORM: see the top)
    t timers.timers;
    v_now timestamptz;
    v_due timestamptz := p_due;
    v_planned timestamptz;
    v_kind text;
    v_cap integer := timers._skip_rows_cap();
    v_skips jsonb := '[]';
    v_event jsonb;
    w record;
    r timers.run_outcome;
    v_n1 timestamptz;
    v_locks text;
    v_prev timestamptz;
    v_skipped_to boolean := false;
BEGIN
    SELECT * INTO t FROM timers.timers WHERE id = p_id FOR UPDATE SKIP LOCKED;
    IF NOT FOUND OR (t.autonomous AND timers._autonomous_open(t)) THEN
        RETURN NULL;
    END IF;
    -- turned off or deleted while it ran: done now, and nothing runs
    IF EXISTS (SELECT 1 FROM timers.pending_changes c WHERE c.timer_id = t.id)
       AND timers._apply_pending(t.id) THEN
        RETURN NULL;
    END IF;
    -- its run group full (a claim's slot freed before this run): it waits, still owed
    IF t.run_group IS NOT NULL AND p_lost IS NULL AND NOT timers._group_slot(t.run_group) THEN
        RETURN NULL;
    END IF;
    IF t.retry_due_at = p_due THEN
        RETURN timers._run_retry(t, p_runner, p_lost);
    END IF;
    IF t.spec->>'kind' = 'after' THEN
        -- a follower's due time (timers.follow_dues)
        RETURN timers._run_follow(t, p_due, p_runner, p_lost);
    END IF;
    IF t.next_due_at IS DISTINCT FROM p_due OR t.retry_at IS NOT NULL THEN
        RETURN NULL;
    END IF;
    IF NOT t.enabled OR t.expired THEN
        UPDATE timers.timers SET next_due_at = NULL WHERE id = t.id;
        RETURN NULL;
    END IF;
    -- The exactly-once guard: a due time at or before the high-water mark has
    -- committed already (the clock was set back, or the timer was re-planned).
    IF t.last_due_at IS NOT NULL AND p_due <= t.last_due_at THEN
        UPDATE timers.timers SET next_due_at = timers._plan(t, t.last_due_at) WHERE id = t.id;
        RETURN jsonb_build_object('timer', t.name, 'due_at', timers._iso(p_due), 'replanned', true);
    END IF;
    v_now := timers._run_clock(t, p_lost);
    IF v_now IS NULL OR t.fire_at > v_now THEN
        RETURN NULL;
    END IF;
    v_kind := CASE WHEN t.catch_up_due_at = p_due THEN 'catch_up' ELSE 'scheduled' END;
    v_planned := t.fire_at;
    v_n1 := NULL;

    -- Never run a due time whose successor has come (unless catch_up = 'all'):
    -- the earlier ones are skipped, the latest runs, at its own time (jitter).
    IF coalesce(t.catch_up, 'skip') <> 'all' AND t.spec->>'kind' <> 'once' THEN
        w := timers._walk_dues(t, p_due, v_now);
        v_n1 := w.next_due;  -- the due time after the one that runs
        IF w.n > 1 THEN
            v_event := timers._record_skips(t, w.dues[1:least(w.n - 1, v_cap)], w.n - 1,
                w.first_due, w.before_last,
                timers._late_reason(w.first_due, t.id), p_runner);
            v_skips := v_skips || jsonb_build_array(v_event);
            v_due := w.last_due;
            v_prev := w.before_last;
            v_skipped_to := true;
            v_kind := 'scheduled';
            UPDATE timers.timers SET next_due_at = v_due, catch_up_due_at = NULL
             WHERE id = t.id RETURNING fire_at INTO v_planned;
            IF v_planned > v_now THEN
                RETURN jsonb_build_object('timer', t.name, 'due_at', timers._iso(v_due),
                                          'fires_at', timers._iso(v_planned), 'skipped', v_skips);
            END IF;
        END IF;
    END IF;

    -- the walk above knows the due time before when it skipped
    IF NOT v_skipped_to THEN
        v_prev := timers._prev_due(t, v_due, t.origin_at);
    END IF;
    -- (t.autonomous first: the look-up is not made for an atomic timer)
    IF t.autonomous AND p_lost IS NULL AND timers._autonomous_owner(t) IS NOT NULL THEN
        RETURN timers._autonomous_start(t, 'timer', v_kind, v_due, 1, v_planned, v_prev, v_n1,
                                        v_skips, NULL, p_runner);
    END IF;
    v_locks := timers._limit_lock_waits();
    r := timers._execute(t.id, t.name, t.owner, t.sql, t.timeout, v_due, v_prev, 1,
                         t.spec->>'calendar', t.zone, v_planned, CASE WHEN t.test_clock IS NOT NULL THEN v_now END, p_lost);
    IF p_lost IS NULL AND r.sqlstate = '55P03' THEN
        RETURN timers._yielded(t, v_kind, v_due, r, v_skips);
    END IF;
    v_nil := set_config('lock_timeout', v_locks, true);
    RETURN timers._due_recorded(t, v_kind, v_due, v_n1, v_now, r, v_skips, p_runner);
END
$$;

-- The next attempt of a due time whose earlier attempt failed (t: its row, locked by
-- the caller). Given up, and recorded as skipped, when the timer's next due time has
-- come first or it was turned off; else run, with pgtimers.attempt its number.
CREATE OR REPLACE FUNCTION timers._run_retry(t timers.timers, p_runner text, p_lost jsonb DEFAULT NULL)
    RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_nil text;  -- what a call whose value is not needed returns (not PERFORM: see the top)
    v_now timestamptz := timers._run_clock(t, p_lost);
    v_prev timestamptz;
    r timers.run_outcome;
    v_locks text;
BEGIN
    IF v_now IS NULL OR t.retry_at > v_now THEN
        RETURN NULL;
    END IF;
    IF NOT t.enabled OR (t.next_due_at IS NOT NULL AND t.next_due_at <= v_now) THEN
        RETURN timers._give_up_retry(t, CASE WHEN t.enabled THEN 'retry would overlap the next due time'
                                             ELSE 'turned off before its retry' END, p_runner);
    END IF;

    v_prev := timers._prev_due(t, t.retry_due_at, t.origin_at);
    -- (t.autonomous first: the look-up is not made for an atomic timer)
    IF t.autonomous AND p_lost IS NULL AND timers._autonomous_owner(t) IS NOT NULL THEN
        RETURN timers._autonomous_start(t, 'retry', 'retry', t.retry_due_at, t.retry_attempt,
                                        t.retry_at, v_prev, NULL, '[]', NULL, p_runner);
    END IF;
    v_locks := timers._limit_lock_waits();
    r := timers._execute(t.id, t.name, t.owner, t.sql, t.timeout, t.retry_due_at, v_prev,
                         t.retry_attempt, t.spec->>'calendar', t.zone, t.retry_at,
                         CASE WHEN t.test_clock IS NOT NULL THEN v_now END, p_lost);
    IF p_lost IS NULL AND r.sqlstate = '55P03' THEN
        RETURN timers._yielded(t, 'retry', t.retry_due_at, r, '[]');
    END IF;
    v_nil := set_config('lock_timeout', v_locks, true);
    RETURN timers._retry_recorded(t, v_now, r, p_runner);
END
$$;

-- A pending retry that is not made (p_why: the next due time came first, or the timer
-- was turned off): the due time's last attempt stays its final outcome, a failure, and
-- the retry is recorded as a skipped due time with the reason.
CREATE OR REPLACE FUNCTION timers._give_up_retry(t timers.timers, p_why text, p_runner text)
    RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
DECLARE
    -- the last attempt's own error (last_error says more: which attempt, what next)
    v_error text := coalesce((SELECT r.error FROM timers.runs r
                               WHERE r.timer_id = t.id AND r.due_at = t.retry_due_at AND r.ok = false
                               ORDER BY r.started_at DESC LIMIT 1), t.last_error);
    o record := timers._failed_outcome(t, t.retry_attempt - 1, v_error, NULL, p_why);
    v_skip jsonb;
BEGIN
    UPDATE timers.timers SET
        retry_due_at = NULL, retry_attempt = NULL, retry_at = NULL,
        runs = runs + 1, failures = failures + 1, fail_streak = o.streak,
        last_error = o.last_error
     WHERE id = t.id;
    PERFORM timers._event('retry_given_up', t.name, t.retry_due_at, t.retry_attempt - 1,
        v_error, '', jsonb_build_object('reason', p_why));
    -- its deadline is missed for the failure, before the skip that records it
    IF t.deadline IS NOT NULL THEN
        PERFORM timers._deadline_recorded(t, t.retry_due_at, false, true, t.retry_attempt - 1, 0,
                                          clock_timestamp());
    END IF;
    v_skip := timers._record_skips(t, ARRAY[t.retry_due_at], 1, t.retry_due_at, t.retry_due_at,
                                   p_why, p_runner);
    IF o.pause THEN
        PERFORM timers._paused(t, t.retry_due_at, t.retry_attempt - 1, v_error, '', o.streak, p_runner);
    END IF;
    RETURN jsonb_build_object('timer', t.name, 'kind', 'retry', 'due_at', timers._iso(t.retry_due_at),
        'attempt', t.retry_attempt, 'gave_up', p_why, 'paused', o.pause,
        'skipped', jsonb_build_array(v_skip));
END
$$;

-- The runner's side of a run-now: run the timer's SQL now, in the caller's
-- transaction, whatever its schedule (also when it is off). Does not move
-- next_due_at or last_due_at; counts in runs and failures, not in max_runs. p_lost: the
-- run ended its session before (timers._run_lost): answered as that failure.
CREATE OR REPLACE FUNCTION timers._run_request(p_request bigint, p_runner text, p_lost jsonb DEFAULT NULL)
    RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    q timers.run_requests;
    t timers.timers;
    r timers.run_outcome;
    v_now timestamptz;
    v_result jsonb;
BEGIN
    SELECT * INTO q FROM timers.run_requests
     WHERE id = p_request AND finished_at IS NULL FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    SELECT * INTO t FROM timers.timers WHERE id = q.timer_id FOR UPDATE;
    IF FOUND AND EXISTS (SELECT 1 FROM timers.pending_changes c WHERE c.timer_id = t.id)
       AND timers._apply_pending(t.id) THEN
        SELECT * INTO t FROM timers.timers WHERE id = q.timer_id;
    END IF;
    -- its run group full (a claim's slot freed before this run): the request waits
    IF t.run_group IS NOT NULL AND p_lost IS NULL AND NOT timers._group_slot(t.run_group) THEN
        RETURN NULL;
    END IF;
    IF t.id IS NULL THEN
        v_result := jsonb_build_object('name', q.timer, 'finished', true, 'ok', false,
            'error', 'the timer was deleted before it could run', 'took_ms', 0, 'rows', 0);
        UPDATE timers.run_requests SET finished_at = clock_timestamp(), result = v_result WHERE id = q.id;
        RETURN v_result || jsonb_build_object('timer', q.timer, 'kind', 'run_now', 'sqlstate', '');
    END IF;
    v_now := coalesce(timers._now(t.test_clock), now());
    -- (t.autonomous first: the look-up is not made for an atomic timer)
    IF t.autonomous AND p_lost IS NULL AND timers._autonomous_owner(t) IS NOT NULL THEN
        RETURN timers._autonomous_start(t, 'request', 'run_now', NULL, 1, v_now, NULL, NULL, '[]', q.id,
                                        p_runner);
    END IF;
    r := timers._execute(t.id, t.name, t.owner, t.sql, t.timeout, v_now, NULL, 1,
                         t.spec->>'calendar', t.zone, v_now, CASE WHEN t.test_clock IS NOT NULL THEN v_now END, p_lost);
    RETURN timers._request_recorded(q, t, v_now, r, p_runner);
END
$$;

-- Run backfill p_id's next due time, in the caller's transaction: the timer's SQL with
-- pgtimers.due_at = that due time, its timers.runs row (kind backfill), and the
-- backfill's count and next due time, which commit together, so each due time runs
-- once. NULL when it is not this caller's to run. p_lost: the run ended its session
-- before (timers._run_lost): that due time counts as failed.
CREATE OR REPLACE FUNCTION timers._run_backfill(p_id bigint, p_runner text, p_lost jsonb DEFAULT NULL)
    RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    b timers.backfill_jobs;
    t timers.timers;
    r timers.run_outcome;
    v_ok boolean;
    v_due timestamptz;
    v_next timestamptz;
    v_done boolean;
    v_run bigint;
BEGIN
    SELECT * INTO b FROM timers.backfill_jobs x WHERE x.id = p_id AND x.state = 'running'
       FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    SELECT * INTO t FROM timers.timers x WHERE x.id = b.timer_id FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    -- its run group full (a claim's slot freed before this run): the due time waits
    IF t.run_group IS NOT NULL AND p_lost IS NULL AND NOT timers._group_slot(t.run_group) THEN
        RETURN NULL;
    END IF;
    -- not late: it runs when asked, so lateness counts from its start
    v_due := b.next_at;
    -- pgtimers.prev_due_at: the schedule's due time before (not the backfill's previous
    -- one), also from before the timer was created
    r := timers._execute(t.id, t.name, t.owner, t.sql, t.timeout, v_due, timers._prev_due(t, v_due, NULL),
                         1, t.spec->>'calendar', t.zone,
                         coalesce((p_lost->>'at')::timestamptz, clock_timestamp()),
                         CASE WHEN t.test_clock IS NOT NULL THEN timers._now(t.test_clock) END, p_lost);
    v_ok := r.ok;
    v_next := timers._next_due(t.spec, v_due, t.zone, t.start_at);
    v_done := v_next IS NULL OR v_next >= b.to_at;
    UPDATE timers.backfill_jobs SET
        done = done + 1,
        failed = failed + CASE WHEN v_ok THEN 0 ELSE 1 END,
        next_at = CASE WHEN v_done THEN NULL ELSE v_next END,
        state = CASE WHEN v_done THEN 'done' ELSE state END,
        ended_at = CASE WHEN v_done THEN clock_timestamp() END
     WHERE id = b.id
    RETURNING * INTO b;
    -- (kept whatever the timer's history: a backfill's runs are its record)
    INSERT INTO timers.runs (timer_id, timer, kind, due_at, started_at, took_ms, late_ms, ok,
                             error, rows, runner, attempt, backfill_id, messages)
    VALUES (t.id, t.name, 'backfill', v_due, r.started_at,
            r.took_ms, 0, v_ok, r.error, r.rows, p_runner, 1, b.id,
            r.messages)
    RETURNING id INTO v_run;
    IF NOT v_ok THEN
        PERFORM timers._event('failed', t.name, v_due, 1, r.error, r.sqlstate,
                              jsonb_build_object('kind', 'backfill', 'backfill', b.id), v_run,
                              r.messages);
    END IF;
    IF v_done THEN
        PERFORM timers._backfill_ended(b);
    END IF;
    IF EXISTS (SELECT 1 FROM timers.pending_changes c WHERE c.timer_id = t.id) THEN
        PERFORM timers._apply_pending(t.id);
    END IF;
    RETURN jsonb_build_object(
        'timer', t.name, 'kind', 'backfill', 'due_at', timers._iso(v_due), 'ok', v_ok,
        'error', r.error, 'sqlstate', r.sqlstate, 'rows', r.rows,
        'took_ms', r.took_ms, 'late_ms', 0, 'attempt', 1,
        'backfill', b.id, 'left', b.total - b.done);
END
$$;

-- Run follower t's due time p_due (t's row locked by the caller, timers._run_due), in the
-- caller's transaction: its row of timers.follow_dues, if ready, is done with the run.
-- Skipped (an upstream failed or skipped it) it is recorded as a skipped due time with
-- the reason; turned off, it is dropped. NULL when it is not this caller's to run.
-- p_lost: the run ended its session before (timers._run_lost): recorded as that failure.
CREATE OR REPLACE FUNCTION timers._run_follow(
    t timers.timers, p_due timestamptz, p_runner text, p_lost jsonb DEFAULT NULL) RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_nil text;  -- what a call whose value is not needed returns
    d timers.follow_dues;
    r timers.run_outcome;
    v_locks text;
    v_skip jsonb;
BEGIN
    SELECT * INTO d FROM timers.follow_dues x
     WHERE x.follower_id = t.id AND x.due_at = p_due AND x.state = 'ready' FOR UPDATE SKIP LOCKED;
    IF NOT FOUND OR t.retry_at IS NOT NULL THEN
        RETURN NULL;
    END IF;
    IF d.skip_reason IS NOT NULL OR NOT t.enabled THEN
        UPDATE timers.follow_dues x SET state = 'done' WHERE x.follower_id = t.id AND x.due_at = p_due;
        IF NOT t.enabled THEN
            RETURN jsonb_build_object('timer', t.name, 'due_at', timers._iso(p_due), 'off', true);
        END IF;
        v_skip := timers._record_skips(t, ARRAY[p_due], 1, p_due, p_due, d.skip_reason, p_runner);
        RETURN jsonb_build_object('timer', t.name, 'kind', 'scheduled', 'due_at', timers._iso(p_due),
                                  'skipped', jsonb_build_array(v_skip));
    END IF;
    v_locks := timers._limit_lock_waits();
    r := timers._execute(t.id, t.name, t.owner, t.sql, t.timeout, p_due, NULL, 1, NULL, t.zone,
                         d.ready_at, NULL, p_lost);
    IF p_lost IS NULL AND r.sqlstate = '55P03' THEN
        -- yielded: the row stays ready, and runs again later
        RETURN timers._yielded(t, 'scheduled', p_due, r, '[]');
    END IF;
    v_nil := set_config('lock_timeout', v_locks, true);
    UPDATE timers.follow_dues x SET state = 'done' WHERE x.follower_id = t.id AND x.due_at = p_due;
    RETURN timers._due_recorded(t, 'follow', p_due, NULL, NULL, r, '[]', p_runner);
END
$$;

-- One wake of a keyed timer, in the caller's transaction. Fires it when it is
-- armed and owed (the SQL, then the bookkeeping, committing together); a fired
-- timer answers {replayed: true, commit} and does nothing else. Of several
-- owed rungs of one owner, occurrence and family (the name's first word, e.g.
-- notice), only the latest runs: the earlier ones are superseded (by
-- catch_up); a `run` rung always runs. NULL: not this caller's to fire. p_lost: the
-- fire ended its session before (timers._run_lost): fired, failed, without running again.
CREATE OR REPLACE FUNCTION timers._keyed_fire(
    p_id bigint, p_owed_at timestamptz, p_runner text, p_lost jsonb DEFAULT NULL)
    RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_nil text;  -- what a call whose value is not needed returns (not PERFORM: see the top)
    k timers.keyed_timers;
    v_now timestamptz;
    v_latest timers.keyed_timers;
    v_family text;
    v_reason text;
    r timers.run_outcome;
    v_fired_at timestamptz;
    v_late interval;
    v_ok boolean;
BEGIN
    SELECT * INTO k FROM timers.keyed_timers WHERE id = p_id FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF k.status = 'fired' THEN
        UPDATE timers.keyed_timers SET wakes = wakes + 1 WHERE id = k.id;
        RETURN jsonb_build_object('timer', k.key, 'replayed', true, 'commit', k.commit::text,
                                  'fired_at', timers._iso(k.fired_at));
    END IF;
    IF k.status <> 'armed' OR k.owed_at IS DISTINCT FROM p_owed_at THEN
        RETURN NULL;
    END IF;
    v_now := timers._now(k.test_clock);
    IF p_lost IS NOT NULL AND k.test_clock IS NULL THEN
        v_now := least(v_now, (p_lost->>'at')::timestamptz);
    END IF;
    IF v_now IS NULL OR k.owed_at > v_now THEN
        RETURN NULL;
    END IF;

    v_family := split_part(k.name, ' ', 1);
    IF k.kind = 'rung' AND v_family <> 'run' THEN
        SELECT * INTO v_latest FROM timers.keyed_timers s
         WHERE s.subject = k.subject AND s.kind = 'rung' AND s.occurrence = k.occurrence
           AND split_part(s.name, ' ', 1) = v_family
           AND s.status = 'armed' AND s.test_clock IS NOT DISTINCT FROM k.test_clock
           AND s.owed_at <= v_now
         ORDER BY s.owed_at DESC, s.place DESC, s.key DESC
         LIMIT 1;
        IF v_latest.id IS DISTINCT FROM k.id THEN
            v_reason := format('a later %s rung was owed too: only the latest, %s, runs', v_family, v_latest.key);
            UPDATE timers.keyed_timers
               SET status = 'superseded', superseded_by = v_latest.key, superseded_at = v_now,
                   cause = 'catch_up', wakes = wakes + 1, updated_at = now()
             WHERE id = k.id;
            v_nil := timers._keyed_event(k, 'superseded', 'catch_up', current_user,
                jsonb_build_object('superseded_by', v_latest.key, 'runner', p_runner));
            v_nil := timers._event('skipped', k.key, k.owed_at, NULL, '', '', jsonb_build_object(
                'count', 1, 'last', timers._iso(k.owed_at), 'reason', v_reason, 'kind', 'keyed'));
            RETURN jsonb_build_object('timer', k.key, 'kind', 'keyed', 'superseded', true,
                'superseded_by', v_latest.key, 'due_at', timers._iso(k.owed_at),
                'skipped', jsonb_build_array(jsonb_build_object(
                    'timer', k.key, 'count', 1, 'first', timers._iso(k.owed_at),
                    'last', timers._iso(k.owed_at), 'reason', v_reason)));
        END IF;
    END IF;

    -- a keyed timer fires once, at its owed time: no schedule, no due time before
    r := timers._execute(NULL, k.key, k.owner, k.sql, NULL, k.owed_at, NULL, 1, k.calendar, k.zone,
                         k.owed_at, CASE WHEN k.test_clock IS NOT NULL THEN v_now END, p_lost);
    v_ok := r.ok;
    v_fired_at := CASE WHEN k.test_clock IS NULL THEN r.started_at ELSE v_now END;
    -- one armed after its day fires at once and is never late
    v_late := CASE WHEN k.armed_at >= k.owed_at THEN NULL
                   ELSE greatest(v_fired_at - k.owed_at, interval '0') END;
    UPDATE timers.keyed_timers
       SET status = 'fired', fired_at = v_fired_at, late_by = v_late,
           attempt = attempt + 1, wakes = wakes + 1, commit = pg_current_xact_id(),
           ok = v_ok, error = r.error, sqlstate = r.sqlstate,
           rows = r.rows, took_ms = r.took_ms, updated_at = now()
     WHERE id = k.id;
    v_nil := timers._keyed_event(k, 'fired', 'wake', current_user, jsonb_build_object(
        'ok', v_ok, 'error', r.error, 'runner', p_runner, 'commit', pg_current_xact_id()::text,
        'late_by', v_late::text));
    IF NOT v_ok THEN
        v_nil := timers._event('failed', k.key, k.owed_at, 1, r.error, r.sqlstate,
                              jsonb_build_object('kind', 'keyed'), NULL, r.messages);
    END IF;
    RETURN jsonb_build_object(
        'timer', k.key, 'kind', 'keyed', 'due_at', timers._iso(k.owed_at), 'ok', v_ok,
        'error', r.error, 'sqlstate', r.sqlstate, 'rows', r.rows,
        'took_ms', r.took_ms, 'late_ms', coalesce(timers._ms(v_late), 0),
        'commit', pg_current_xact_id()::text, 'replayed', false);
END
$$;

-- Run a timer's or a keyed timer's SQL once (a scheduled due time, a retry, a backfill's
-- due time, a run-now, a keyed timer's owed time): the one routine that does, for every
-- kind. In a sub-block (a savepoint): an error or the time limit (statement_timeout, set
-- by the runner) rolls back the SQL's effects only. First the run's context, which the
-- SQL may read: pgtimers.timer (p_name: a timer's name, a keyed timer's key), due_at
-- (p_due), prev_due_at (p_prev, the schedule's due time before; '' for none) and
-- attempt. A run that needs calendar p_calendar (NULL: none) fails when it is gone or
-- does not know p_due's day in zone p_zone. p_timer: the timer whose timers.runs row will
-- record the run (NULL: a keyed timer, which keeps none); when the runner reads what runs
-- say (pgtimers.run_notices, for the transaction: timers._say_claimed), a notice
-- 'pgtimers: run' says this run starts (timers._run_messages): the NOTICE, INFO and
-- WARNING messages after it are its own. The outcome's messages are an error's DETAIL and
-- HINT (timers._error_said). Lateness counts from p_planned, when the run was meant to
-- start (the due time moved by jitter, or a retry's time), on the server's clock, or on a
-- test clock whose now is p_clock. p_lost: the run ended its session before
-- (timers._run_lost): its outcome, a failure started when it was claimed, without running
-- again.
CREATE OR REPLACE FUNCTION timers._execute(
    p_timer bigint, p_name text, p_owner name, p_sql text, p_timeout interval, p_due timestamptz,
    p_prev timestamptz, p_attempt integer, p_calendar text, p_zone text, p_planned timestamptz,
    p_clock timestamptz, p_lost jsonb)
    RETURNS timers.run_outcome
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_nil text;  -- what a call whose value is not needed returns (not PERFORM: see the top)
    o timers.run_outcome;
    v_context text;
    v_detail text;
    v_hint text;
BEGIN
    IF p_lost IS NOT NULL THEN
        o := ROW(false, timers._cut(p_lost->>'error'), p_lost->>'sqlstate', 0, '',
                 (p_lost->>'at')::timestamptz, NULL, NULL);
        o.took_ms := greatest(timers._ms(clock_timestamp() - o.started_at), 0);
        o.late_ms := timers._ms(coalesce(p_clock, o.started_at) - p_planned);
        RETURN o;
    END IF;
    v_nil := set_config('pgtimers.timer', p_name, true);
    v_nil := set_config('pgtimers.due_at', timers._iso(p_due), true);
    v_nil := set_config('pgtimers.prev_due_at', coalesce(timers._iso(p_prev), ''), true);
    v_nil := set_config('pgtimers.attempt', p_attempt::text, true);
    v_nil := set_config('application_name', left('pgtimers: ' || p_name, 63), true);
    o := ROW(true, '', '', 0, '', clock_timestamp(), NULL, NULL);
    IF p_timer IS NOT NULL AND current_setting('pgtimers.run_notices', true) = 'on' THEN
        -- the run's timers.runs row will have this timer and started_at
        RAISE NOTICE 'pgtimers: run' USING ERRCODE = 'PGT01', DETAIL = p_timer || ' ' || o.started_at;
    END IF;
    BEGIN
        IF p_calendar IS NOT NULL THEN
            -- a trading timer whose calendar is gone fails: calendar 'X' does not exist
            v_nil := timers._calendar_ready(p_calendar, p_due, p_zone, p_timer IS NULL);
        END IF;
        o.rows := coalesce(timers._exec_as(p_owner, p_sql), 0);
    EXCEPTION WHEN query_canceled OR OTHERS THEN
        o.ok := false;
        o.sqlstate := SQLSTATE;
        o.error := timers._run_error(SQLSTATE, SQLERRM, p_timeout);
        GET STACKED DIAGNOSTICS v_detail = PG_EXCEPTION_DETAIL, v_hint = PG_EXCEPTION_HINT,
                                v_context = PG_EXCEPTION_CONTEXT;
        o.messages := coalesce(timers._error_said(v_detail, v_hint), '');
        IF o.sqlstate = '55P03' THEN
            -- what waited (the waiter's lock is gone with the error): the statement, or
            -- the tuple and relation of a row lock, from the error's context
            o.error := o.error || timers._lock_waiter(v_context);
        END IF;
        -- a rollback does not let go of session advisory locks the SQL took
        v_nil := pg_catalog.pg_advisory_unlock_all();
    END;
    o.took_ms := timers._ms(clock_timestamp() - o.started_at);
    o.late_ms := timers._ms(coalesce(p_clock, o.started_at) - p_planned);
    RETURN o;
END
$$;

-- The clock a run goes by: its timer's clock now; for a run that ended its session
-- (p_lost), the time it was claimed then, so that it is judged as it was (which due time
-- ran, which were skipped), not by how much later the runner could say so.
CREATE OR REPLACE FUNCTION timers._run_clock(t timers.timers, p_lost jsonb) RETURNS timestamptz
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    IF p_lost IS NULL OR t.test_clock IS NOT NULL THEN
        RETURN timers._now(t.test_clock);
    END IF;
    RETURN least(timers._now(t.test_clock), (p_lost->>'at')::timestamptz);
END
$$;

-- A run's lock wait limit (timers._run_due, _run_retry): lock_timeout for the rest of the
-- transaction, 5 s (well under a run's time limit), unless a smaller one is in effect (the
-- session's, the role's). A timer's SQL may set its own as its first statement: SET LOCAL
-- lock_timeout = '30s' (or 0: none). Returns the setting before, which the caller puts back
-- after the run. A run that waits longer yields (timers._yielded; docs/running.md).
CREATE OR REPLACE FUNCTION timers._limit_lock_waits() RETURNS text
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    v_nil text;  -- what a call whose value is not needed returns (not PERFORM: see the top)
    v_old text := current_setting('lock_timeout');
BEGIN
    IF v_old = '0' OR v_old::interval > interval '5 seconds' THEN
        v_nil := set_config('lock_timeout', '5s', true);
    END IF;
    RETURN v_old;
END
$$;


-- The message of a failed run: an error's text (cut), a time limit or a cancel said plainly.
CREATE OR REPLACE FUNCTION timers._run_error(p_sqlstate text, p_message text, p_timeout interval)
    RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
        SELECT CASE
            WHEN p_sqlstate = '57014' AND p_message LIKE '%statement timeout%'
                THEN format('timed out: the run took longer than its timeout of %s',
                            coalesce(p_timeout, timers._run_timeout()))
            WHEN p_sqlstate = '57014'
                THEN 'cancelled: ' || timers._cut(p_message)
                     || ' (timers.cancel, or pg_cancel_backend of the run''s session)'
            WHEN p_sqlstate = '2D000'
                THEN timers._cut(p_message) || ' (the SQL commits or rolls back, which a run in one'
                     || ' transaction cannot: save the timer with autonomous => true to run it at top level)'
            ELSE timers._cut(p_message) END
    $$;

-- What a run's SQL waited for when its lock wait ran out, from the error's context
-- (p_context): its own lines, before pgtimers' executor (a row lock's tuple and relation,
-- the statement), as ' (while ...; SQL statement "...")'; '' when the context names
-- nothing (a wait for a table's lock while the statement was being planned).
CREATE OR REPLACE FUNCTION timers._lock_waiter(p_context text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
        SELECT coalesce(' (' || timers._cut(nullif(replace(rtrim(substring(
                   coalesce(p_context, '') FROM '^(.*?)(?:PL/pgSQL function timers_exec\.|$)'),
                   E'\n'), E'\n', '; '), '')) || ')', '')
    $$;

-- A scheduled run or retry whose SQL waited for a lock longer than its lock wait limit
-- (SQLSTATE 55P03: lock_timeout, or NOWAIT; timers._limit_lock_waits) yields: it is not an
-- attempt. Its SQL's subtransaction was rolled back and nothing is recorded: the due time
-- stays owed, counts toward no retry or pause_after, and runs later or is skipped by the
-- late rule, with a reason that says it waited for a lock (timers._late_reason). The
-- runner holds the timer back a while (pgtimers/runner/held.py) and goes on to others.
-- p_skips: the skip events of the run so far.
CREATE OR REPLACE FUNCTION timers._yielded(
    t timers.timers, p_kind text, p_due timestamptz, r timers.run_outcome, p_skips jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    RETURN jsonb_build_object(
        'timer', t.name, 'timer_id', t.id, 'kind', p_kind, 'due_at', timers._iso(p_due),
        'yielded', 'waited for a lock', 'waited_ms', r.took_ms,
        'lock_timeout', current_setting('lock_timeout'), 'error', r.error, 'skipped', p_skips);
END
$$;

-- A run's result, marked for the runner when it held the timer back after a run yielded
-- (pgtimers.late names it: timers._late_reason): it ran, so the runner lets it be.
CREATE OR REPLACE FUNCTION timers._ran_after_yield(p_result jsonb, p_timer bigint) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    v_said text := current_setting('pgtimers.late', true);
BEGIN
    IF v_said LIKE '{%' AND v_said::jsonb->'timers' ? p_timer::text THEN
        RETURN p_result || jsonb_build_object('timer_id', p_timer, 'ran_after_yield', true);
    END IF;
    RETURN p_result;
END
$$;

-- The record of the first attempt of due time p_due of timer t (its row locked by the
-- caller), whose outcome is r (timers._execute; an autonomous timer's, timers.
-- _autonomous_finish), p_kind scheduled or catch_up: the timer's counters, its next
-- due time (p_n1: the walk's, if it knows it), the due times that came while it ran
-- (skipped, or one catch-up run), the retry or pause a failure leads to, the timers.runs
-- row. p_now: the timer's clock when it was claimed (a test clock's run takes no time).
-- p_kind follow: a follower's due time (timers._run_follow), recorded as scheduled, with
-- no schedule to plan: its next due time stays, and a later due time recorded first
-- stays its last. Returns the result the runner logs.
CREATE OR REPLACE FUNCTION timers._due_recorded(
    t timers.timers, p_kind text, p_due timestamptz, p_n1 timestamptz, p_now timestamptz,
    r timers.run_outcome, p_skips jsonb, p_runner text)
    RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_nil text;  -- what a call whose value is not needed returns (not PERFORM: see the top)
    v_follow boolean := p_kind = 'follow';
    v_kind text := CASE WHEN v_follow THEN 'scheduled' ELSE p_kind END;
    v_skips jsonb := p_skips;
    v_n1 timestamptz := p_n1;
    v_ok boolean := r.ok;
    v_late bigint := CASE WHEN v_follow THEN greatest(r.late_ms, 0) ELSE r.late_ms END;
    v_started timestamptz := p_now;
    v_ended timestamptz := p_now;
    v_next timestamptz;
    v_catch_up boolean := false;
    v_event jsonb;
    v_took bigint := r.took_ms;
    v_tb integer := timers._bucket(r.took_ms, timers._duration_buckets());
    v_lb integer := timers._bucket(v_late, timers._lateness_buckets());
    a record;
    o record;
BEGIN
    IF t.test_clock IS NULL OR v_follow THEN
        v_started := r.started_at;
        v_ended := clock_timestamp();
    END IF;

    IF v_follow THEN
        o := timers._attempt_outcome(t, 1, v_ok, r.error, v_ended, NULL);
    ELSE
        t.scheduled_runs := t.scheduled_runs + 1;
        -- the walk's next due time holds unless max_runs (which this run counts toward) ends it
        IF v_n1 IS NULL OR t.max_runs IS NOT NULL THEN
            v_n1 := timers._plan(t, p_due);
        END IF;
        a := timers._after_run(t, p_due, v_started, v_ended, v_n1);
        IF a.skip_n > 0 THEN
            v_event := timers._record_skips(t, a.skip_dues, a.skip_n, a.skip_first, a.skip_last,
                format('the run due at %s was still running', timers._iso(p_due)), p_runner);
            v_skips := v_skips || jsonb_build_array(v_event);
        END IF;
        v_next := a.next_due;
        v_catch_up := a.catch_up;
        -- a catch-up run due right away leaves no room for a retry
        o := timers._attempt_outcome(t, 1, v_ok, r.error, v_ended,
                                     CASE WHEN v_catch_up THEN v_ended ELSE v_next END);
    END IF;

    UPDATE timers.timers SET
        last_due_at = CASE WHEN v_follow THEN greatest(last_due_at, p_due) ELSE p_due END,
        last_run_at = v_started,
        last_late_ms = v_late,
        max_late_ms = greatest(max_late_ms, v_late),
        last_ok = v_ok,
        last_error = o.last_error,
        last_took_ms = r.took_ms,
        last_rows = r.rows,
        runs = runs + CASE WHEN o.final THEN 1 ELSE 0 END,
        scheduled_runs = scheduled_runs + 1,
        failures = failures + CASE WHEN o.final AND NOT v_ok THEN 1 ELSE 0 END,
        caught_up = caught_up + CASE WHEN p_kind = 'catch_up' THEN 1 ELSE 0 END,
        fail_streak = o.streak,
        retry_due_at = CASE WHEN NOT o.final THEN p_due END,
        retry_attempt = CASE WHEN NOT o.final THEN 2 END,
        retry_at = o.retry_at,
        next_due_at = CASE WHEN v_follow THEN next_due_at ELSE v_next END,
        catch_up_due_at = CASE WHEN v_follow THEN catch_up_due_at WHEN v_catch_up THEN v_next END,
        expired = CASE WHEN v_follow THEN expired ELSE v_next IS NULL END,
        last_success_at = CASE WHEN v_ok THEN v_ended ELSE last_success_at END,
        took_counts[v_tb] = took_counts[v_tb] + 1,
        took_sum_ms = took_sum_ms + greatest(v_took, 0),
        late_counts[v_lb] = late_counts[v_lb] + 1,
        late_sum_ms = late_sum_ms + greatest(v_late, 0)
     WHERE id = t.id;
    v_nil := timers._attempt_recorded(t, v_kind, p_due, 1, r, v_late, o.retry_at, o.given_up,
                                     o.pause, o.streak, p_runner);
    RETURN timers._ran_after_yield(timers._attempt_result(t, v_kind, p_due, 1, r, v_late, v_skips,
                                                          o.retry_at, o.given_up, o.pause), t.id);
END
$$;

-- The record of a retry of timer t (its row locked by the caller) whose outcome is r
-- (timers._execute; an autonomous timer's, timers._autonomous_finish): the timer's
-- counters, the next retry or the end of them, the timers.runs row. p_now: the timer's
-- clock when it was claimed. Returns the result the runner logs.
CREATE OR REPLACE FUNCTION timers._retry_recorded(t timers.timers, p_now timestamptz, r timers.run_outcome, p_runner text)
    RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_nil text;  -- what a call whose value is not needed returns (not PERFORM: see the top)
    v_ok boolean := r.ok;
    v_started timestamptz := p_now;
    v_ended timestamptz := p_now;
    o record;
    v_took bigint := r.took_ms;
    v_late bigint := r.late_ms;
    v_tb integer := timers._bucket(r.took_ms, timers._duration_buckets());
    v_lb integer := timers._bucket(r.late_ms, timers._lateness_buckets());
BEGIN
    IF t.test_clock IS NULL THEN
        v_started := r.started_at;
        v_ended := clock_timestamp();
    END IF;
    o := timers._attempt_outcome(t, t.retry_attempt, v_ok, r.error, v_ended, t.next_due_at);
    UPDATE timers.timers SET
        last_run_at = v_started,
        last_ok = v_ok,
        last_error = o.last_error,
        last_took_ms = r.took_ms,
        last_rows = r.rows,
        runs = runs + CASE WHEN o.final THEN 1 ELSE 0 END,
        failures = failures + CASE WHEN o.final AND NOT v_ok THEN 1 ELSE 0 END,
        fail_streak = o.streak,
        retry_due_at = CASE WHEN NOT o.final THEN retry_due_at END,
        retry_attempt = CASE WHEN NOT o.final THEN retry_attempt + 1 END,
        retry_at = o.retry_at,
        last_success_at = CASE WHEN v_ok THEN v_ended ELSE last_success_at END,
        took_counts[v_tb] = took_counts[v_tb] + 1,
        took_sum_ms = took_sum_ms + greatest(v_took, 0),
        late_counts[v_lb] = late_counts[v_lb] + 1,
        late_sum_ms = late_sum_ms + greatest(v_late, 0)
     WHERE id = t.id;
    v_nil := timers._attempt_recorded(t, 'retry', t.retry_due_at, t.retry_attempt, r,
                                     r.late_ms, o.retry_at, o.given_up, o.pause,
                                     o.streak, p_runner);
    RETURN timers._ran_after_yield(timers._attempt_result(
        t, 'retry', t.retry_due_at, t.retry_attempt, r, r.late_ms, '[]', o.retry_at,
        o.given_up, o.pause), t.id);
END
$$;

-- The record of run-now request q of timer t (both rows locked by the caller), whose
-- outcome is r (timers._execute; an autonomous timer's, timers._autonomous_finish): the
-- timer's counters, the timers.runs row, the answer timers.run waits for. p_now: the
-- timer's clock when it was claimed. Returns the result the runner logs.
CREATE OR REPLACE FUNCTION timers._request_recorded(
    q timers.run_requests, t timers.timers, p_now timestamptz, r timers.run_outcome, p_runner text)
    RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_ok boolean := r.ok;
    v_result jsonb;
    v_run bigint;
    v_took bigint := r.took_ms;
    v_tb integer := timers._bucket(r.took_ms, timers._duration_buckets());
BEGIN
    UPDATE timers.timers SET
        last_run_at = CASE WHEN t.test_clock IS NULL THEN r.started_at ELSE p_now END,
        last_ok = v_ok,
        last_error = r.error,
        last_took_ms = r.took_ms,
        last_rows = r.rows,
        runs = runs + 1,
        failures = failures + CASE WHEN v_ok THEN 0 ELSE 1 END,
        last_success_at = CASE WHEN NOT v_ok THEN last_success_at
                               WHEN t.test_clock IS NULL THEN clock_timestamp() ELSE p_now END,
        -- a run now is never late: its lateness is not counted
        took_counts[v_tb] = took_counts[v_tb] + 1,
        took_sum_ms = took_sum_ms + greatest(v_took, 0)
     WHERE id = t.id;
    IF NOT v_ok OR t.history = 'all' THEN
        INSERT INTO timers.runs (timer_id, timer, kind, due_at, started_at, took_ms, ok, error, rows,
                                 runner, messages)
        VALUES (t.id, t.name, 'run_now', NULL, r.started_at, r.took_ms,
                v_ok, r.error, r.rows, p_runner, r.messages)
        RETURNING id INTO v_run;
    END IF;
    IF NOT v_ok THEN
        PERFORM timers._event('failed', t.name, NULL, 1, r.error, r.sqlstate,
                              jsonb_build_object('kind', 'run_now'), v_run, r.messages);
    ELSIF t.last_ok = false THEN
        PERFORM timers._event('recovered', t.name, NULL, 1, '', '', jsonb_build_object('kind', 'run_now'), v_run);
    END IF;
    IF EXISTS (SELECT 1 FROM timers.pending_changes c WHERE c.timer_id = t.id) THEN
        PERFORM timers._apply_pending(t.id);
    END IF;
    v_result := jsonb_build_object('name', t.name, 'finished', true, 'ok', v_ok,
        'error', r.error, 'took_ms', r.took_ms, 'rows', r.rows);
    IF q.id IS NOT NULL THEN
        UPDATE timers.run_requests SET finished_at = clock_timestamp(), result = v_result WHERE id = q.id;
    END IF;
    RETURN v_result || jsonb_build_object('timer', t.name, 'kind', 'run_now', 'sqlstate', r.sqlstate);
END
$$;

-- What an attempt of a due time leaves in the timer's row (a success: final, no streak):
-- whether it is the due time's final outcome, the next attempt's time (retry_at) or why
-- none is made (given_up), the failures in a row, whether they pause the timer, and
-- last_error. p_next_due: the timer's next due time (a retry must come before it).
CREATE OR REPLACE FUNCTION timers._attempt_outcome(
    t timers.timers, p_attempt integer, p_ok boolean, p_error text, p_ended timestamptz,
    p_next_due timestamptz, OUT final boolean, OUT streak integer, OUT pause boolean,
    OUT last_error text, OUT retry_at timestamptz, OUT given_up text)
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    o record;
BEGIN
    IF p_ok THEN
        final := true;
        streak := 0;
        pause := false;
        last_error := '';
        RETURN;
    END IF;
    SELECT n.retry_at, n.given_up INTO retry_at, given_up
      FROM timers._next_attempt(t, p_attempt, p_ended, p_next_due) n;
    o := timers._failed_outcome(t, p_attempt, p_error, retry_at, given_up);
    final := o.final;
    streak := o.streak;
    pause := o.pause;
    last_error := o.last_error;
END
$$;

-- What an attempt that failed leaves in the timer's row: whether it is the due time's
-- final outcome (no retry follows), the streak of due times failed in a row, whether
-- that streak pauses the timer (pause_after), and last_error, which says which
-- attempt it was and what comes next.
CREATE OR REPLACE FUNCTION timers._failed_outcome(
    t timers.timers, p_attempt integer, p_error text, p_retry_at timestamptz, p_given_up text,
    OUT final boolean, OUT streak integer, OUT pause boolean, OUT last_error text)
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    final := p_retry_at IS NULL;
    streak := t.fail_streak + CASE WHEN final THEN 1 ELSE 0 END;
    pause := final AND t.enabled AND t.pause_after IS NOT NULL AND streak >= t.pause_after;
    last_error := CASE
        WHEN pause THEN format('paused after %s failed due %s in a row (pause_after %s); SELECT timers.enable(%L) turns it on again. The last error: %s',
                               streak, CASE WHEN streak = 1 THEN 'time' ELSE 'times' END, t.pause_after,
                               t.name, p_error)
        WHEN p_retry_at IS NOT NULL THEN format('%s (attempt %s of %s; the next at %s)',
                                                p_error, p_attempt, t.retries + 1, timers._iso(p_retry_at))
        WHEN p_given_up IS NOT NULL THEN format('%s (attempt %s; %s)', p_error, p_attempt, p_given_up)
        ELSE p_error END;
END
$$;

-- An attempt's record, after its row is written: its timers.runs row (retry_at: the
-- attempt after it, if any; none for a success of a timer that keeps failures only),
-- what its failure led to (timers._announce_failure) or its recovery from one, its
-- deadline, and a change asked for while it ran, which takes effect with it.
CREATE OR REPLACE FUNCTION timers._attempt_recorded(
    t timers.timers, p_kind text, p_due timestamptz, p_attempt integer, r timers.run_outcome, p_late bigint,
    p_retry_at timestamptz, p_given_up text, p_paused boolean, p_streak integer, p_runner text)
    RETURNS void
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_nil text;  -- what a call whose value is not needed returns (not PERFORM: see the top)
    v_ok boolean := r.ok;
    v_run bigint;
BEGIN
    IF NOT v_ok OR t.history = 'all' THEN
        INSERT INTO timers.runs (timer_id, timer, kind, due_at, started_at, took_ms, late_ms, ok,
                                 error, rows, runner, attempt, retry_at, messages)
        VALUES (t.id, t.name, p_kind, p_due, r.started_at, r.took_ms,
                p_late, v_ok, r.error, r.rows, p_runner, p_attempt,
                p_retry_at, r.messages)
        RETURNING id INTO v_run;
    END IF;
    IF NOT v_ok THEN
        v_nil := timers._announce_failure(t, p_kind, p_due, p_attempt, r, p_retry_at, p_given_up,
                                         p_paused, p_streak, p_runner, v_run);
    ELSIF t.last_ok = false THEN
        v_nil := timers._event('recovered', t.name, p_due, p_attempt, '', '',
            jsonb_build_object('kind', p_kind), v_run);
    END IF;
    -- the timers that follow it learn how the due time ended (a retry to come: not yet)
    IF (v_ok OR p_retry_at IS NULL) AND EXISTS (SELECT 1 FROM timers.follows w WHERE w.upstream_id = t.id) THEN
        v_nil := timers._tell_followers(t, p_due, v_ok,
            format('%s failed at due time %s: %s', t.name, timers._iso(p_due), r.error));
    END IF;
    IF t.deadline IS NOT NULL THEN
        v_nil := timers._deadline_recorded(t, p_due, v_ok, p_retry_at IS NULL, p_attempt, p_late,
            CASE WHEN t.test_clock IS NULL THEN clock_timestamp() ELSE timers._now(t.test_clock) END);
    END IF;
    IF EXISTS (SELECT 1 FROM timers.pending_changes c WHERE c.timer_id = t.id) THEN
        v_nil := timers._apply_pending(t.id);
    END IF;
END
$$;

-- Say what a failed attempt of due time p_due (its timers.runs row p_run) led to: the failed event, a retry given
-- up (an overlap is also a skipped due time, with its reason), a pause (audited).
CREATE OR REPLACE FUNCTION timers._announce_failure(
    t timers.timers, p_kind text, p_due timestamptz, p_attempt integer, r timers.run_outcome,
    p_retry_at timestamptz, p_given_up text, p_paused boolean, p_streak integer, p_runner text,
    p_run bigint)
    RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM timers._event('failed', t.name, p_due, p_attempt, r.error, r.sqlstate,
        jsonb_build_object('kind', p_kind, 'retry_at', timers._iso(p_retry_at)), p_run,
        r.messages);
    IF p_given_up IS NOT NULL THEN
        PERFORM timers._event('retry_given_up', t.name, p_due, p_attempt, r.error, r.sqlstate,
            jsonb_build_object('reason', p_given_up));
        IF p_given_up = 'retry would overlap the next due time' THEN
            -- its deadline is missed for the failure, before the skip that records it
            IF t.deadline IS NOT NULL THEN
                PERFORM timers._deadline_recorded(t, p_due, false, true, p_attempt, 0, clock_timestamp());
            END IF;
            PERFORM timers._record_skips(t, ARRAY[p_due], 1, p_due, p_due, p_given_up, p_runner);
        END IF;
    END IF;
    IF p_paused THEN
        PERFORM timers._paused(t, p_due, p_attempt, r.error, r.sqlstate, p_streak, p_runner);
    END IF;
END
$$;

-- An attempt's result for the runner: what it logs (a run that went well, at debug level).
CREATE OR REPLACE FUNCTION timers._attempt_result(
    t timers.timers, p_kind text, p_due timestamptz, p_attempt integer, r timers.run_outcome, p_late bigint,
    p_skips jsonb, p_retry_at timestamptz, p_given_up text, p_paused boolean) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    v_result jsonb := jsonb_build_object(
        'timer', t.name, 'kind', p_kind, 'due_at', timers._iso(p_due), 'ok', r.ok,
        'rows', r.rows, 'took_ms', r.took_ms, 'late_ms', p_late,
        'skipped', p_skips);
BEGIN
    IF r.ok THEN
        RETURN v_result;
    END IF;
    RETURN v_result || jsonb_build_object(
        'error', r.error, 'sqlstate', r.sqlstate, 'attempt', p_attempt,
        'retry_at', timers._iso(p_retry_at), 'gave_up', p_given_up, 'paused', p_paused);
END
$$;

-- ---------------------------------------------------------------------------
-- Rights: the runner's role runs a fire (its routines run as the caller)
-- ---------------------------------------------------------------------------
REVOKE ALL ON PROCEDURE
    timers._fire_many(text,bigint[],bigint[],boolean,bigint,integer,integer,text,text[],text[],jsonb,jsonb)
    FROM PUBLIC, pgtimers_reader, pgtimers_admin, pgtimers_runner;
GRANT EXECUTE ON PROCEDURE
    timers._fire_many(text,bigint[],bigint[],boolean,bigint,integer,integer,text,text[],text[],jsonb,jsonb)
    TO pgtimers_runner;
REVOKE ALL ON FUNCTION
    timers._fire_stops(jsonb),
    timers._fire_kept(jsonb),
    timers._fire(text,bigint[],bigint[],boolean,bigint,text),
    timers._say_claimed(text,text,bigint,timestamp with time zone),
    timers._claim_due(bigint[],text[]),
    timers._keyed_claim(bigint[]),
    timers._claim_backfill(bigint[],text[]),
    timers._claim_follow(bigint[],text[]),
    timers._run_lost(text,bigint,timestamp with time zone,text,jsonb),
    timers._run_due(bigint,timestamp with time zone,text,jsonb),
    timers._run_retry(timers.timers,text,jsonb),
    timers._give_up_retry(timers.timers,text,text),
    timers._run_request(bigint,text,jsonb),
    timers._run_backfill(bigint,text,jsonb),
    timers._run_follow(timers.timers,timestamp with time zone,text,jsonb),
    timers._keyed_fire(bigint,timestamp with time zone,text,jsonb),
    timers._execute(bigint,text,name,text,interval,timestamp with time zone,timestamp with time zone,integer,text,text,timestamp with time zone,timestamp with time zone,jsonb),
    timers._run_clock(timers.timers,jsonb),
    timers._limit_lock_waits(),
    timers._run_error(text,text,interval),
    timers._lock_waiter(text),
    timers._yielded(timers.timers,text,timestamp with time zone,timers.run_outcome,jsonb),
    timers._ran_after_yield(jsonb,bigint),
    timers._due_recorded(timers.timers,text,timestamp with time zone,timestamp with time zone,timestamp with time zone,timers.run_outcome,jsonb,text),
    timers._retry_recorded(timers.timers,timestamp with time zone,timers.run_outcome,text),
    timers._request_recorded(timers.run_requests,timers.timers,timestamp with time zone,timers.run_outcome,text),
    timers._attempt_outcome(timers.timers,integer,boolean,text,timestamp with time zone,timestamp with time zone),
    timers._failed_outcome(timers.timers,integer,text,timestamp with time zone,text),
    timers._attempt_recorded(timers.timers,text,timestamp with time zone,integer,timers.run_outcome,bigint,timestamp with time zone,text,boolean,integer,text),
    timers._announce_failure(timers.timers,text,timestamp with time zone,integer,timers.run_outcome,timestamp with time zone,text,boolean,integer,text,bigint),
    timers._attempt_result(timers.timers,text,timestamp with time zone,integer,timers.run_outcome,bigint,jsonb,timestamp with time zone,text,boolean)
    FROM PUBLIC, pgtimers_reader, pgtimers_admin, pgtimers_runner;
GRANT EXECUTE ON FUNCTION
    timers._fire_stops(jsonb),
    timers._fire_kept(jsonb),
    timers._fire(text,bigint[],bigint[],boolean,bigint,text),
    timers._say_claimed(text,text,bigint,timestamp with time zone),
    timers._claim_due(bigint[],text[]),
    timers._keyed_claim(bigint[]),
    timers._claim_backfill(bigint[],text[]),
    timers._claim_follow(bigint[],text[]),
    timers._run_lost(text,bigint,timestamp with time zone,text,jsonb),
    timers._run_due(bigint,timestamp with time zone,text,jsonb),
    timers._run_retry(timers.timers,text,jsonb),
    timers._give_up_retry(timers.timers,text,text),
    timers._run_request(bigint,text,jsonb),
    timers._run_backfill(bigint,text,jsonb),
    timers._run_follow(timers.timers,timestamp with time zone,text,jsonb),
    timers._keyed_fire(bigint,timestamp with time zone,text,jsonb),
    timers._execute(bigint,text,name,text,interval,timestamp with time zone,timestamp with time zone,integer,text,text,timestamp with time zone,timestamp with time zone,jsonb),
    timers._run_clock(timers.timers,jsonb),
    timers._limit_lock_waits(),
    timers._run_error(text,text,interval),
    timers._lock_waiter(text),
    timers._yielded(timers.timers,text,timestamp with time zone,timers.run_outcome,jsonb),
    timers._ran_after_yield(jsonb,bigint),
    timers._due_recorded(timers.timers,text,timestamp with time zone,timestamp with time zone,timestamp with time zone,timers.run_outcome,jsonb,text),
    timers._retry_recorded(timers.timers,timestamp with time zone,timers.run_outcome,text),
    timers._request_recorded(timers.run_requests,timers.timers,timestamp with time zone,timers.run_outcome,text),
    timers._attempt_outcome(timers.timers,integer,boolean,text,timestamp with time zone,timestamp with time zone),
    timers._failed_outcome(timers.timers,integer,text,timestamp with time zone,text),
    timers._attempt_recorded(timers.timers,text,timestamp with time zone,integer,timers.run_outcome,bigint,timestamp with time zone,text,boolean,integer,text),
    timers._announce_failure(timers.timers,text,timestamp with time zone,integer,timers.run_outcome,timestamp with time zone,text,boolean,integer,text,bigint),
    timers._attempt_result(timers.timers,text,timestamp with time zone,integer,timers.run_outcome,bigint,jsonb,timestamp with time zone,text,boolean)
    TO pgtimers_runner;
