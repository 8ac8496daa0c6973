-- pgtimers code: run groups (issue 34): at most max_running timers of a group run at once,
-- across all runners. A group (timers.run_groups) has slot rows 1..max_running
-- (timers.run_group_slots). A run of a timer of a group locks a free slot row FOR UPDATE
-- SKIP LOCKED in the run's own transaction (timers._group_slot), which commits the run's
-- result with its claim: the slot frees exactly when the run ends, whatever way it ends
-- (a crash, a lost session included). A claim that finds its timer's group full passes
-- over it (timers._group_claim, caught by timers._fire) and takes the next due timer;
-- the due time waits, still owed, and starts when a slot frees, late by as long, or is
-- skipped by the usual late rule when its next due time comes first.
--
-- Repeatable: applied whole on every install and upgrade, after the versioned
-- migrations (docs/design.md). Each object here is defined in this file only.

-- A group's name: 1 to 64 letters, digits, "_" and "-", as a timer's (exact: case counts).
-- NULL or a bad name: 22004 / 22023, naming it.
CREATE OR REPLACE FUNCTION timers._check_group_name(p_group text) RETURNS text
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $$
BEGIN
    IF p_group IS NULL THEN
        RAISE EXCEPTION 'a run group needs a name, not NULL' USING ERRCODE = '22004';
    END IF;
    IF p_group !~ '^[A-Za-z0-9_-]{1,64}$' THEN
        RAISE EXCEPTION 'bad run group name %: use 1 to 64 letters, digits, "_" and "-"',
            timers._quoted(p_group) USING ERRCODE = '22023';
    END IF;
    RETURN p_group;
END
$$;

-- The group p_group of a timer being saved (the caller is timers._save, which runs as the
-- owner of schema timers): made, with max_running 1, when it does not exist yet
-- (timers.set_group changes its limit). p_autonomous: an autonomous timer runs outside
-- the transaction a slot is held in, so it cannot be in a group (22023).
CREATE OR REPLACE FUNCTION timers._ensure_group(p_group text, p_autonomous boolean) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF p_group IS NULL THEN
        RETURN;
    END IF;
    PERFORM timers._check_group_name(p_group);
    IF p_autonomous THEN
        RAISE EXCEPTION 'an autonomous timer cannot be in run group %: its SQL runs outside the transaction that holds the group''s slot',
            timers._quoted(p_group)
            USING ERRCODE = '22023',
                  HINT = 'Save it with autonomous => false, or without run_group.';
    END IF;
    INSERT INTO timers.run_groups (name) VALUES (p_group) ON CONFLICT (name) DO NOTHING;
    IF FOUND THEN
        INSERT INTO timers.run_group_slots (run_group, slot) VALUES (p_group, 1);
    END IF;
END
$$;

-- Lock a free slot of group p_group for the rest of the transaction (FOR UPDATE SKIP
-- LOCKED: a slot held by another run is passed over); false when all its slots 1..
-- max_running are held. A transaction holds one slot at most: the run's claim took it,
-- the run itself asks again. pgtimers.run_group, for the transaction, says which group's
-- slot it holds, with the transaction's id: a value a run's SQL left in the session
-- (timers._session_reset resets it anyway) names another transaction, and takes no slot.
CREATE OR REPLACE FUNCTION timers._group_slot(p_group text) RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    v_nil text;  -- what a call whose value is not needed returns (not PERFORM)
BEGIN
    -- (no id yet: no slot yet; pg_current_xact_id() here would give a look an id to commit)
    IF current_setting('pgtimers.run_group', true) = p_group || ' ' || pg_current_xact_id_if_assigned() THEN
        RETURN true;
    END IF;
    PERFORM 1 FROM timers.run_group_slots s JOIN timers.run_groups g ON g.name = s.run_group
      WHERE s.run_group = p_group AND s.slot <= g.max_running
      ORDER BY s.slot
      LIMIT 1
        FOR UPDATE OF s SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    -- (the slot's row lock gave the transaction its id)
    v_nil := set_config('pgtimers.run_group', p_group || ' ' || pg_current_xact_id(), true);
    RETURN true;
END
$$;

-- A claim of a timer of group p_group: take a slot (timers._group_slot), or raise PGT02
-- (DETAIL: the group), which timers._fire catches: it rolls the claim back (the timer's
-- row lock goes with it) and claims again without the group's timers.
CREATE OR REPLACE FUNCTION timers._group_claim(p_group text) RETURNS void
    LANGUAGE plpgsql VOLATILE
    AS $$
BEGIN
    IF NOT timers._group_slot(p_group) THEN
        RAISE EXCEPTION 'run group % is full', timers._quoted(p_group)
            USING ERRCODE = 'PGT02', DETAIL = p_group;
    END IF;
END
$$;

-- After a run of a timer of group p_group (the caller's transaction holds its slot):
-- when others of the group are due, tell the runners (NOTIFY pgtimers, delivered with the
-- commit that frees the slot), so that one of them starts at once.
CREATE OR REPLACE FUNCTION timers._group_freed(p_group text) RETURNS void
    LANGUAGE plpgsql VOLATILE
    AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM timers.timers t
                WHERE t.run_group = p_group AND t.fire_at <= now() AND t.test_clock IS NULL) THEN
        PERFORM timers._notify('group_slot', NULL);
    END IF;
END
$$;

-- The body of timers.set_group: the group is made when it does not exist; its slot rows
-- 1..p_max exist after (those above a lowered limit stay, unused: a run holding one ends
-- as it would, and no new run takes one). Audited; runners are told (a raised limit lets
-- waiting timers start at once).
CREATE OR REPLACE FUNCTION timers._set_group(p_actor name, p_name text, p_max integer) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_old integer;
BEGIN
    PERFORM timers._take_ticket(p_actor, 'set a run group');
    PERFORM timers._check_group_name(p_name);
    IF p_max IS NULL OR p_max < 1 OR p_max > 1000 THEN
        RAISE EXCEPTION 'bad max_running %: use 1 to 1000 (how many timers of group % may run at once)',
            coalesce(p_max::text, 'NULL'), timers._quoted(p_name) USING ERRCODE = '22023';
    END IF;
    SELECT g.max_running INTO v_old FROM timers.run_groups g WHERE g.name = p_name FOR UPDATE;
    INSERT INTO timers.run_groups AS g (name, max_running) VALUES (p_name, p_max)
    ON CONFLICT (name) DO UPDATE SET max_running = EXCLUDED.max_running, updated_at = now();
    INSERT INTO timers.run_group_slots (run_group, slot)
    SELECT p_name, n FROM generate_series(1, p_max) n
    ON CONFLICT (run_group, slot) DO NOTHING;
    PERFORM timers._audit(p_actor, 'set_group', p_name, jsonb_build_object('from', v_old, 'to', p_max));
    PERFORM timers._notify('set_group', NULL);
    RETURN jsonb_build_object('name', p_name, 'max_running', p_max,
        'timers', (SELECT count(*) FROM timers.timers t WHERE t.run_group = p_name));
END
$$;

CREATE OR REPLACE FUNCTION timers.set_group(name text, max_running integer DEFAULT 1) RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM timers._require_admin('set a run group');
    RETURN timers._set_group(current_user, set_group.name, set_group.max_running);
END
$$;

COMMENT ON FUNCTION timers.set_group(text, integer) IS
    'Make run group name, or change it: at most max_running (1 to 1000) of its timers run at once, across all runners (timers.save(..., run_group => name) puts a timer in it). Returns {name, max_running, timers}. Needs pgtimers_admin.';

-- ---------------------------------------------------------------------------
-- Rights
-- ---------------------------------------------------------------------------
REVOKE ALL ON FUNCTION
    timers._check_group_name(text),
    timers._ensure_group(text,boolean),
    timers._group_slot(text),
    timers._group_claim(text),
    timers._group_freed(text),
    timers._set_group(name,text,integer),
    timers.set_group(text,integer)
    FROM PUBLIC, pgtimers_reader, pgtimers_admin, pgtimers_runner;
GRANT EXECUTE ON FUNCTION
    timers._group_slot(text),
    timers._group_claim(text),
    timers._group_freed(text)
    TO pgtimers_runner;
GRANT EXECUTE ON FUNCTION
    timers.set_group(text,integer)
    TO PUBLIC;
GRANT EXECUTE ON FUNCTION
    timers._set_group(name,text,integer)
    TO pgtimers_admin;
